//! Device memory: activation tensors (f32, or KV caches in f16), weights kept in their file
//! format and, for the prefill GEMM, their f16 copies.
//!
//! Activation buffers are recycled: a dropped tensor's buffer goes back to a pool by size class
//! and the next op output (or zero matrix, cleared) of that class takes it. A forward then
//! records the same buffers every token, so its bind groups come from the recorder's cache
//! instead of being built per dispatch. The pool gives its buffers back only when an allocation
//! finds no memory while f16 weight copies are kept, together with the copies
//! ([`Wgpu::let_copies_go`]).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::heap::{self, HeapBudget};
use super::kernels::WeightFormat;
use super::ops::{lock, lock_poisoned};
use super::options::AUTO_COPIES_SHARE;
use super::{GpuError, Wgpu};
use crate::quant::{row_bytes, GgmlType};

/// Free buffers by size class. Classes are a power of two split in eighths (at least 256 bytes),
/// so that prefills of nearby lengths share buffers while wasting at most a quarter.
#[derive(Debug, Default)]
pub(super) struct BufferPool {
    free: Mutex<HashMap<u64, Vec<wgpu::Buffer>>>,
}

impl BufferPool {
    fn size_class(bytes: u64) -> u64 {
        let bytes = bytes.max(256);
        let step = (bytes.next_power_of_two() / 8).max(256);
        bytes.div_ceil(step) * step
    }

    fn take(&self, class: u64) -> Option<wgpu::Buffer> {
        self.free.lock().ok()?.get_mut(&class)?.pop()
    }

    /// Drops every free buffer (wgpu frees each once no submitted work uses it); returns their
    /// bytes.
    fn release(&self) -> u64 {
        let Ok(mut free) = self.free.lock() else {
            return 0;
        };
        free.drain()
            .flat_map(|(_, buffers)| buffers)
            .map(|buffer| buffer.size())
            .sum()
    }

    /// Keeps `buffer` for reuse when it has a class size (uploads of exact sizes are dropped).
    fn give_back(&self, buffer: wgpu::Buffer) {
        let size = buffer.size();
        if size == Self::size_class(size) {
            if let Ok(mut free) = self.free.lock() {
                free.entry(size).or_default().push(buffer);
            }
        }
    }
}

/// How a tensor's values lie in its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Storage {
    F32,
    /// f16, two to a u32 word (a row of `cols` values is `cols / 2` words), so that kernels on
    /// devices without `SHADER_F16` read them with `unpack2x16float`. Only KV caches
    /// ([`Wgpu::kv_cache`]), whose rows are whole quads of values.
    F16,
}

impl Storage {
    pub fn value_bytes(self) -> u64 {
        match self {
            Storage::F32 => 4,
            Storage::F16 => 2,
        }
    }

    /// The f32 values of `bytes` stored this way.
    pub(super) fn values(self, bytes: &[u8]) -> Vec<f32> {
        match self {
            Storage::F32 => bytemuck::pod_collect_to_vec(bytes),
            Storage::F16 => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }

    /// `values` stored this way; past the f16 range they are clamped to it, as the kernels
    /// clamp what they store.
    fn bytes(self, values: &[f32]) -> Vec<u8> {
        match self {
            Storage::F32 => bytemuck::cast_slice(values).to_vec(),
            Storage::F16 => values
                .iter()
                .flat_map(|&x| {
                    let max = half::f16::MAX.to_f32();
                    half::f16::from_f32(x.clamp(-max, max)).to_le_bytes()
                })
                .collect(),
        }
    }
}

/// A row-major matrix in one storage buffer, f32 unless it is a KV cache ([`Storage`]). Not
/// `Clone`: two handles on one buffer could be bound as both input and in-place output of one
/// dispatch.
#[derive(Debug)]
pub struct GpuTensor {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) storage: Storage,
    /// Where the buffer goes when the tensor is dropped.
    pool: Option<Arc<BufferPool>>,
}

impl Drop for GpuTensor {
    /// Work recorded on the buffer stays ordered before any later use: the recorder's single
    /// queue and wgpu's barriers between dependent dispatches see to that.
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give_back(self.buffer.clone());
        }
    }
}

