//! The ops: host-side shape checks, then one or a few recorded dispatches each.

use std::sync::{Mutex, MutexGuard};

use super::kernels::{
    Kernel, WeightFormat, DEFAULT_WG, DELTA_RULE_SCAN_LANES, DELTA_RULE_SCAN_MAX_K_DIM,
    DELTA_RULE_SCAN_WG, GEMV_WORKGROUP_ROWS,
};
use super::recorder::{Binding, KernelDispatch};
use super::{GpuError, GpuTensor, GpuWeight, Wgpu};
use crate::backend::checks;
use crate::backend::{
    AttentionCall, AttentionShape, ConvQkvNorm, DeltaNetShape, DeltaRule, DeltaRuleGates,
    GatedAttention, GatedDeltaRule, KvCache, Qkv,
};

mod attention;
mod delta_net;
mod matmul;
mod rows;
mod tokens;

/// Invocations per workgroup of the kernels dispatched by element or by head here.
pub(super) const WG: usize = DEFAULT_WG;
/// Largest head_dim the attention kernel holds: one vec4 per invocation.
const MAX_HEAD_DIM: usize = 4 * WG;
/// Largest k_dim the delta-rule kernel holds (WGSL `MAX_K_DIM`).
const MAX_K_DIM: usize = 256;
/// Values of a row one argmax workgroup reduces (WGSL `CHUNK`).
const ARGMAX_CHUNK: usize = 4096;
/// Channels per invocation of the conv_qkv_norm kernel (WGSL `PER_INVOCATION`).
const CONV_QKV_CHANNELS_PER_INVOCATION: usize = 4;
/// Rows of a prompt per workgroup of conv_qkv_norm.wgsl.
const CONV_QKV_ROWS_PER_GROUP: usize = 16;
/// State columns per workgroup of the delta-rule kernels, token by token and scan (WGSL `COLS`).
const DELTA_RULE_COLS: usize = 16;
const _: () = assert!(DELTA_RULE_SCAN_WG / DELTA_RULE_SCAN_LANES == DELTA_RULE_COLS);
/// Query rows from which attention runs by blocks of tokens (attention_prefill.rs) instead of
/// one workgroup per query row and head.
pub const ATTENTION_PREFILL_MIN_ROWS: usize = 8;
/// Rows from which the delta rule runs as a prefill: one scan per state column
/// (delta_rule_scan.wgsl) where the device has the subgroups for it, else by chunks
/// (delta_chunks.rs); below, one dispatch per call walks the rows with workgroup barriers.
pub const DELTA_RULE_PREFILL_MIN_ROWS: usize = 8;
/// Weight rows and tokens per workgroup of the tiled GEMM (WGSL `TILE_ROWS`, `TILE_TOKENS`).
const GEMM_TILE: usize = 64;
/// Rows of x from which matmul runs the tiled GEMM instead of one GEMV per row: below it the
/// GEMV's weight reads, repeated per row, still cost less than the GEMM's mostly empty tiles.
pub const GEMM_MIN_ROWS: usize = 8;

/// Bytes of f32 values in `tensors`, for the profile.
pub(super) fn f32_bytes(tensors: &[&GpuTensor]) -> u64 {
    tensors.iter().map(|t| t.len() as u64 * 4).sum()
}

/// The bindings every attention kernel takes after its parameters: q, k, v (the new rows), the
/// k and v caches, `out`, and the gate source (q where ungated; the kernels that gate in a later
/// merge bind only the first six).
pub(super) fn attention_bindings<'a>(
    call: &AttentionCall<'a, GpuTensor>,
    out: &'a GpuTensor,
) -> [&'a wgpu::Buffer; 7] {
    [
        &call.q.buffer,
        &call.k.buffer,
        &call.v.buffer,
        &call.k_cache.buffer,
        &call.v_cache.buffer,
        &out.buffer,
        &call.gate.unwrap_or(call.q).buffer,
    ]
}

/// [`checks::attention`] on the operands of `call`, whose caches must be stored alike, and
/// (pairs of head dims being a word of an f16 cache) in heads of even width.
pub(super) fn check_attention(call: &AttentionCall<'_, GpuTensor>) -> Result<(), String> {
    checks::attention(
        call.q.dims(),
        call.k.dims(),
        call.v.dims(),
        call.k_cache.dims(),
        call.v_cache.dims(),
        call.pos0,
        call.shape,
    )?;
    if call.k_cache.storage != call.v_cache.storage || !call.shape.head_dim.is_multiple_of(2) {
        return Err(format!(
            "caches in {:?} and {:?}, heads of {}: one storage, heads of even width",
            call.k_cache.storage, call.v_cache.storage, call.shape.head_dim
        ));
    }
    Ok(())
}

/// Bytes of the k and v cache rows `0..rows` of `call`, for the profile.
pub(super) fn cache_bytes(call: &AttentionCall<'_, GpuTensor>, rows: usize) -> u64 {
    call.k_cache.row_bytes(rows) + call.v_cache.row_bytes(rows)
}

fn shape_error(op: &'static str, detail: String) -> GpuError {
    GpuError::Shape { op, detail }
}

/// A kernel parameter. Every size reaching a kernel indexes a buffer no larger than one binding
/// (checked when it was created), so only free-standing scalars can fail here.
fn word(op: &'static str, what: &str, n: usize) -> Result<u32, GpuError> {
    u32::try_from(n).map_err(|_| shape_error(op, format!("{what} {n} exceeds u32")))
}

