//! RoPE and gated full attention (decode by kv head, prefill in attention_prefill.rs).

use super::*;

/// Cache rows up to which decode attention takes the per-head kernels: below it one workgroup
/// per kv head and split (a few on the 27B's 4 kv heads) cannot fill a GPU; the two measured
/// even at 1024 rows (benches/results/h200-2026-12-06-run28).
const DECODE_ATTENTION_PER_HEAD_ROWS: usize = 1024;
/// Workgroups a split decode attention aims at: about as many as a large GPU runs at once, so
/// that the splits end together rather than a second, partial wave following the first (on the
/// H100, 512 gave 412 workgroups at a depth of 32768 and decode ran 7% slower there; more splits
/// also cost more partial results for the merge to read).
const DECODE_ATTENTION_WORKGROUPS: usize = 256;
/// Query heads one decode-attention workgroup serves (`HEADS` of attention_decode.wgsl).
const DECODE_ATTENTION_HEADS: usize = 8;
/// Splits of the cache are whole numbers of this many rows, fewer than a tile's: at a depth of
/// a few thousand rows, splits of whole tiles would leave most of a large GPU's SMs idle.
const DECODE_ATTENTION_SPLIT_STEP: usize = 64;

impl Wgpu {
    /// The inverse frequencies `base^(−2i/rot_dims)`, computed on the host as the reference
    /// does, uploaded once per (rot_dims, base).
    pub(super) fn rope_table(
        &self,
        rot_dims: usize,
        freq_base: f32,
    ) -> Result<wgpu::Buffer, GpuError> {
        let mut tables = self
            .rope_tables
            .lock()
            .map_err(|_| GpuError::Device("rope table cache poisoned".into()))?;
        let key = (rot_dims, freq_base.to_bits());
        if let Some(table) = tables.get(&key) {
            return Ok(table.clone());
        }
        let inv_freq: Vec<f32> = (0..rot_dims / 2)
            .map(|i| 1.0 / freq_base.powf((2 * i) as f32 / rot_dims as f32))
            .collect();
        let table = self.upload(1, inv_freq.len(), &inv_freq)?.buffer.clone();
        tables.insert(key, table.clone());
        Ok(table)
    }

    /// NeoX RoPE on the first `rot_dims` of every `head_dim` group, row t at `pos0 + t`.
    pub fn rope(
        &self,
        x: &GpuTensor,
        head_dim: usize,
        rot_dims: usize,
        freq_base: f32,
        pos0: usize,
    ) -> Result<GpuTensor, GpuError> {
        let op = "rope";
        whole_groups(op, x, head_dim)?;
        if rot_dims > head_dim || !rot_dims.is_multiple_of(2) {
            return Err(shape_error(
                op,
                format!("{rot_dims} rotary dims in heads of {head_dim}"),
            ));
        }
        let last_pos = word(op, "position", pos0.saturating_add(x.rows))?;
        let out = self.output(x.rows, x.cols)?;
        if rot_dims == 0 {
            self.copy(x, 0, &out, 0, x.len())?;
            return Ok(out);
        }
        let table = self.rope_table(rot_dims, freq_base)?;
        let n = x.len();
        self.record(
            Kernel::Rope,
            &[
                n as u32,
                x.cols as u32,
                head_dim as u32,
                rot_dims as u32,
                last_pos - x.rows as u32,
                0,
                0,
                0,
            ],
            &[&x.buffer, &table, &out.buffer],
            n.div_ceil(WG),
            f32_bytes(&[x]),
        )?;
        Ok(out)
    }

    /// Writes k, v into the cache, then causal GQA softmax attention of q over the cache rows
    /// each token sees, scale 1/sqrt(head_dim); q head h reads kv head `h / (n_head / n_kv_head)`.
    pub fn attention(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        cache: &KvCache<'_, GpuTensor>,
        shape: AttentionShape,
    ) -> Result<GpuTensor, GpuError> {
        self.attention_kernel(AttentionCall::new([q, k, v], cache, shape, None))
    }