impl GpuTensor {
    pub fn dims(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub(super) fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Bytes of the values of `rows` rows.
    pub(super) fn row_bytes(&self, rows: usize) -> u64 {
        (rows * self.cols) as u64 * self.storage.value_bytes()
    }
}

/// Rows `first_row..first_row + rows` of a weight, in one buffer that fits a binding.
#[derive(Debug)]
pub(crate) struct WeightPart {
    pub first_row: usize,
    pub rows: usize,
    pub buffer: wgpu::Buffer,
}

/// A weight matrix of `rows × cols` elements, its blocks as the file stores them (Q6_K's padded
/// to whole words with [`super::GpuOptions::q6_k_aligned`]); `row_bytes` is a row's on the device.
#[derive(Debug)]
pub struct GpuWeight {
    pub(crate) name: String,
    /// What its matmuls count as in the profile, when not "matmul <type>".
    pub(crate) profile_class: Option<&'static str>,
    pub(crate) format: WeightFormat,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_bytes: usize,
    pub(crate) parts: Vec<WeightPart>,
}

/// An f16 matrix of `rows` × `cols` (both padded) in a pooled buffer, two halves a word.
#[derive(Debug)]
pub(super) struct HalfMatrix {
    pub rows: usize,
    pub cols: usize,
    pub words: GpuTensor,
}

/// Bytes staged at a time while padding a weight's blocks on upload.
const PADDING_STAGING_BYTES: usize = 16 << 20;

/// How a weight's blocks lie in its device buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockLayout {
    /// As in the file.
    File,
    /// Each block of `file` bytes followed by zeros up to `device` bytes.
    Padded { file: usize, device: usize },
}

impl BlockLayout {
    /// The layout of `ty` where the kernels read Q6_K blocks `q6_k_block_bytes` apart.
    fn of(ty: GgmlType, q6_k_block_bytes: usize) -> BlockLayout {
        match ty {
            GgmlType::Q6_K if q6_k_block_bytes != ty.block_bytes() => BlockLayout::Padded {
                file: ty.block_bytes(),
                device: q6_k_block_bytes,
            },
            _ => BlockLayout::File,
        }
    }

    /// The device bytes of `file_bytes` bytes of whole blocks.
    fn device_bytes(self, file_bytes: usize) -> usize {
        match self {
            BlockLayout::File => file_bytes,
            BlockLayout::Padded { file, device } => file_bytes / file * device,
        }
    }
}

impl GpuWeight {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dims(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// How many buffers the weight was split into.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }
}

/// Storage buffers may not be empty; bytes are padded up to a whole number of words.
fn padded_size(bytes: u64) -> u64 {
    bytes.max(4).div_ceil(4) * 4
}

const TENSOR_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl Wgpu {
    /// Fails unless `rows × cols` f32 values fit one storage binding.
    fn tensor_bytes(&self, what: &str, rows: usize, cols: usize) -> Result<u64, GpuError> {
        self.stored_bytes(what, Storage::F32, rows, cols)
    }

    /// Fails unless `rows × cols` values stored as `storage` fit one storage binding.
    fn stored_bytes(
        &self,
        what: &str,
        storage: Storage,
        rows: usize,
        cols: usize,
    ) -> Result<u64, GpuError> {
        let bytes = (rows as u64)
            .checked_mul(cols as u64)
            .and_then(|n| n.checked_mul(storage.value_bytes()))
            .unwrap_or(u64::MAX);
        if bytes > self.binding_limit {
            return Err(GpuError::TooLarge {
                what: format!("{what} tensor of {rows}×{cols} {storage:?}"),
                bytes,
                limit: self.binding_limit,
            });
        }
        Ok(bytes)
    }

    /// An f32 matrix from row-major host values.
    pub fn upload(&self, rows: usize, cols: usize, data: &[f32]) -> Result<GpuTensor, GpuError> {
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(GpuError::Shape {
                op: "upload",
                detail: format!("{rows}×{cols} from {} values", data.len()),
            });
        }
        let bytes = self.tensor_bytes("upload", rows, cols)?;
        let buffer = self.allocate("an uploaded tensor", padded_size(bytes), TENSOR_USAGE)?;
        if !data.is_empty() {
            self.recorder
                .queue()
                .write_buffer(&buffer, 0, bytemuck::cast_slice(data));
        }
        Ok(GpuTensor {
            rows,
            cols,
            buffer,
            storage: Storage::F32,
            pool: None,
        })
    }

    /// A zero matrix in a new buffer (wgpu clears new buffers).
    pub fn zeros(&self, rows: usize, cols: usize) -> Result<GpuTensor, GpuError> {
        self.zeros_stored(Storage::F32, rows, cols)
    }

    /// A zero KV cache of `rows` positions of `cols` values: in f16 where
    /// [`GpuOptions::f16_kv_cache`](super::GpuOptions::f16_kv_cache) is on and a row is whole
    /// quads of values (as every WGSL attention kernel's is), else in f32.
    pub fn kv_cache(&self, rows: usize, cols: usize) -> Result<GpuTensor, GpuError> {
        self.zeros_stored(self.kv_cache_storage(cols), rows, cols)
    }

