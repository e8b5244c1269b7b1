//! The MSL simulator as an [`MslDevice`]: tensors and weights in host memory, every dispatch of
//! qwen35's MSL launch code run by the simulator with the launch it computed. A dispatch whose
//! SIMD-group calls or barriers diverge, or whose threadgroup memory exceeds 32 KiB, fails.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use qwen35::backend::gpu::msl_kernels::MslKernel;
use qwen35::backend::gpu::msl_ops::{Dispatch, MslDevice, WeightLayout, WeightPart};
use qwen35::backend::gpu::Storage;
use qwen35::backend::BackendError;
use qwen35::quant::{row_bytes, GgmlType};

use super::{Counts, DeviceBuffer, Order, Program};

pub struct SimTensor {
    pub rows: usize,
    pub cols: usize,
    pub buffer: DeviceBuffer,
    pub storage: Storage,
}

impl SimTensor {
    /// The values as f32, whatever the storage.
    pub fn values(&self) -> Vec<f32> {
        match self.storage {
            Storage::F32 => self.buffer.f32s(),
            Storage::F16 => self
                .buffer
                .bytes()
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }
}

pub struct SimWeight {
    name: String,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    /// (first row, rows, their bytes)
    parts: Vec<(usize, usize, DeviceBuffer)>,
}

impl SimWeight {
    /// A weight of `rows` rows of `cols` elements from its file bytes, in parts of at most
    /// `max_part_rows` rows (as the wgpu backend splits weights past the binding limit).
    pub fn new(
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        max_part_rows: usize,
    ) -> SimWeight {
        let row_bytes = row_bytes(ty, cols as u64).expect("whole blocks") as usize;
        assert_eq!(rows * row_bytes, bytes.len(), "{name}: weight bytes");
        let parts = (0..rows)
            .step_by(max_part_rows.max(1))
            .map(|first| {
                let count = max_part_rows.min(rows - first);
                let part = &bytes[first * row_bytes..(first + count) * row_bytes];
                (first, count, DeviceBuffer::from_bytes(part))
            })
            .collect();
        SimWeight {
            name: name.into(),
            ty,
            rows,
            cols,
            row_bytes,
            parts,
        }
    }
}

/// Totals over the dispatches so far.
#[derive(Clone, Debug, Default)]
pub struct SimStats {
    pub dispatches: u64,
    pub simd_calls: u64,
    pub barriers: u64,
    pub max_threadgroup_bytes: u64,
    /// Dispatches per kernel name.
    pub by_kernel: HashMap<String, u64>,
}

pub struct SimDevice {
    pub order: Order,
    stats: Mutex<SimStats>,
    programs: Mutex<HashMap<MslKernel, Arc<Program>>>,
}

fn sim_error(kernel: MslKernel, detail: String) -> BackendError {
    BackendError::Shape {
        op: kernel.entry(),
        detail: format!("MSL simulator: {detail}"),
    }
}

impl SimDevice {
    pub fn new(order: Order) -> SimDevice {
        SimDevice {
            order,
            stats: Mutex::default(),
            programs: Mutex::default(),
        }
    }

    pub fn stats(&self) -> SimStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Dispatches since the last call.
    pub fn take_dispatches(&self) -> u64 {
        std::mem::take(
            &mut self
                .stats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .dispatches,
        )
    }

    pub fn tensor(&self, rows: usize, cols: usize, values: &[f32]) -> SimTensor {
        assert_eq!(rows * cols, values.len(), "tensor values");
        SimTensor {
            rows,
            cols,
            buffer: DeviceBuffer::from_f32(values),
            storage: Storage::F32,
        }
    }

    /// A KV cache holding `values` stored as `storage` (in f16 rounded to nearest).
    pub fn cache(&self, rows: usize, cols: usize, values: &[f32], storage: Storage) -> SimTensor {
        assert_eq!(rows * cols, values.len(), "cache values");
        let buffer = match storage {
            Storage::F32 => DeviceBuffer::from_f32(values),
            Storage::F16 => DeviceBuffer::from_bytes(
                &values
                    .iter()
                    .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
        };
        SimTensor {
            rows,
            cols,
            buffer,
            storage,
        }
    }

    /// A weight of `rows` rows of `cols` elements from its file bytes, in parts of at most
    /// `max_part_rows` rows (as the wgpu backend splits weights past the binding limit).
    pub fn weight(
        &self,
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        max_part_rows: usize,
    ) -> SimWeight {
        SimWeight::new(name, ty, rows, cols, bytes, max_part_rows)
    }

    fn program(&self, kernel: MslKernel) -> Result<Arc<Program>, BackendError> {
        let mut programs = self.programs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(program) = programs.get(&kernel) {
            return Ok(Arc::clone(program));
        }
        let program = Program::build(&kernel.name(), &kernel.source())
            .map_err(|e| sim_error(kernel, e.to_string()))?;
        programs.insert(kernel, Arc::clone(&program));
        Ok(program)
    }

    fn record(&self, kernel: MslKernel, counts: &Counts) {
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.dispatches += 1;
        stats.simd_calls += counts.simd_calls;
        stats.barriers += counts.barriers;
        stats.max_threadgroup_bytes = stats.max_threadgroup_bytes.max(counts.threadgroup_bytes);
        *stats.by_kernel.entry(kernel.name()).or_default() += 1;
    }
}

impl MslDevice for SimDevice {
    type Tensor = SimTensor;
    type Weight = SimWeight;
    type Buffer = DeviceBuffer;

    fn dims(&self, x: &SimTensor) -> (usize, usize) {
        (x.rows, x.cols)
    }

    fn storage(&self, x: &SimTensor) -> Storage {
        x.storage
    }

    fn buffer<'a>(&self, x: &'a SimTensor) -> &'a DeviceBuffer {
        &x.buffer
    }

    fn weight<'a>(&self, w: &'a SimWeight) -> WeightLayout<'a, DeviceBuffer> {
        WeightLayout {
            name: &w.name,
            ty: w.ty,
            rows: w.rows,
            cols: w.cols,
            row_bytes: w.row_bytes,
            parts: w
                .parts
                .iter()
                .map(|(first_row, rows, buffer)| WeightPart {
                    first_row: *first_row,
                    rows: *rows,
                    buffer,
                })
                .collect(),
        }
    }

    /// Filled with NaN: a kernel that leaves part of its output unwritten fails the comparison.
    fn output(&self, rows: usize, cols: usize) -> Result<SimTensor, BackendError> {
        Ok(self.tensor(rows, cols, &vec![f32::NAN; rows * cols]))
    }

    fn dispatch(&self, d: &Dispatch<'_, DeviceBuffer>) -> Result<(), BackendError> {
        let program = self.program(d.kernel)?;
        let params = DeviceBuffer::from_u32(d.params);
        let mut buffers = vec![&params];
        buffers.extend_from_slice(d.buffers);
        let counts = program
            .dispatch(
                d.kernel.entry(),
                [d.threadgroups, 1, 1],
                [d.kernel.threads_per_threadgroup(), 1, 1],
                &buffers,
                self.order,
            )
            .map_err(|e| sim_error(d.kernel, e.to_string()))?;
        counts
            .converged()
            .map_err(|e| sim_error(d.kernel, format!("diverged: {e}")))?;
        if matches!(self.order, Order::Random(_)) && counts.interleavings == 0 {
            return Err(sim_error(
                d.kernel,
                "a random schedule never switched threads at a memory access".into(),
            ));
        }
        self.record(d.kernel, &counts);
        Ok(())
    }
}
