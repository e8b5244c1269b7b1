//! Attention for many query rows at once (prefill): a workgroup takes a block of query tokens
//! with all q heads of one kv head, so that keys and values are read once per block instead of
//! once per query row and head. attention_prefill.wgsl does it in f32; where the device has
//! cooperative matrices, attention_prefill_coop.wgsl multiplies on them (tensor cores), over f16
//! copies of q, k and v made by attention_prefill_halves.wgsl (which also writes k and v into the
//! cache), its softmax in f32.

use super::kernels::Kernel;
use super::ops::{attention_bindings, cache_bytes, check_attention, f32_bytes, WG};
use super::{GpuError, GpuTensor, Wgpu};
use crate::backend::{checks, AttentionCall, AttentionShape};

/// (token, q head) rows per workgroup of both kernels (WGSL `ROWS`).
const ROWS: usize = 64;
/// Widest head both kernels hold (attention_prefill.wgsl `MAX_DIMS`; four slices of
/// [`COOP_DEPTH`] in attention_prefill_coop.wgsl).
const MAX_HEAD_DIM: usize = 256;
/// Keys per tile of the cooperative kernel (WGSL `KEYS`): the f16 keys and values are padded to
/// whole tiles.
const COOP_KEYS: usize = 64;
/// Head dims per slice of the cooperative kernel (WGSL `DEPTH`): the f16 rows are padded to
/// whole slices.
const COOP_DEPTH: usize = 64;

impl Wgpu {
    /// Whether [`Wgpu::attention_prefill`] takes this shape: a kv head's q heads must fit one
    /// workgroup's rows.
    pub(super) fn attention_prefill_fits(shape: AttentionShape) -> bool {
        checks::attention_block_tokens(shape, ROWS, MAX_HEAD_DIM).is_ok()
    }

    /// [`Wgpu::attention`] (gated by `gate` if given) on cooperative matrices whatever the
    /// number of query rows, for tests at sizes that [`Wgpu::attention`] sends to other kernels;
    /// an error where this device has no cooperative attention.
    pub fn attention_cooperative(
        &self,
        call: AttentionCall<'_, GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        let op = "attention_cooperative";
        if !self.cooperative_attention {
            return Err(GpuError::Kernel {
                kernel: Kernel::AttentionPrefillCoop.name(),
                reason: "this device has no cooperative attention".into(),
            });
        }
        check_attention(&call).map_err(|detail| GpuError::Shape { op, detail })?;
        if let Some(gate) = call.gate {
            checks::same_dims(gate.dims(), (call.q.rows, 2 * call.q.cols)).map_err(|d| {
                GpuError::Shape {
                    op,
                    detail: format!("gate {d}"),
                }
            })?;
        }
        self.attention_prefill_cooperative(call)
    }

