//! Records dispatches into an open compute pass. A readback (or a host write, which must land
//! after the work recorded before it) ends the pass and submits; so does every
//! [`DISPATCHES_PER_SUBMIT`]-th dispatch, so that the GPU runs the start of a forward while the
//! CPU still records the rest.
//!
//! Kernel parameters (sizes, offsets, eps) are tiny structs. Each dispatch takes the next slot of
//! a host-side staging area; the slots are written to their buffers once, right before the submit
//! that uses them. A forward records the same sequence of (kernel, parameter slot, buffers) every
//! token — the buffer pool hands out the same buffers in the same order — so
//! bind groups are cached by that key and built only on the first token.
//!
//! The parameters are bound as read-only storage, not as uniforms: Mesa 22's lavapipe specializes
//! a shader on the uniform values that bound its loops, compiling a new variant at every dispatch
//! and never freeing it, which made decode slow and its memory grow without end.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Mutex;

use super::kernels::{Kernel, Pipelines};
use super::profiler::{Profiler, MAX_STAMPED_DISPATCHES};
use super::program::Program;
use super::GpuError;
use crate::backend::BackendStats;

/// The most u32 words a kernel's parameter struct has.
const MAX_PARAM_WORDS: usize = 12;
/// Parameter slots per parameter buffer.
const SLOTS_PER_CHUNK: usize = 256;
/// Dispatches per submit: more than a decode step of the largest model records, so that a step
/// is one submit (greedy decoding keeps the GPU busy with the previous step meanwhile); a long
/// prefill still reaches the GPU in pieces.
const DISPATCHES_PER_SUBMIT: usize = 1024;
/// Cached bind groups kept before the cache is emptied (prefills of many lengths would
/// otherwise keep every buffer they ever bound alive).
const MAX_CACHED_BIND_GROUPS: usize = 16_384;

const _: () = assert!(DISPATCHES_PER_SUBMIT <= MAX_STAMPED_DISPATCHES);

struct OpenPass {
    // Declared first so that it is dropped before the encoder it records into. None after a
    // clear, until the next dispatch begins a pass.
    pass: Option<wgpu::ComputePass<'static>>,
    encoder: wgpu::CommandEncoder,
}

/// Buffers for the parameters of the dispatches recorded since the last submit.
struct ParamArena {
    slot_bytes: usize,
    chunks: Vec<wgpu::Buffer>,
    staged: Vec<u8>,
    used: usize,
}

impl ParamArena {
    fn new(min_offset_alignment: u32) -> ParamArena {
        let align = (min_offset_alignment as usize).max(1);
        let slot_bytes = (MAX_PARAM_WORDS * 4).div_ceil(align) * align;
        ParamArena {
            slot_bytes,
            chunks: Vec::new(),
            staged: Vec::new(),
            used: 0,
        }
    }

    /// Stages `words` in a fresh slot; returns its buffer's index and the offset in it.
    fn push(&mut self, device: &wgpu::Device, words: &[u32]) -> (usize, u64) {
        let chunk = self.used / SLOTS_PER_CHUNK;
        if chunk == self.chunks.len() {
            self.chunks
                .push(device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("kernel parameters"),
                    size: (SLOTS_PER_CHUNK * self.slot_bytes) as u64,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }));
        }
        let start = self.used * self.slot_bytes;
        self.staged.resize(start + self.slot_bytes, 0);
        for (dst, w) in self.staged[start..].chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
        self.used += 1;
        let offset = ((start / self.slot_bytes) % SLOTS_PER_CHUNK * self.slot_bytes) as u64;
        (chunk, offset)
    }

    /// Writes the staged slots to their buffers (they land before the next submit's commands).
    fn upload(&mut self, queue: &wgpu::Queue) {
        let chunk_bytes = SLOTS_PER_CHUNK * self.slot_bytes;
        for (chunk, staged) in self.chunks.iter().zip(self.staged.chunks(chunk_bytes)) {
            queue.write_buffer(chunk, 0, staged);
        }
        self.staged.clear();
        self.used = 0;
    }
}