    /// How [`Wgpu::kv_cache`] stores a cache of `cols` columns.
    pub fn kv_cache_storage(&self, cols: usize) -> Storage {
        if self.f16_kv_cache && cols.is_multiple_of(4) {
            Storage::F16
        } else {
            Storage::F32
        }
    }

    /// A zero matrix stored as `storage` (tests build caches of either kind on one device).
    pub fn zeros_stored(
        &self,
        storage: Storage,
        rows: usize,
        cols: usize,
    ) -> Result<GpuTensor, GpuError> {
        if storage == Storage::F16 && !cols.is_multiple_of(4) {
            return Err(GpuError::Shape {
                op: "zeros",
                detail: format!("f16 rows of {cols} values, not whole quads"),
            });
        }
        let class = BufferPool::size_class(self.stored_bytes("zeros", storage, rows, cols)?);
        // wgpu zeroes a new buffer; a recycled one is cleared.
        let buffer = match self.buffer_pool.take(class) {
            Some(buffer) => {
                self.recorder.clear(&buffer)?;
                buffer
            }
            None => self.new_buffer(class)?,
        };
        let mut tensor = self.pooled_tensor(rows, cols, buffer);
        tensor.storage = storage;
        Ok(tensor)
    }

    /// A matrix of unspecified values for an op to overwrite entirely: a recycled buffer when
    /// one of its size class is free.
    pub(crate) fn output(&self, rows: usize, cols: usize) -> Result<GpuTensor, GpuError> {
        let class = BufferPool::size_class(self.tensor_bytes("output", rows, cols)?);
        let buffer = match self.buffer_pool.take(class) {
            Some(buffer) => buffer,
            None => self.new_buffer(class)?,
        };
        Ok(self.pooled_tensor(rows, cols, buffer))
    }

