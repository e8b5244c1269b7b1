//! Attention for many query rows at once (prefill): attention_block.wgsl takes a block of query
//! tokens with all q heads of one kv head per workgroup, so that keys and values are read once
//! per block instead of once per query row and head.

use super::kernels::Kernel;
use super::ops::f32_bytes;
use super::{GpuError, GpuTensor, Wgpu};
use crate::backend::AttentionShape;

/// (token, q head) rows per workgroup (WGSL `ROWS`).
const ROWS: usize = 64;

impl Wgpu {
    /// Whether [`Wgpu::attention_block`] takes this shape: a kv head's q heads must fit one
    /// workgroup's rows.
    pub(super) fn attention_block_fits(shape: AttentionShape) -> bool {
        shape.n_head / shape.n_kv_head <= ROWS
    }

    /// [`Wgpu::attention`] by blocks of query tokens, for operands its checks have passed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attention_block(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        k_cache: &GpuTensor,
        v_cache: &GpuTensor,
        pos0: usize,
        shape: AttentionShape,
    ) -> Result<GpuTensor, GpuError> {
        let AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        } = shape;
        let kv_cols = n_kv_head * head_dim;
        let tokens_per_block = ROWS / (n_head / n_kv_head);
        let blocks = q.rows.div_ceil(tokens_per_block);
        let out = self.output(q.rows, q.cols)?;
        let scale = 1.0 / (head_dim as f32).sqrt();
        // Every block reads the keys and values up to its last token.
        let kv_rows_read: usize = (0..blocks)
            .map(|b| pos0 + ((b + 1) * tokens_per_block).min(q.rows))
            .sum();
        self.record(
            Kernel::AttentionBlock,
            &[
                n_head as u32,
                n_kv_head as u32,
                head_dim as u32,
                q.rows as u32,
                pos0 as u32,
                kv_cols as u32,
                scale.to_bits(),
                tokens_per_block as u32,
            ],
            &[
                &q.buffer,
                &k.buffer,
                &v.buffer,
                &k_cache.buffer,
                &v_cache.buffer,
                &out.buffer,
            ],
            blocks * n_kv_head,
            f32_bytes(&[q]) + (kv_rows_read * head_dim * 8 * n_kv_head) as u64,
        )?;
        Ok(out)
    }
}