/// What a bind group binds: the same key means the same bind group.
#[derive(PartialEq, Eq, Hash)]
struct BindKey {
    program: Program,
    param_chunk: usize,
    param_offset: u64,
    buffers: Vec<wgpu::Buffer>,
}

struct State {
    open: Option<OpenPass>,
    dispatches_in_pass: usize,
    /// Dispatches recorded, buffers cleared and host writes made, ever.
    work_recorded: u64,
    params: ParamArena,
    bind_groups: HashMap<BindKey, wgpu::BindGroup>,
    profiler: Profiler,
}

pub struct Recorder {
    device: wgpu::Device,
    queue: wgpu::Queue,
    max_workgroups: u32,
    state: Mutex<State>,
    spare_readback: Mutex<Option<wgpu::Buffer>>,
}

/// A copy to the host that has been submitted and not yet waited for.
pub struct InFlightRead {
    device: wgpu::Device,
    staging: wgpu::Buffer,
    size: u64,
    index: wgpu::SubmissionIndex,
    receiver: mpsc::Receiver<Result<(), wgpu::BufferAsyncError>>,
}

impl InFlightRead {
    /// Waits for the copy (and the work submitted before it) and returns the bytes.
    pub fn wait(self) -> Result<Vec<u8>, GpuError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(self.index),
                timeout: None,
            })
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        self.receiver
            .recv()
            .map_err(|e| GpuError::Readback(e.to_string()))?
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        let bytes = self
            .staging
            .get_mapped_range(..self.size)
            .map_err(|e| GpuError::Readback(e.to_string()))?
            .to_vec();
        self.staging.unmap();
        Ok(bytes)
    }
}

/// A buffer bound to a kernel: the whole buffer, at bindings 1, 2, … in order.
pub type Binding<'a> = &'a wgpu::Buffer;

/// One dispatch of a WGSL kernel: `params` are the words of its parameter buffer, `buffers`
/// its bindings, and `class` (the kernel's own when None) and `bytes_read` (weights and
/// activations) are for the profile.
#[derive(Clone, Copy)]
pub struct KernelDispatch<'a> {
    pub kernel: Kernel,
    pub class: Option<&'static str>,
    pub params: &'a [u32],
    pub buffers: &'a [Binding<'a>],
    pub workgroups: usize,
    pub bytes_read: u64,
}

