//! Attention for many query rows at once (prefill): attention_prefill.wgsl takes a block of query
//! tokens with all q heads of one kv head per workgroup, so that keys and values are read once
//! per block instead of once per query row and head.

use super::kernels::Kernel;
use super::ops::f32_bytes;
use super::{GpuError, GpuTensor, Wgpu};
use crate::backend::{AttentionCall, AttentionShape};

/// (token, q head) rows per workgroup (WGSL `ROWS`).
const ROWS: usize = 64;

impl Wgpu {
    /// Whether [`Wgpu::attention_prefill`] takes this shape: a kv head's q heads must fit one
    /// workgroup's rows.
    pub(super) fn attention_prefill_fits(shape: AttentionShape) -> bool {
        shape.n_head / shape.n_kv_head <= ROWS
    }

    /// [`Wgpu::attention`] by blocks of query tokens, for operands its checks have passed; the
    /// output times sigmoid of the gate halves of `gate` (each head's 2·head_dim columns are
    /// [query | gate]) if given.
    pub(super) fn attention_prefill(
        &self,
        call: AttentionCall<'_, GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        let AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        } = call.shape;
        let tokens_per_block = ROWS / (n_head / n_kv_head);
        let blocks = call.q.rows.div_ceil(tokens_per_block);
        let out = self.output(call.q.rows, call.q.cols)?;
        let scale = 1.0 / (head_dim as f32).sqrt();
        // Every block reads the keys and values up to its last token.
        let kv_rows_read: usize = (0..blocks)
            .map(|b| call.pos0 + ((b + 1) * tokens_per_block).min(call.q.rows))
            .sum();
        self.record(
            Kernel::AttentionPrefill,
            &[
                n_head as u32,
                n_kv_head as u32,
                head_dim as u32,
                call.q.rows as u32,
                call.pos0 as u32,
                scale.to_bits(),
                tokens_per_block as u32,
                call.gate.is_some() as u32,
            ],
            &[
                &call.q.buffer,
                &call.k.buffer,
                &call.v.buffer,
                &call.k_cache.buffer,
                &call.v_cache.buffer,
                &out.buffer,
                &call.gate.unwrap_or(call.q).buffer,
            ],
            blocks * n_kv_head,
            f32_bytes(&[call.q])
                + call.gate.map_or(0, |g| f32_bytes(&[g]) / 2)
                + (kv_rows_read * head_dim * 8 * n_kv_head) as u64,
        )?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::KvCache;

    /// The gated output is the plain one times sigmoid of the gate halves (the plain one is
    /// held to the host reference in tests/wgpu_ops.rs).
    #[test]
    fn gate_multiplies_by_sigmoid_of_the_gate_halves() {
        let Some(gpu) = super::super::test_gpu() else {
            return;
        };
        let (n_head, n_kv_head, head_dim, rows) = (6, 2, 40, 20);
        let shape = AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        };
        let values = |n: usize, seed: f32| -> Vec<f32> {
            (0..n)
                .map(|i| (i as f32 * 0.731 + seed).sin() * 2.0)
                .collect()
        };
        let q_and_gate = values(rows * 2 * n_head * head_dim, 0.1);
        let query: Vec<f32> = q_and_gate
            .chunks_exact(head_dim)
            .step_by(2)
            .flatten()
            .copied()
            .collect();
        let kv_cols = n_kv_head * head_dim;
        let upload = |data: &[f32], cols: usize| gpu.upload(rows, cols, data).unwrap();
        let q = upload(&query, n_head * head_dim);
        let gate = upload(&q_and_gate, 2 * n_head * head_dim);
        let k = upload(&values(rows * kv_cols, 0.2), kv_cols);
        let v = upload(&values(rows * kv_cols, 0.3), kv_cols);
        let (mut k_cache, mut v_cache) = (
            gpu.zeros(rows, kv_cols).unwrap(),
            gpu.zeros(rows, kv_cols).unwrap(),
        );
        let cache = KvCache {
            k: &mut k_cache,
            v: &mut v_cache,
            pos0: 0,
        };
        let run = |gate: Option<&GpuTensor>| {
            let out = gpu
                .attention_prefill(AttentionCall::new([&q, &k, &v], &cache, shape, gate))
                .unwrap();
            gpu.read_rows(&out, 0, rows).unwrap()
        };
        let plain = run(None);
        let gated = run(Some(&gate));
        for (i, (&got, &o)) in gated.iter().zip(&plain).enumerate() {
            let g = q_and_gate[(i / head_dim * 2 + 1) * head_dim + i % head_dim];
            let want = o / (1.0 + (-g).exp());
            assert!(
                (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{i}: {got} vs {want}"
            );
        }
        assert!(
            plain.iter().any(|&o| o.abs() > 0.1),
            "outputs are all near zero"
        );
    }
}