    /// §4 steps 3–6: q (from the query halves of `q_and_gate`) and k RMS-normed per head and
    /// rotated in one dispatch, then [`Wgpu::attention`] with the sigmoid gate applied to its
    /// output in the same dispatch.
    pub fn gated_attention(
        &self,
        op: &GatedAttention<'_, GpuTensor>,
        cache: &KvCache<'_, GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        checks::gated_attention(op, MAX_HEAD_DIM, GpuTensor::dims)
            .map_err(|e| shape_error("gated_attention", e))?;
        let GatedAttention {
            q_and_gate,
            k,
            v,
            q_norm,
            k_norm,
            eps,
            rope,
            shape,
        } = *op;
        let pos0 = cache.pos0;
        let op = "gated_attention";
        let AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        } = shape;
        let rows = q_and_gate.rows;
        let last_pos = word(op, "position", pos0.saturating_add(rows))?;
        let q = self.output(rows, n_head * head_dim)?;
        let k_rotated = self.output(rows, k.cols)?;
        // With no rotated dims the table is never read; any buffer binds.
        let table = if rope.dims == 0 {
            q_norm.buffer.clone()
        } else {
            self.rope_table(rope.dims, rope.base)?
        };
        self.record(
            Kernel::QkNormRope,
            &[
                n_head as u32,
                n_kv_head as u32,
                head_dim as u32,
                rope.dims as u32,
                last_pos - rows as u32,
                rows as u32,
                eps.to_bits(),
                0,
            ],
            &[
                &q_and_gate.buffer,
                &k.buffer,
                &q_norm.buffer,
                &k_norm.buffer,
                &table,
                &q.buffer,
                &k_rotated.buffer,
            ],
            rows * (n_head + n_kv_head),
            f32_bytes(&[q_and_gate, k]),
        )?;
        self.attention_kernel(AttentionCall::new(
            [&q, &k_rotated, v],
            cache,
            shape,
            Some(q_and_gate),
        ))
    }

    /// The attention kernel, its output times sigmoid of the gate halves of `gate` if given.
    fn attention_kernel(&self, call: AttentionCall<'_, GpuTensor>) -> Result<GpuTensor, GpuError> {
        let shape = call.shape;
        let head_dim = shape.head_dim;
        if !(1..=MAX_HEAD_DIM).contains(&head_dim) || !head_dim.is_multiple_of(4) {
            return Err(shape_error(
                "attention",
                format!("head dim {head_dim} is not a multiple of 4 in 4..={MAX_HEAD_DIM}"),
            ));
        }
        check_attention(&call).map_err(|d| shape_error("attention", d))?;
        if call.q.rows >= ATTENTION_PREFILL_MIN_ROWS && Wgpu::attention_prefill_fits(call.shape) {
            return self.attention_prefill(call);
        }
        if call.q.rows == 1 {
            return if self.per_head_attention {
                self.per_head_decode_attention(call)
            } else {
                self.decode_attention(call)
            };
        }
        let out = self.output(call.q.rows, call.q.cols)?;
        self.record(
            Kernel::Attention(call.k_cache.storage),
            &[
                shape.n_head as u32,
                shape.n_kv_head as u32,
                head_dim as u32,
                call.q.rows as u32,
                call.pos0 as u32,
                shape.kv_cols() as u32,
                shape.scale().to_bits(),
                call.gate.is_some() as u32,
            ],
            &attention_bindings(&call, &out),
            call.q.rows * shape.n_head,
            f32_bytes(&[call.q]) + cache_bytes(&call, call.pos0 + call.q.rows),
        )?;
        Ok(out)
    }

    /// One query row: past [`DECODE_ATTENTION_PER_HEAD_ROWS`] cache rows, each kv head's rows
    /// read once for the query heads of its GQA group, in splits merged per head (gated if `gate`
    /// is given); a shorter cache by query head. Shapes are checked.
    fn decode_attention(&self, call: AttentionCall<'_, GpuTensor>) -> Result<GpuTensor, GpuError> {
        let shape = call.shape;
        let rows = call.pos0 + 1;
        if rows <= DECODE_ATTENTION_PER_HEAD_ROWS {
            return self.per_head_decode_attention(call);
        }
        let head_runs = (shape.n_head / shape.n_kv_head).div_ceil(DECODE_ATTENTION_HEADS);
        let groups = shape.n_kv_head * head_runs;
        let split_rows = (rows * groups)
            .div_ceil(DECODE_ATTENTION_WORKGROUPS)
            .next_multiple_of(DECODE_ATTENTION_SPLIT_STEP);
        let splits = rows.div_ceil(split_rows);
        self.decode_attention_in_splits(
            call,
            Kernel::AttentionDecode(call.k_cache.storage),
            &[split_rows as u32, splits as u32, shape.scale().to_bits()],
            splits,
            groups * splits,
        )
    }

    /// One query row: the cache split into blocks of WG rows, each (head, block) a workgroup,
    /// then the blocks merged per head (gated if `gate` is given). Shapes are checked.
    fn per_head_decode_attention(
        &self,
        call: AttentionCall<'_, GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        let blocks = (call.pos0 + 1).div_ceil(WG);
        self.decode_attention_in_splits(
            call,
            Kernel::AttentionBlocks(call.k_cache.storage),
            &[blocks as u32, call.shape.scale().to_bits(), 0],
            blocks,
            call.shape.n_head * blocks,
        )
    }

    /// Records a decode-attention `kernel` that writes each head's softmax partials (max, sum,
    /// weighted values) of `splits` splits of the cache, its parameters the shape, the position
    /// and the kv width followed by `layout` (the kernel's own words), then merges the splits.
    fn decode_attention_in_splits(
        &self,
        call: AttentionCall<'_, GpuTensor>,
        kernel: Kernel,
        layout: &[u32],
        splits: usize,
        workgroups: usize,
    ) -> Result<GpuTensor, GpuError> {
        let shape = call.shape;
        let kv_cols = shape.kv_cols();
        let partial = self.output(shape.n_head * splits, 2 + shape.head_dim)?;
        let params: Vec<u32> = [
            shape.n_head as u32,
            shape.n_kv_head as u32,
            shape.head_dim as u32,
            call.pos0 as u32,
            kv_cols as u32,
        ]
        .into_iter()
        .chain(layout.iter().copied())
        .collect();
        self.record(
            kernel,
            &params,
            &attention_bindings(&call, &partial)[..6],
            workgroups,
            f32_bytes(&[call.q]) + cache_bytes(&call, call.pos0 + 1),
        )?;
        self.combine_attention(&partial, splits, call)
    }

    /// The per-head results of `blocks` blocks of cache rows merged into one softmax, gated if
    /// `call.gate` is given.
    fn combine_attention(
        &self,
        partial: &GpuTensor,
        blocks: usize,
        call: AttentionCall<'_, GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        let AttentionShape {
            n_head, head_dim, ..
        } = call.shape;
        let out = self.output(1, call.q.cols)?;
        self.record(
            Kernel::AttentionCombine,
            &[
                n_head as u32,
                head_dim as u32,
                blocks as u32,
                call.gate.is_some() as u32,
            ],
            &[
                &partial.buffer,
                &call.gate.unwrap_or(call.q).buffer,
                &out.buffer,
            ],
            n_head,
            f32_bytes(&[partial]),
        )?;
        Ok(out)
    }
}