fn same_dims(op: &'static str, a: &GpuTensor, b: &GpuTensor) -> Result<(), GpuError> {
    checks::same_dims(a.dims(), b.dims()).map_err(|d| shape_error(op, d))
}

fn whole_groups(op: &'static str, x: &GpuTensor, group: usize) -> Result<(), GpuError> {
    checks::whole_groups(x.cols, group).map_err(|d| shape_error(op, d))
}

/// An op's output kept for the next op that needs the same thing computed from the same inputs
/// (`key`): valid while nothing else was recorded or written since its last use.
pub(super) struct Reusable<K> {
    key: K,
    value: GpuTensor,
    /// [`super::recorder::Recorder::work_recorded`] after its last use.
    work_after: u64,
}

/// The last `rms_norm_matmul`'s norm output, by input, norm weight, f32 bits of eps and dims.
pub(super) type LastNormed = Reusable<(wgpu::Buffer, wgpu::Buffer, u32, (usize, usize))>;
/// The last GEMV input quantized for the integer GEMVs, by input (the gate with the up of a
/// SwiGLU input) and dims.
pub(super) type LastQuantized = Reusable<(wgpu::Buffer, Option<wgpu::Buffer>, (usize, usize))>;
/// The last GEMM input converted to f16 for the cooperative GEMM, by input (the gate with the up
/// of a SwiGLU input) and dims.
pub(super) type LastHalf = Reusable<(wgpu::Buffer, Option<wgpu::Buffer>, (usize, usize))>;

pub(super) fn lock<T>(slot: &Mutex<T>) -> Result<MutexGuard<'_, T>, GpuError> {
    slot.lock().map_err(|_| lock_poisoned())
}

/// The error of a lock that a thread panicked while holding.
pub(super) fn lock_poisoned() -> GpuError {
    GpuError::Device("a thread panicked while recording".into())
}

/// Weights one several-weight GEMV multiplies at most (gemv_several.wgsl).
const SEVERAL_MAX: usize = 4;
/// Values per quantized activation pair of runs (quantize_activations.wgsl).
const QUANTIZED_PAIR: usize = 64;
/// u32 words per quantized activation pair of runs.
const QUANTIZED_PAIR_WORDS: usize = 36;

/// What a GEMV or the cooperative GEMM multiplies the weight rows with.
pub(super) enum MatmulInput<'a> {
    Plain(&'a GpuTensor),
    /// silu(gate) ⊙ up, computed as it is read.
    Swiglu {
        gate: &'a GpuTensor,
        up: &'a GpuTensor,
    },
}

fn check_matmul(x: &GpuTensor, w: &GpuWeight) -> Result<(), GpuError> {
    if x.cols != w.cols {
        return Err(shape_error(
            "matmul",
            format!("{} columns against {} of {}", x.cols, w.cols, w.name),
        ));
    }
    Ok(())
}

fn one_row(op: &'static str, w: &GpuTensor) -> Result<(), GpuError> {
    if w.rows != 1 || w.cols == 0 {
        return Err(shape_error(
            op,
            format!("weight is {}×{}, not one row", w.rows, w.cols),
        ));
    }
    Ok(())
}

impl Wgpu {
    /// Records one dispatch; `bytes_read` (weights and activations) is for the profile.
    pub(super) fn record(
        &self,
        kernel: Kernel,
        params: &[u32],
        buffers: &[Binding<'_>],
        workgroups: usize,
        bytes_read: u64,
    ) -> Result<(), GpuError> {
        self.dispatch(&KernelDispatch {
            kernel,
            class: None,
            params,
            buffers,
            workgroups,
            bytes_read,
        })
    }

    /// Records `dispatch` after the work recorded so far.
    fn dispatch(&self, dispatch: &KernelDispatch<'_>) -> Result<(), GpuError> {
        self.check_device()?;
        if !self.left_out.is_empty() {
            let class = dispatch
                .class
                .map_or_else(|| dispatch.kernel.class(), str::to_string);
            if self.left_out.contains(&class) {
                return Ok(());
            }
        }
        self.recorder.dispatch(&self.pipelines, dispatch)
    }

    /// One invocation per element of `out`, the result of a binary elementwise kernel.
    fn elementwise(
        &self,
        op: &'static str,
        kernel: Kernel,
        a: &GpuTensor,
        b: &GpuTensor,
    ) -> Result<GpuTensor, GpuError> {
        same_dims(op, a, b)?;
        let out = self.output(a.rows, a.cols)?;
        let n = a.len();
        self.record(
            kernel,
            &[n as u32],
            &[&a.buffer, &b.buffer, &out.buffer],
            n.div_ceil(WG),
            f32_bytes(&[a, b]),
        )?;
        Ok(out)
    }

    /// Copies `n` values from `src[src_offset..]` to `dst[dst_offset..]` inside the pass.
    fn copy(
        &self,
        src: &GpuTensor,
        src_offset: usize,
        dst: &GpuTensor,
        dst_offset: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        self.record(
            Kernel::CopyRows,
            &[n as u32, src_offset as u32, dst_offset as u32, 0],
            &[&src.buffer, &dst.buffer],
            n.div_ceil(WG),
            n as u64 * 4,
        )
    }
}
