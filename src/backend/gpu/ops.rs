//! The ops: host-side shape checks, then one or a few recorded dispatches each.

use super::kernels::{Kernel, GEMV_ROWS};
use super::recorder::Binding;
use super::{GpuError, GpuTensor, GpuWeight, Wgpu};
use crate::backend::checks;
use crate::backend::{AttentionShape, DeltaNetShape};

/// Invocations per workgroup of every kernel (WGSL `WG` in grid.wgsl).
const WG: usize = 64;
/// Largest head_dim the attention kernel holds (WGSL `MAX_DIMS`).
const MAX_HEAD_DIM: usize = 256;
/// Largest k_dim the delta-rule kernel holds (WGSL `MAX_K_DIM`).
const MAX_K_DIM: usize = 256;
/// State columns per workgroup of the delta-rule kernel (WGSL `COLS`).
const DELTA_RULE_COLS: usize = 16;

/// Bytes of f32 values in `tensors`, for the profile.
fn f32_bytes(tensors: &[&GpuTensor]) -> u64 {
    tensors.iter().map(|t| t.len() as u64 * 4).sum()
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
    fn record(
        &self,
        kernel: Kernel,
        params: &[u32],
        buffers: &[Binding<'_>],
        workgroups: usize,
        bytes_read: u64,
    ) -> Result<(), GpuError> {
        self.record_as(kernel, None, params, buffers, workgroups, bytes_read)
    }

    /// [`Wgpu::record`] counted in the profile as `class` instead of the kernel's own class.
    #[allow(clippy::too_many_arguments)]
    fn record_as(
        &self,
        kernel: Kernel,
        class: Option<&'static str>,
        params: &[u32],
        buffers: &[Binding<'_>],
        workgroups: usize,
        bytes_read: u64,
    ) -> Result<(), GpuError> {
        self.check_device()?;
        self.recorder.dispatch(
            &self.pipelines,
            kernel,
            class,
            params,
            buffers,
            workgroups,
            bytes_read,
        )
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

    /// Row `tokens[t]` of `table`, dequantized, for each t.
    pub fn embed(&self, table: &GpuWeight, tokens: &[u32]) -> Result<GpuTensor, GpuError> {
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= table.rows) {
            return Err(GpuError::TokenOutOfRange {
                token,
                vocab: table.rows,
            });
        }
        let out = self.output(tokens.len(), table.cols)?;
        let ids = self.upload_u32(tokens)?;
        let units = table.cols / table.format.unit_elems();
        for part in &table.parts {
            self.record(
                Kernel::Embed(table.format),
                &[
                    table.cols as u32,
                    table.row_bytes as u32,
                    tokens.len() as u32,
                    part.first_row as u32,
                    part.rows as u32,
                    units as u32,
                ],
                &[&part.buffer, &ids.buffer, &out.buffer],
                tokens.len(),
                (tokens.len() * table.row_bytes) as u64 + tokens.len() as u64 * 4,
            )?;
        }
        Ok(out)
    }

    /// `values` in a recycled buffer, written after the work recorded so far.
    fn upload_u32(&self, values: &[u32]) -> Result<GpuTensor, GpuError> {
        let ids = self.output(1, values.len())?;
        if !values.is_empty() {
            self.recorder.flush()?;
            self.recorder
                .queue()
                .write_buffer(&ids.buffer, 0, bytemuck::cast_slice(values));
        }
        Ok(ids)
    }

    /// `y = x · Wᵀ` for every row of x: one GEMV dispatch per weight part.
    pub fn matmul(&self, x: &GpuTensor, w: &GpuWeight) -> Result<GpuTensor, GpuError> {
        if x.cols != w.cols {
            return Err(shape_error(
                "matmul",
                format!("{} columns against {} of {}", x.cols, w.cols, w.name),
            ));
        }
        let out = self.output(x.rows, w.rows)?;
        // The fast kernels take GEMV_ROWS rows per workgroup in spans; the others one row per
        // workgroup in decoder units.
        let (rows_per_workgroup, units) = match w.format.gemv_span() {
            Some(span) => (GEMV_ROWS, w.cols / span),
            None => (1, w.cols / w.format.unit_elems()),
        };
        for part in &w.parts {
            self.record_as(
                Kernel::Gemv(w.format),
                w.profile_class,
                &[
                    part.rows as u32,
                    w.cols as u32,
                    x.rows as u32,
                    w.row_bytes as u32,
                    w.rows as u32,
                    part.first_row as u32,
                    units as u32,
                    0,
                ],
                &[&part.buffer, &x.buffer, &out.buffer],
                part.rows.div_ceil(rows_per_workgroup) * x.rows,
                (part.rows * w.row_bytes) as u64 + f32_bytes(&[x]),
            )?;
        }
        Ok(out)
    }

    /// Rows `start..start+count` of x.
    pub fn rows(&self, x: &GpuTensor, start: usize, count: usize) -> Result<GpuTensor, GpuError> {
        if start.checked_add(count).is_none_or(|end| end > x.rows) {
            return Err(shape_error(
                "rows",
                format!("rows {start}..+{count} of {}", x.rows),
            ));
        }
        let out = self.output(count, x.cols)?;
        self.copy(x, start * x.cols, &out, 0, count * x.cols)?;
        Ok(out)
    }

    /// In each group of `group` columns, the columns `offset..offset+width`, concatenated.
    pub fn slice_cols(
        &self,
        x: &GpuTensor,
        group: usize,
        offset: usize,
        width: usize,
    ) -> Result<GpuTensor, GpuError> {
        let op = "slice_cols";
        whole_groups(op, x, group)?;
        if width == 0 || offset.checked_add(width).is_none_or(|end| end > group) {
            return Err(shape_error(
                op,
                format!("columns {offset}..+{width} of groups of {group}"),
            ));
        }
        let out = self.output(x.rows, x.cols / group * width)?;
        let n = out.len();
        self.record(
            Kernel::SliceCols,
            &[n as u32, group as u32, offset as u32, width as u32],
            &[&x.buffer, &out.buffer],
            n.div_ceil(WG),
            n as u64 * 4,
        )?;
        Ok(out)
    }

    /// The norm kernel over groups of `w.cols` columns, gated by silu(z) when z is given.
    fn rms_norm_kernel(
        &self,
        op: &'static str,
        x: &GpuTensor,
        z: Option<&GpuTensor>,
        w: &GpuTensor,
        eps: f32,
    ) -> Result<GpuTensor, GpuError> {
        one_row(op, w)?;
        whole_groups(op, x, w.cols)?;
        if let Some(z) = z {
            same_dims(op, x, z)?;
        }
        let out = self.output(x.rows, x.cols)?;
        let groups = x.len() / w.cols;
        self.record(
            Kernel::RmsNorm,
            &[
                w.cols as u32,
                groups as u32,
                eps.to_bits(),
                z.is_some() as u32,
            ],
            &[&x.buffer, &w.buffer, &z.unwrap_or(x).buffer, &out.buffer],
            groups,
            f32_bytes(&[x, w]) + z.map_or(0, |z| f32_bytes(&[z])),
        )?;
        Ok(out)
    }

    /// Each group of `w.cols` columns: `x / sqrt(mean(x²) + eps) ⊙ w`.
    pub fn rms_norm(&self, x: &GpuTensor, w: &GpuTensor, eps: f32) -> Result<GpuTensor, GpuError> {
        self.rms_norm_kernel("rms_norm", x, None, w, eps)
    }

    /// Each group of `w.cols` columns: `x / sqrt(mean(x²) + eps) ⊙ w ⊙ silu(z)`.
    pub fn gated_rms_norm(
        &self,
        x: &GpuTensor,
        z: &GpuTensor,
        w: &GpuTensor,
        eps: f32,
    ) -> Result<GpuTensor, GpuError> {
        self.rms_norm_kernel("gated_rms_norm", x, Some(z), w, eps)
    }

    /// Each group of `group` columns: `x · scale / sqrt(Σx² + eps)`.
    pub fn l2_norm(
        &self,
        x: &GpuTensor,
        group: usize,
        scale: f32,
        eps: f32,
    ) -> Result<GpuTensor, GpuError> {
        whole_groups("l2_norm", x, group)?;
        let out = self.output(x.rows, x.cols)?;
        let groups = x.len() / group;
        self.record(
            Kernel::L2Norm,
            &[group as u32, groups as u32, scale.to_bits(), eps.to_bits()],
            &[&x.buffer, &out.buffer],
            groups,
            f32_bytes(&[x]),
        )?;
        Ok(out)
    }

    /// `x += y`.
    pub fn add(&self, x: &GpuTensor, y: &GpuTensor) -> Result<(), GpuError> {
        same_dims("add", x, y)?;
        let n = x.len();
        self.record(
            Kernel::Add,
            &[n as u32],
            &[&x.buffer, &y.buffer],
            n.div_ceil(WG),
            f32_bytes(&[x, y]),
        )
    }

    /// `silu(gate) ⊙ up`.
    pub fn swiglu(&self, gate: &GpuTensor, up: &GpuTensor) -> Result<GpuTensor, GpuError> {
        self.elementwise("swiglu", Kernel::Swiglu, gate, up)
    }

    /// `x ⊙ sigmoid(gate)`.
    pub fn sigmoid_mul(&self, x: &GpuTensor, gate: &GpuTensor) -> Result<GpuTensor, GpuError> {
        self.elementwise("sigmoid_mul", Kernel::SigmoidMul, x, gate)
    }

    /// The inverse frequencies `base^(−2i/rot_dims)`, computed on the host as the reference
    /// does, uploaded once per (rot_dims, base).
    fn rope_table(&self, rot_dims: usize, freq_base: f32) -> Result<wgpu::Buffer, GpuError> {
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

    /// Writes k, v into cache rows `pos0..`, then causal GQA softmax attention of q over cache
    /// rows `0..=pos0+t`, scale 1/sqrt(head_dim); q head h reads kv head `h / (n_head / n_kv_head)`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
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
        if !(1..=MAX_HEAD_DIM).contains(&head_dim) {
            return Err(shape_error(
                "attention",
                format!("head dim {head_dim} is outside 1..={MAX_HEAD_DIM}"),
            ));
        }
        checks::attention(
            q.dims(),
            k.dims(),
            v.dims(),
            k_cache.dims(),
            v_cache.dims(),
            pos0,
            shape,
        )
        .map_err(|d| shape_error("attention", d))?;
        let out = self.output(q.rows, q.cols)?;
        let scale = 1.0 / (head_dim as f32).sqrt();
        self.record(
            Kernel::Attention,
            &[
                n_head as u32,
                n_kv_head as u32,
                head_dim as u32,
                q.rows as u32,
                pos0 as u32,
                kv_cols as u32,
                scale.to_bits(),
                0,
            ],
            &[
                &q.buffer,
                &k.buffer,
                &v.buffer,
                &k_cache.buffer,
                &v_cache.buffer,
                &out.buffer,
            ],
            q.rows * n_head,
            f32_bytes(&[q]) + ((pos0 + q.rows) * kv_cols * 8) as u64,
        )?;
        Ok(out)
    }

    /// Causal depthwise conv (`w`: one row of taps per channel, oldest first) over the carried
    /// inputs in `state` (taps−1 rows) followed by x, then SiLU; `state` keeps the last rows.
    pub fn conv1d_silu(
        &self,
        x: &GpuTensor,
        w: &GpuTensor,
        state: &GpuTensor,
    ) -> Result<GpuTensor, GpuError> {
        let (taps, channels) = (w.cols, x.cols);
        if taps == 0 || w.rows != channels || state.dims() != (taps - 1, channels) {
            return Err(shape_error(
                "conv1d_silu",
                format!(
                    "x {}×{channels}, w {}×{taps}, state {}×{}",
                    x.rows, w.rows, state.rows, state.cols
                ),
            ));
        }
        let out = self.output(x.rows, channels)?;
        self.record(
            Kernel::Conv1dSilu,
            &[channels as u32, taps as u32, x.rows as u32, 0],
            &[&x.buffer, &w.buffer, &state.buffer, &out.buffer],
            channels.div_ceil(WG),
            f32_bytes(&[x, w, state]),
        )?;
        Ok(out)
    }

    /// `(g, β) = (ssm_a · softplus(alpha + dt_bias), sigmoid(beta))`, elementwise per head.
    pub fn delta_net_gates(
        &self,
        alpha: &GpuTensor,
        beta: &GpuTensor,
        ssm_a: &GpuTensor,
        dt_bias: &GpuTensor,
    ) -> Result<(GpuTensor, GpuTensor), GpuError> {
        let op = "delta_net_gates";
        same_dims(op, alpha, beta)?;
        one_row(op, ssm_a)?;
        same_dims(op, ssm_a, dt_bias)?;
        whole_groups(op, alpha, ssm_a.cols)?;
        let g = self.output(alpha.rows, alpha.cols)?;
        let beta_out = self.output(beta.rows, beta.cols)?;
        let n = alpha.len();
        self.record(
            Kernel::DeltaNetGates,
            &[n as u32, ssm_a.cols as u32],
            &[
                &alpha.buffer,
                &beta.buffer,
                &ssm_a.buffer,
                &dt_bias.buffer,
                &g.buffer,
                &beta_out.buffer,
            ],
            n.div_ceil(WG),
            f32_bytes(&[alpha, beta, ssm_a, dt_bias]),
        )?;
        Ok((g, beta_out))
    }

    /// The gated delta rule token by token over the rows, per value head, on the f32 `state`
    /// (one row of k_dim × v_dim per value head, key index major); returns o.
    #[allow(clippy::too_many_arguments)]
    pub fn delta_rule(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        g: &GpuTensor,
        beta: &GpuTensor,
        state: &GpuTensor,
        shape: DeltaNetShape,
    ) -> Result<GpuTensor, GpuError> {
        let DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        } = shape;
        let n = q.rows;
        let fits = n_k_head > 0
            && (1..=MAX_K_DIM).contains(&k_dim)
            && v_dim > 0
            && q.dims() == (n, n_k_head * k_dim)
            && k.dims() == (n, n_k_head * k_dim)
            && v.dims() == (n, n_v_head * v_dim)
            && g.dims() == (n, n_v_head)
            && beta.dims() == (n, n_v_head)
            && state.dims() == (n_v_head, k_dim * v_dim);
        if !fits {
            return Err(shape_error(
                "delta_rule",
                format!(
                    "q {}×{}, v {}×{}, state {}×{} for {n_k_head} k heads, {n_v_head} v heads, \
                     k_dim {k_dim} (at most {MAX_K_DIM}), v_dim {v_dim}",
                    q.rows, q.cols, v.rows, v.cols, state.rows, state.cols
                ),
            ));
        }
        let out = self.output(n, n_v_head * v_dim)?;
        let column_chunks = v_dim.div_ceil(DELTA_RULE_COLS);
        self.record(
            Kernel::DeltaRule,
            &[
                n_k_head as u32,
                n_v_head as u32,
                k_dim as u32,
                v_dim as u32,
                n as u32,
                column_chunks as u32,
                0,
                0,
            ],
            &[
                &q.buffer,
                &k.buffer,
                &v.buffer,
                &g.buffer,
                &beta.buffer,
                &state.buffer,
                &out.buffer,
            ],
            n_v_head * column_chunks,
            f32_bytes(&[q, k, v, g, beta, state]),
        )?;
        Ok(out)
    }
}
