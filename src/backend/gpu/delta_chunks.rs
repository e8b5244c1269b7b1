//! The gated delta rule over many tokens by chunks of 64 (QWEN35.md §5.5), equal to the token by
//! token recurrence up to rounding. The key-side factors of every chunk are independent of the
//! state, so one dispatch computes them for all chunks at once; a second walks the chunks in
//! order per (value head, block of state columns), updating the state once per chunk instead of
//! once per token: on cooperative matrices (f16 operands, f32 sums) where the device has them and
//! the keys fit, else in f32.

use super::kernels::Kernel;
use super::ops::f32_bytes;
use super::{GpuError, GpuTensor, Wgpu};
use crate::backend::{DeltaNetShape, DeltaRule, Qkv};

/// Tokens per chunk (WGSL `CHUNK` of delta_rule_chunked_io.wgsl, `C` of the factors kernel).
const CHUNK: usize = 64;
/// State columns per workgroup of both chunked kernels (WGSL `COLS`).
const COLS: usize = 16;
/// Largest k_dim delta_rule_chunked_coop.wgsl holds (WGSL `KEYS`), the Qwen3.5 models' own.
const COOPERATIVE_MAX_K_DIM: usize = 128;
/// Bytes of chunk factors at most: longer inputs are taken in segments of chunks, the state
/// carrying over.
const MAX_FACTOR_BYTES: u64 = 256 << 20;

impl Wgpu {
    /// [`Wgpu::delta_rule`] by chunks, for operands its shape checks have passed.
    pub(super) fn delta_rule_chunked(
        &self,
        op: &DeltaRule<'_, GpuTensor>,
        state: &GpuTensor,
    ) -> Result<GpuTensor, GpuError> {
        let (Qkv { q, k, v }, g, beta) = (op.qkv, op.g, op.beta);
        let DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        } = op.shape;
        let n = q.rows;
        let out = self.output(n, n_v_head * v_dim)?;
        // T', A, W and γ of one chunk of one head.
        let chunk_floats = 2 * CHUNK * CHUNK + CHUNK * k_dim + CHUNK;
        let chunks = n.div_ceil(CHUNK);
        let segment_bytes = (n_v_head * chunk_floats * 4) as u64;
        let segment =
            ((MAX_FACTOR_BYTES.min(self.binding_limit) / segment_bytes) as usize).clamp(1, chunks);
        let factors = self.output(segment * n_v_head, chunk_floats)?;
        let column_blocks = v_dim.div_ceil(COLS);
        let kernel = if self.cooperative_delta_rule && k_dim <= COOPERATIVE_MAX_K_DIM {
            Kernel::DeltaRuleChunkedCoop
        } else {
            Kernel::DeltaRuleChunked
        };
        for first_chunk in (0..chunks).step_by(segment) {
            let count = segment.min(chunks - first_chunk);
            let first_row = first_chunk * CHUNK;
            let rows = (n - first_row).min(count * CHUNK);
            let qk_bytes = (rows * n_k_head * k_dim * 8) as u64;
            self.record(
                Kernel::DeltaRuleChunkFactors,
                &[
                    n_k_head as u32,
                    n_v_head as u32,
                    k_dim as u32,
                    n as u32,
                    first_row as u32,
                    count as u32,
                    0,
                    0,
                ],
                &[
                    &q.buffer,
                    &k.buffer,
                    &g.buffer,
                    &beta.buffer,
                    &factors.buffer,
                ],
                n_v_head * count,
                qk_bytes + (rows * n_v_head * 8) as u64,
            )?;
            self.record(
                kernel,
                &[
                    n_k_head as u32,
                    n_v_head as u32,
                    k_dim as u32,
                    v_dim as u32,
                    n as u32,
                    first_row as u32,
                    count as u32,
                    column_blocks as u32,
                ],
                &[
                    &q.buffer,
                    &k.buffer,
                    &v.buffer,
                    &factors.buffer,
                    &state.buffer,
                    &out.buffer,
                ],
                n_v_head * column_blocks,
                qk_bytes
                    + (rows * n_v_head * v_dim * 4) as u64
                    + (count * n_v_head * chunk_floats * 4) as u64
                    + f32_bytes(&[state]),
            )?;
        }
        Ok(out)
    }
}