    /// [`Wgpu::attention`] by blocks of query tokens, for operands its checks have passed; the
    /// output times sigmoid of the gate halves of `gate` (each head's 2·head_dim columns are
    /// [query | gate]) if given. On cooperative matrices where the device has them.
    pub(super) fn attention_prefill(
        &self,
        call: AttentionCall<'_, GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        if self.cooperative_attention {
            return self.attention_prefill_cooperative(call);
        }
        let shape = call.shape;
        let tokens_per_block = block_tokens(shape)?;
        let blocks = call.q.rows.div_ceil(tokens_per_block);
        let out = self.output(call.q.rows, call.q.cols)?;
        // Every block reads the keys and values up to its last token.
        let kv_rows_read: usize = (0..blocks)
            .map(|b| call.pos0 + ((b + 1) * tokens_per_block).min(call.q.rows))
            .sum();
        self.record(
            Kernel::AttentionPrefill(call.k_cache.storage),
            &[
                shape.n_head as u32,
                shape.n_kv_head as u32,
                shape.head_dim as u32,
                call.q.rows as u32,
                call.pos0 as u32,
                shape.scale().to_bits(),
                tokens_per_block as u32,
                call.gate.is_some() as u32,
            ],
            &attention_bindings(&call, &out),
            blocks * shape.n_kv_head,
            f32_bytes(&[call.q])
                + call.gate.map_or(0, |g| f32_bytes(&[g]) / 2)
                + cache_bytes(&call, kv_rows_read),
        )?;
        Ok(out)
    }

    /// [`Wgpu::attention_prefill`] on cooperative matrices: q, k and v to f16 (k and v into the
    /// cache on the way), then one dispatch over every block.
    fn attention_prefill_cooperative(
        &self,
        call: AttentionCall<'_, GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        let AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        } = call.shape;
        let tokens_per_block = block_tokens(call.shape)?;
        let (rows, pos0) = (call.q.rows, call.pos0);
        let padded_keys = (pos0 + rows).next_multiple_of(COOP_KEYS);
        let kv_halves = |incoming, cache| {
            self.attention_halves(HalvesCall {
                incoming,
                cache,
                heads: n_kv_head,
                head_dim,
                padded_rows: padded_keys,
                pos0,
                scale: 1.0,
                into_cache: true,
            })
        };
        let q16 = self.attention_halves(HalvesCall {
            incoming: call.q,
            // No cache rows are read (pos0 0) or written; any cache binds.
            cache: call.k_cache,
            heads: n_head,
            head_dim,
            padded_rows: rows,
            pos0: 0,
            // Scores in powers of 2, for exp2.
            scale: std::f32::consts::LOG2_E / (head_dim as f32).sqrt(),
            into_cache: false,
        })?;
        let k16 = kv_halves(call.k, call.k_cache)?;
        let v16 = kv_halves(call.v, call.v_cache)?;
        let blocks = rows.div_ceil(tokens_per_block);
        let workgroups = blocks * n_kv_head;
        let padded_dim = head_dim.next_multiple_of(COOP_DEPTH);
        // Every block reads the keys (twice) and values up to its last token.
        let kv_rows_read: usize = (0..blocks)
            .map(|b| pos0 + ((b + 1) * tokens_per_block).min(rows))
            .sum();
        let out = self.output(rows, call.q.cols)?;
        self.record(
            Kernel::AttentionPrefillCoop,
            &[
                n_head as u32,
                n_kv_head as u32,
                head_dim as u32,
                rows as u32,
                pos0 as u32,
                padded_dim as u32,
                padded_keys as u32,
                tokens_per_block as u32,
                call.gate.is_some() as u32,
                workgroups as u32,
            ],
            &[
                &q16.buffer,
                &k16.buffer,
                &v16.buffer,
                &call.gate.unwrap_or(call.q).buffer,
                &out.buffer,
            ],
            workgroups,
            (rows * n_head * padded_dim * 2) as u64
                + call.gate.map_or(0, |g| f32_bytes(&[g]) / 2)
                + (kv_rows_read * padded_dim * 6 * n_kv_head) as u64,
        )?;
        Ok(out)
    }

    /// Rows of q (or k, v) as f16, head-major, padded with zeros to `padded_rows` rows a head
    /// and whole slices of head dims.
    fn attention_halves(&self, c: HalvesCall<'_>) -> Result<GpuTensor, GpuError> {
        let padded_dim = c.head_dim.next_multiple_of(COOP_DEPTH);
        let words = self.output(c.heads * c.padded_rows, padded_dim / 2)?;
        self.record(
            Kernel::AttentionPrefillHalves(c.cache.storage),
            &[
                c.heads as u32,
                c.head_dim as u32,
                padded_dim as u32,
                c.padded_rows as u32,
                c.pos0 as u32,
                c.incoming.rows as u32,
                c.scale.to_bits(),
                c.into_cache as u32,
            ],
            &[&c.incoming.buffer, &c.cache.buffer, &words.buffer],
            words.len().div_ceil(WG),
            f32_bytes(&[c.incoming]) + c.cache.row_bytes(c.pos0),
        )?;
        Ok(words)
    }
}