    /// Device bytes allocated and not given back (weights, tensors, pooled buffers).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes.load(Ordering::Relaxed)
    }

    /// The GPU memory this process may use and uses, where the driver says (Vulkan).
    pub fn device_heap(&self) -> Option<HeapBudget> {
        heap::device_heap(&self.device)
    }

    /// Lets go of the weights' f16 copies and the pool's free buffers, and waits for the work
    /// recorded so far, so that wgpu frees what no submitted work uses; the memory limit counts
    /// them as given back.
    pub(super) fn give_back_memory(&self) -> Result<(), GpuError> {
        drop(std::mem::take(&mut *lock(&self.f16_copies)?));
        let released = self.buffer_pool.release();
        self.allocated_bytes.fetch_sub(released, Ordering::Relaxed);
        self.recorder.submit_all()?;
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        Ok(())
    }

    fn new_buffer(&self, size: u64) -> Result<wgpu::Buffer, GpuError> {
        self.allocate("a tensor", size, TENSOR_USAGE)
    }

    /// Lets every f16 weight copy go, and keeps no more, so that an allocation fits
    /// ([`Wgpu::give_back_memory`]); false (nothing done) when none is kept or one is being
    /// decoded (the copy's own allocation failed: `weight_halves` decodes into scratch then).
    pub(super) fn let_copies_go(&self) -> Result<bool, GpuError> {
        let kept = match self.f16_copies.try_lock() {
            Ok(copies) => !copies.is_empty(),
            Err(std::sync::TryLockError::WouldBlock) => false,
            Err(std::sync::TryLockError::Poisoned(_)) => return Err(lock_poisoned()),
        };
        if !kept {
            return Ok(false);
        }
        log::warn!(
            "wgpu: out of GPU memory with f16 weight copies kept: every copy is let go, and the \
             weights are decoded in every prefill again"
        );
        self.f16_copies_left.store(0, Ordering::Relaxed);
        self.give_back_memory()?;
        Ok(true)
    }

    /// Whether `bytes` more of f16 weight copies leave this process's use of the device within
    /// [`AUTO_COPIES_SHARE`] of the memory the driver says it may use, and of the memory limit
    /// where one is set (with neither known, false).
    pub(super) fn room_for_copy(&self, bytes: u64) -> bool {
        let within =
            |used: u64, total: u64| used.saturating_add(bytes) <= total / 100 * AUTO_COPIES_SHARE;
        let under_limit = self
            .memory_limit
            .map(|limit| within(self.allocated_bytes(), limit));
        let in_budget = self
            .device_heap()
            .map(|heap| within(heap.usage, heap.budget));
        match (under_limit, in_budget) {
            (None, None) => false,
            (limit, budget) => limit.unwrap_or(true) && budget.unwrap_or(true),
        }
    }

    /// A new buffer of `size` bytes, or out of memory (named as `what`) when the device or the
    /// memory limit refuses it even after the f16 weight copies, if any are kept, are let go.
    fn allocate(
        &self,
        what: &str,
        size: u64,
        usage: wgpu::BufferUsages,
    ) -> Result<wgpu::Buffer, GpuError> {
        match self.allocate_once(what, size, usage) {
            Err(GpuError::OutOfMemory { .. }) if self.let_copies_go()? => {
                self.allocate_once(what, size, usage)
            }
            allocated => allocated,
        }
    }

    fn allocate_once(
        &self,
        what: &str,
        size: u64,
        usage: wgpu::BufferUsages,
    ) -> Result<wgpu::Buffer, GpuError> {
        let allocated = self.allocated_bytes.load(Ordering::Relaxed);
        let out_of_memory = || GpuError::OutOfMemory {
            what: what.into(),
            needed: size,
            allocated,
            limit: self.memory_limit,
        };
        if self
            .memory_limit
            .is_some_and(|limit| allocated.saturating_add(size) > limit)
        {
            return Err(out_of_memory());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(what),
            size,
            usage,
            mapped_at_creation: false,
        });
        if pollster::block_on(scope.pop()).is_some() {
            return Err(out_of_memory());
        }
        self.allocated_bytes.fetch_add(size, Ordering::Relaxed);
        Ok(buffer)
    }

    fn pooled_tensor(&self, rows: usize, cols: usize, buffer: wgpu::Buffer) -> GpuTensor {
        GpuTensor {
            rows,
            cols,
            buffer,
            storage: Storage::F32,
            pool: Some(Arc::clone(&self.buffer_pool)),
        }
    }

    /// A tensor of the given dims over a one-word buffer, standing in for one that could not
    /// be created (the backend is poisoned then, so no op reaches the buffer).
    pub(super) fn placeholder(&self, rows: usize, cols: usize) -> GpuTensor {
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("placeholder"),
            size: 4,
            usage: TENSOR_USAGE,
            mapped_at_creation: false,
        });
        GpuTensor {
            rows,
            cols,
            buffer,
            storage: Storage::F32,
            pool: None,
        }
    }

    /// Waits for the recorded work and copies rows `start..start+count` (clamped) to the host,
    /// as f32 whatever the tensor's [`Storage`].
    pub fn read_rows(
        &self,
        x: &GpuTensor,
        start: usize,
        count: usize,
    ) -> Result<Vec<f32>, GpuError> {
        self.check_device()?;
        let start = start.min(x.rows);
        let end = start.saturating_add(count).min(x.rows);
        if end == start || x.cols == 0 {
            return Ok(Vec::new());
        }
        let bytes = self.read_bytes(&x.buffer, x.row_bytes(start), x.row_bytes(end - start))?;
        Ok(x.storage.values(&bytes))
    }

    /// Waits for the recorded work and copies a whole buffer (a tensor's, a weight part's) to
    /// the host, for an [`super::MslLauncher`] that runs kernels there.
    pub fn read_buffer(&self, buffer: &wgpu::Buffer) -> Result<Vec<u8>, GpuError> {
        self.check_device()?;
        self.read_bytes(buffer, 0, buffer.size())
    }

    fn read_bytes(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, GpuError> {
        // A device error reported meanwhile (out of memory, a lost device) is the cause of a
        // failed readback, so it comes first; wgpu reports a loss at the next poll.
        let bytes = self.recorder.read(buffer, offset, size);
        if bytes.is_err() {
            let _ = self.device.poll(wgpu::PollType::Poll);
        }
        self.check_device()?;
        bytes
    }

    /// Overwrites a whole buffer from its start after the work recorded so far (the way back
    /// of [`Wgpu::read_buffer`]).
    pub fn write_buffer(&self, buffer: &wgpu::Buffer, bytes: &[u8]) -> Result<(), GpuError> {
        self.recorder.write(buffer, 0, bytes)
    }

    /// Overwrites whole rows from `start` with host values, after the work recorded so far
    /// (stored as the tensor's [`Storage`]).
    pub fn write_rows(&self, x: &GpuTensor, start: usize, data: &[f32]) -> Result<(), GpuError> {
        let from = start.saturating_mul(x.cols);
        let fits = x.cols > 0
            && data.len().is_multiple_of(x.cols)
            && from.saturating_add(data.len()) <= x.len();
        if !fits {
            return Err(GpuError::Shape {
                op: "write_rows",
                detail: format!(
                    "{} values at row {start} of a {}×{} tensor",
                    data.len(),
                    x.rows,
                    x.cols
                ),
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        self.recorder
            .write(&x.buffer, x.row_bytes(start), &x.storage.bytes(data))
    }

    /// Uploads a weight of `rows` rows of `cols` elements of type `ty` from its file bytes,
    /// split into row ranges that each fit one storage binding.
    pub fn upload_weight(
        &self,
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<GpuWeight, GpuError> {
        self.upload_weight_in_parts(name, ty, rows, cols, bytes, self.max_weight_part_rows)
    }

    /// [`Wgpu::upload_weight`] with at most `max_part_rows` rows per buffer (tests use it to
    /// exercise split weights without tensors of the binding limit's size).
    pub fn upload_weight_in_parts(
        &self,
        name: &str,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        max_part_rows: usize,
    ) -> Result<GpuWeight, GpuError> {
        let format = WeightFormat::from_ggml(ty).ok_or_else(|| GpuError::UnsupportedType {
            tensor: name.into(),
            ty: ty.name(),
        })?;
        let shape_error = |detail: String| GpuError::Shape {
            op: "upload_weight",
            detail: format!("{name}: {detail}"),
        };
        let row_bytes = row_bytes(ty, cols as u64)
            .ok_or_else(|| shape_error(format!("bad row length {cols} for {}", ty.name())))?
            as usize;
        if rows.checked_mul(row_bytes) != Some(bytes.len()) {
            return Err(shape_error(format!(
                "{rows} rows of {row_bytes} bytes but {} given",
                bytes.len()
            )));
        }
        if cols as u64 * 4 > self.binding_limit {
            return Err(GpuError::TooLarge {
                what: format!("a row of {name}, dequantized"),
                bytes: cols as u64 * 4,
                limit: self.binding_limit,
            });
        }
        let layout = BlockLayout::of(ty, self.pipelines.q6_k_block_bytes());
        let device_row_bytes = layout.device_bytes(row_bytes);
        let rows_per_part = (self.binding_limit as usize / device_row_bytes.max(1))
            .min(max_part_rows)
            .max(1);
        let mut parts = Vec::new();
        for first_row in (0..rows).step_by(rows_per_part) {
            let part_rows = rows_per_part.min(rows - first_row);
            let part_bytes = &bytes[first_row * row_bytes..(first_row + part_rows) * row_bytes];
            parts.push(WeightPart {
                first_row,
                rows: part_rows,
                buffer: self.upload_weight_part(name, part_bytes, layout)?,
            });
        }
        Ok(GpuWeight {
            name: name.into(),
            profile_class: crate::backend::weight_profile_class(name),
            format,
            rows,
            cols,
            row_bytes: device_row_bytes,
            parts,
        })
    }

    fn upload_weight_part(
        &self,
        name: &str,
        bytes: &[u8],
        layout: BlockLayout,
    ) -> Result<wgpu::Buffer, GpuError> {
        let buffer = self.allocate(
            &format!("weight {name}"),
            padded_size(layout.device_bytes(bytes.len()) as u64),
            // COPY_SRC: a launcher running kernels off the device reads weights too.
            TENSOR_USAGE,
        )?;
        let queue = self.recorder.queue();
        match layout {
            BlockLayout::File => {
                // Whole words only: the tail of an odd-sized part goes in through a padded copy.
                let whole = bytes.len() / 4 * 4;
                queue.write_buffer(&buffer, 0, &bytes[..whole]);
                if whole < bytes.len() {
                    let mut tail = [0u8; 4];
                    tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
                    queue.write_buffer(&buffer, whole as u64, &tail);
                }
            }
            BlockLayout::Padded { file, device } => {
                // Through a bounded staging copy, block by block: never a second host copy of
                // the weight.
                let blocks_per_copy = PADDING_STAGING_BYTES / device;
                let mut staged = Vec::with_capacity(blocks_per_copy * device);
                for (i, blocks) in bytes.chunks(blocks_per_copy * file).enumerate() {
                    staged.clear();
                    for block in blocks.chunks_exact(file) {
                        staged.extend_from_slice(block);
                        staged.resize(staged.len() + device - file, 0);
                    }
                    let offset = (i * blocks_per_copy * device) as u64;
                    queue.write_buffer(&buffer, offset, &staged);
                }
            }
        }
        // Submitting hands the staged bytes to the device now instead of holding every weight
        // of the model in staging memory until the first forward.
        queue.submit([]);
        Ok(buffer)
    }
}