impl Recorder {
    pub fn new(device: wgpu::Device, queue: wgpu::Queue) -> Recorder {
        let limits = device.limits();
        Recorder {
            max_workgroups: limits.max_compute_workgroups_per_dimension,
            state: Mutex::new(State {
                open: None,
                dispatches_in_pass: 0,
                work_recorded: 0,
                params: ParamArena::new(limits.min_storage_buffer_offset_alignment),
                bind_groups: HashMap::new(),
                profiler: Profiler::new(&device, &queue),
            }),
            spare_readback: Mutex::new(None),
            device,
            queue,
        }
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, GpuError> {
        self.state
            .lock()
            .map_err(|_| GpuError::Device("a thread panicked while recording".into()))
    }

    /// Records `dispatch`, its workgroups folded into two grid dimensions.
    pub fn dispatch(
        &self,
        pipelines: &Pipelines,
        dispatch: &KernelDispatch<'_>,
    ) -> Result<(), GpuError> {
        let KernelDispatch {
            kernel,
            class,
            params,
            buffers,
            workgroups,
            bytes_read,
        } = *dispatch;
        if workgroups == 0 {
            return Ok(());
        }
        let max = self.max_workgroups as usize;
        let x = workgroups.min(max);
        let y = workgroups.div_ceil(x);
        let pipeline = pipelines.get(kernel)?;
        self.dispatch_program(
            pipeline,
            Program::Wgsl(kernel),
            class,
            params,
            buffers,
            [x, y, 1],
            bytes_read,
        )
    }

    /// Records `pipeline` (running `program`) over a grid of `workgroups`, counted in the profile
    /// as `class` (the program's own when None).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_program(
        &self,
        pipeline: &wgpu::ComputePipeline,
        program: Program,
        class: Option<&'static str>,
        params: &[u32],
        buffers: &[Binding<'_>],
        workgroups: [usize; 3],
        bytes_read: u64,
    ) -> Result<(), GpuError> {
        let max = self.max_workgroups as usize;
        if workgroups.iter().any(|&w| w > max) || params.len() > MAX_PARAM_WORDS {
            return Err(GpuError::Shape {
                op: "dispatch",
                detail: format!(
                    "{}: {workgroups:?} workgroups, {} parameter words",
                    program.name(),
                    params.len()
                ),
            });
        }
        if workgroups.contains(&0) {
            return Ok(());
        }
        let mut guard = self.lock()?;
        let state = &mut *guard;
        let (param_chunk, param_offset) = state.params.push(&self.device, params);
        if state.bind_groups.len() >= MAX_CACHED_BIND_GROUPS {
            state.bind_groups.clear();
        }
        let key = BindKey {
            program,
            param_chunk,
            param_offset,
            buffers: buffers.iter().map(|&b| b.clone()).collect(),
        };
        let bind_group = match state.bind_groups.entry(key) {
            Entry::Occupied(cached) => cached.into_mut(),
            Entry::Vacant(slot) => {
                let bind_group = self.bind_group(pipeline, &state.params, slot.key(), params.len());
                slot.insert(bind_group)
            }
        };
        let open = state.open.get_or_insert_with(|| OpenPass {
            pass: None,
            encoder: self.new_encoder(),
        });
        let pass = open.pass.get_or_insert_with(|| {
            open.encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor::default())
                .forget_lifetime()
        });
        state
            .profiler
            .before_dispatch(pass, program, class, bytes_read);
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &*bind_group, &[]);
        let [x, y, z] = workgroups.map(|w| w as u32);
        pass.dispatch_workgroups(x, y, z);
        state.dispatches_in_pass += 1;
        state.work_recorded += 1;
        if state.dispatches_in_pass >= DISPATCHES_PER_SUBMIT {
            let encoder = self.close(state);
            self.submit(state, encoder);
        }
        Ok(())
    }

    /// The bind group of `key`: its parameter slot at binding 0, its buffers whole from 1 on.
    fn bind_group(
        &self,
        pipeline: &wgpu::ComputePipeline,
        params: &ParamArena,
        key: &BindKey,
        param_words: usize,
    ) -> wgpu::BindGroup {
        let param_size = (param_words.max(1) * 4).div_ceil(16) * 16;
        let mut entries = Vec::with_capacity(key.buffers.len() + 1);
        if let Some(chunk) = params.chunks.get(key.param_chunk) {
            entries.push(wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: chunk,
                    offset: key.param_offset,
                    size: std::num::NonZeroU64::new(param_size as u64),
                }),
            });
        }
        entries.extend(
            key.buffers
                .iter()
                .zip(1..)
                .map(|(b, i)| wgpu::BindGroupEntry {
                    binding: i,
                    resource: b.as_entire_binding(),
                }),
        );
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    fn new_encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
    }

    /// The open encoder with its pass (if any) ended, or a new one; nothing is left open.
    fn end_pass(&self, state: &mut State) -> OpenPass {
        match state.open.take() {
            Some(mut open) => {
                if let Some(mut pass) = open.pass.take() {
                    state.profiler.end_pass(&mut pass);
                }
                open
            }
            None => OpenPass {
                pass: None,
                encoder: self.new_encoder(),
            },
        }
    }

    /// Ends the open pass (if any) and returns its encoder for more commands.
    fn close(&self, state: &mut State) -> wgpu::CommandEncoder {
        state.dispatches_in_pass = 0;
        self.end_pass(state).encoder
    }

    fn submit(
        &self,
        state: &mut State,
        mut encoder: wgpu::CommandEncoder,
    ) -> wgpu::SubmissionIndex {
        state.profiler.before_submit(&self.device, &mut encoder);
        state.params.upload(&self.queue);
        self.queue.submit([encoder.finish()])
    }

    /// Submits the recorded work without waiting, so that later queue writes land after it.
    pub fn flush(&self) -> Result<(), GpuError> {
        let mut state = self.lock()?;
        if state.open.is_some() {
            let encoder = self.close(&mut state);
            self.submit(&mut state, encoder);
        }
        Ok(())
    }

    /// Submits the recorded work and the queue writes made since the last submit (even with no
    /// work recorded: a queue write alone runs only at a submit), without waiting.
    pub fn submit_all(&self) -> Result<(), GpuError> {
        let mut state = self.lock()?;
        let encoder = self.close(&mut state);
        self.submit(&mut state, encoder);
        Ok(())
    }

    /// Zeroes `buffer` after the work recorded so far and before the work recorded next.
    pub fn clear(&self, buffer: &wgpu::Buffer) -> Result<(), GpuError> {
        let mut guard = self.lock()?;
        let state = &mut *guard;
        let mut open = self.end_pass(state);
        open.encoder.clear_buffer(buffer, 0, None);
        state.open = Some(open);
        state.work_recorded += 1;
        Ok(())
    }

    /// Writes `data` into `buffer` at `offset` after the work recorded so far (a queue write
    /// lands before the next submit's commands, so the recorded ones are submitted first).
    pub fn write(&self, buffer: &wgpu::Buffer, offset: u64, data: &[u8]) -> Result<(), GpuError> {
        self.flush()?;
        self.queue.write_buffer(buffer, offset, data);
        self.lock()?.work_recorded += 1;
        Ok(())
    }

    /// Counts the dispatches recorded and the writes made through [`Recorder::write`]: when it
    /// has not moved, no buffer has changed.
    pub fn work_recorded(&self) -> Result<u64, GpuError> {
        Ok(self.lock()?.work_recorded)
    }

    /// Submits the recorded work plus a copy of `size` bytes of `buffer` from `offset`, waits,
    /// and returns the bytes.
    pub fn read(&self, buffer: &wgpu::Buffer, offset: u64, size: u64) -> Result<Vec<u8>, GpuError> {
        // The last readback's buffer when it is big enough (decode reads the same logits each
        // token); a concurrent readback that finds it taken makes its own.
        let spare = self
            .spare_readback
            .lock()
            .ok()
            .and_then(|mut spare| spare.take());
        let staging = match spare {
            Some(spare) if spare.size() >= size => spare,
            _ => self.staging(size),
        };
        let bytes = self
            .start_read_into(buffer, offset, size, staging.clone())?
            .wait()?;
        if let Ok(mut spare) = self.spare_readback.lock() {
            *spare = Some(staging);
        }
        self.lock()?.profiler.collect(&self.device)?;
        Ok(bytes)
    }

    /// Submits the recorded work plus a copy of `size` bytes of `buffer` from `offset`, and
    /// returns without waiting; work recorded later runs while the copy is awaited.
    pub fn start_read(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<InFlightRead, GpuError> {
        self.start_read_into(buffer, offset, size, self.staging(size))
    }

    fn staging(&self, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    fn start_read_into(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
        staging: wgpu::Buffer,
    ) -> Result<InFlightRead, GpuError> {
        let index = {
            let mut state = self.lock()?;
            let mut encoder = self.close(&mut state);
            encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
            self.submit(&mut state, encoder)
        };
        let (sender, receiver) = mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, ..size, move |result| {
            // The receiver waits in `wait`; a failed send means it is gone and nobody needs this.
            let _ = sender.send(result);
        });
        Ok(InFlightRead {
            device: self.device.clone(),
            staging,
            size,
            index,
            receiver,
        })
    }

    /// Turns per-class counting and GPU timestamps on or off.
    pub fn set_profiling(&self, on: bool) -> Result<(), GpuError> {
        self.lock()?.profiler.set_on(on);
        Ok(())
    }

    /// The counters and profile since the last call, which resets them; submits the open pass
    /// and waits for the profiled work.
    pub fn take_stats(&self) -> Result<BackendStats, GpuError> {
        let mut guard = self.lock()?;
        let state = &mut *guard;
        if state.open.is_some() {
            let encoder = self.close(state);
            self.submit(state, encoder);
        }
        state.profiler.take(&self.device)
    }
}