/// What [`Wgpu::attention_halves`] converts: `incoming` rows after `pos0` rows of `cache`, of
/// `heads` heads of `head_dim`, times `scale`; with `into_cache` the incoming rows are also
/// written into the cache.
struct HalvesCall<'a> {
    incoming: &'a GpuTensor,
    cache: &'a GpuTensor,
    heads: usize,
    head_dim: usize,
    padded_rows: usize,
    pos0: usize,
    scale: f32,
    into_cache: bool,
}

/// Query tokens per workgroup of either kernel for `shape`.
fn block_tokens(shape: AttentionShape) -> Result<usize, GpuError> {
    checks::attention_block_tokens(shape, ROWS, MAX_HEAD_DIM).map_err(|detail| GpuError::Shape {
        op: "attention",
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::gpu::Storage;
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

    /// The f16 copies of the cooperative kernel (built here even where it cannot run, e.g. on
    /// lavapipe): head-major, scaled, zeros past the head dim and the rows, rows before pos0
    /// from the cache and the rest from the new rows, which also land in the cache (f32 or f16).
    #[test]
    fn halves_are_head_major_copies_that_fill_the_cache() {
        let Some(mut gpu) = super::super::test_gpu() else {
            return;
        };
        for storage in [Storage::F32, Storage::F16] {
            gpu.pipelines
                .add(&gpu.device, Kernel::AttentionPrefillHalves(storage))
                .unwrap();
            halves_from_a_cache_in(&gpu, storage);
        }
    }

    fn halves_from_a_cache_in(gpu: &Wgpu, storage: Storage) {
        let (heads, head_dim, pos0, rows, padded_rows) = (3, 40, 5, 7, 64);
        let cols = heads * head_dim;
        let value = |i: usize| (i as f32 * 0.377).sin() * 3.0;
        let stored = |x: f32| match storage {
            Storage::F32 => x,
            Storage::F16 => half::f16::from_f32(x).to_f32(),
        };
        let history: Vec<f32> = (0..(pos0 + rows) * cols).map(value).map(stored).collect();
        let cache = gpu.zeros_stored(storage, pos0 + rows, cols).unwrap();
        gpu.write_rows(&cache, 0, &history[..pos0 * cols]).unwrap();
        let incoming = gpu.upload(rows, cols, &history[pos0 * cols..]).unwrap();
        let scale = 0.5;
        let words = gpu
            .attention_halves(HalvesCall {
                incoming: &incoming,
                cache: &cache,
                heads,
                head_dim,
                padded_rows,
                pos0,
                scale,
                into_cache: true,
            })
            .unwrap();
        assert_eq!(
            gpu.read_rows(&cache, 0, pos0 + rows).unwrap(),
            history,
            "{storage:?} cache"
        );
        let padded_dim = COOP_DEPTH;
        let halves: Vec<f32> = gpu
            .read_rows(&words, 0, words.rows)
            .unwrap()
            .iter()
            .flat_map(|w| {
                let bits = w.to_bits();
                [bits as u16, (bits >> 16) as u16].map(|h| half::f16::from_bits(h).to_f32())
            })
            .collect();
        assert_eq!(halves.len(), heads * padded_rows * padded_dim);
        for (i, &got) in halves.iter().enumerate() {
            let (h, row, d) = (
                i / (padded_rows * padded_dim),
                i / padded_dim % padded_rows,
                i % padded_dim,
            );
            let want = if row < pos0 + rows && d < head_dim {
                history[row * cols + h * head_dim + d] * scale
            } else {
                0.0
            };
            assert!(
                (got - want).abs() <= want.abs() * 1e-3,
                "{storage:?} cache: head {h} row {row} dim {d}: {got} for {want}"
            );
        }
    }
}
