//! The ops: host-side shape checks, then one or a few recorded dispatches each.

use std::sync::{Mutex, MutexGuard};

use super::kernels::{Kernel, WeightFormat, DEFAULT_WG, GEMV_WORKGROUP_ROWS};
use super::recorder::Binding;
use super::{GpuError, GpuTensor, GpuWeight, Wgpu};
use crate::backend::checks;
use crate::backend::{AttentionShape, DeltaNetShape, Qkv, RopeShape};

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
/// State columns per workgroup of the delta-rule kernel (WGSL `COLS`).
const DELTA_RULE_COLS: usize = 16;
/// Query rows from which attention runs by blocks of tokens (attention_prefill.rs) instead of
/// one workgroup per query row and head.
pub const ATTENTION_PREFILL_MIN_ROWS: usize = 8;
/// Rows from which the delta rule runs by chunks (delta_chunks.rs) instead of token by token.
pub const DELTA_RULE_CHUNK_MIN_ROWS: usize = 8;
/// Weight rows and tokens per workgroup of the tiled GEMM (WGSL `TILE_ROWS`, `TILE_TOKENS`).
const GEMM_TILE: usize = 64;
/// Rows of x from which matmul runs the tiled GEMM instead of one GEMV per row: below it the
/// GEMV's weight reads, repeated per row, still cost less than the GEMM's mostly empty tiles.
pub const GEMM_MIN_ROWS: usize = 8;

/// Bytes of f32 values in `tensors`, for the profile.
pub(super) fn f32_bytes(tensors: &[&GpuTensor]) -> u64 {
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

fn lock<T>(slot: &Mutex<T>) -> Result<MutexGuard<'_, T>, GpuError> {
    slot.lock()
        .map_err(|_| GpuError::Device("a thread panicked while recording".into()))
}

/// Weights one several-weight GEMV multiplies at most (gemv_several.wgsl).
const SEVERAL_MAX: usize = 4;
/// Values per quantized activation pair of runs (quantize_activations.wgsl).
const QUANTIZED_PAIR: usize = 64;
/// u32 words per quantized activation pair of runs.
const QUANTIZED_PAIR_WORDS: usize = 36;

/// What a GEMV multiplies the weight rows with.
enum GemvInput<'a> {
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
        let ids = self.upload_u32(tokens)?;
        self.embed_kernel(table, &ids, tokens.len(), false)
    }

    /// [`Wgpu::embed`] of the ids in `ids` (one per row, exact f32 values); an id past the
    /// table embeds nothing (the row stays as the buffer pool left it), which argmax never gives.
    pub fn embed_ids(&self, table: &GpuWeight, ids: &GpuTensor) -> Result<GpuTensor, GpuError> {
        if ids.cols != 1 {
            return Err(shape_error(
                "embed_ids",
                format!("ids are {}×{}, not one column", ids.rows, ids.cols),
            ));
        }
        self.embed_kernel(table, ids, ids.rows, true)
    }

    fn embed_kernel(
        &self,
        table: &GpuWeight,
        ids: &GpuTensor,
        tokens: usize,
        float_ids: bool,
    ) -> Result<GpuTensor, GpuError> {
        let out = self.output(tokens, table.cols)?;
        let units = table.cols / table.format.unit_elems();
        for part in &table.parts {
            self.record(
                Kernel::Embed(table.format),
                &[
                    table.cols as u32,
                    table.row_bytes as u32,
                    tokens as u32,
                    part.first_row as u32,
                    part.rows as u32,
                    units as u32,
                    float_ids as u32,
                ],
                &[&part.buffer, &ids.buffer, &out.buffer],
                tokens,
                (tokens * table.row_bytes) as u64 + tokens as u64 * 4,
            )?;
        }
        Ok(out)
    }

    /// Each row's index of its largest value (lowest on ties, NaN never wins) as an exact f32:
    /// chunks of a row reduced in one pass, the chunks' winners in a second when there are several.
    pub fn argmax(&self, x: &GpuTensor) -> Result<GpuTensor, GpuError> {
        if x.cols == 0 || x.cols >= 1 << 24 {
            return Err(shape_error(
                "argmax",
                format!("{} columns: indices must be exact in f32 (1..2^24)", x.cols),
            ));
        }
        let chunks = x.cols.div_ceil(ARGMAX_CHUNK);
        let values = self.output(x.rows, chunks)?;
        let indices = self.output(x.rows, chunks)?;
        self.record(
            Kernel::Argmax,
            &[
                x.cols as u32,
                chunks as u32,
                x.rows as u32,
                0,
                x.cols as u32,
            ],
            &[&x.buffer, &x.buffer, &values.buffer, &indices.buffer],
            x.rows * chunks,
            f32_bytes(&[x]),
        )?;
        if chunks == 1 {
            return Ok(indices);
        }
        let best_values = self.output(x.rows, 1)?;
        let best = self.output(x.rows, 1)?;
        self.record(
            Kernel::Argmax,
            &[chunks as u32, 1, x.rows as u32, 1, x.cols as u32],
            &[
                &values.buffer,
                &indices.buffer,
                &best_values.buffer,
                &best.buffer,
            ],
            x.rows,
            f32_bytes(&[&values, &indices]),
        )?;
        Ok(best)
    }

    /// `values` in a recycled buffer, written after the work recorded so far.
    fn upload_u32(&self, values: &[u32]) -> Result<GpuTensor, GpuError> {
        let ids = self.output(1, values.len())?;
        if !values.is_empty() {
            self.recorder
                .write(&ids.buffer, 0, bytemuck::cast_slice(values))?;
        }
        Ok(ids)
    }

    /// `y = x · Wᵀ` for every row of x: one GEMV dispatch per weight part.
    pub fn matmul(&self, x: &GpuTensor, w: &GpuWeight) -> Result<GpuTensor, GpuError> {
        check_matmul(x, w)?;
        if x.rows >= GEMM_MIN_ROWS {
            return if self.cooperative_matrix {
                self.gemm_cooperative(x, w)
            } else {
                self.gemm(x, w)
            };
        }
        let out = self.output(x.rows, w.rows)?;
        self.gemv(GemvInput::Plain(x), w, &out, false)?;
        Ok(out)
    }

    /// `acc += x · Wᵀ`, the add done by the GEMV where the format has a fast one.
    pub fn matmul_add(
        &self,
        x: &GpuTensor,
        w: &GpuWeight,
        acc: &GpuTensor,
    ) -> Result<(), GpuError> {
        check_matmul(x, w)?;
        if acc.dims() != (x.rows, w.rows) {
            return Err(shape_error(
                "matmul_add",
                format!("{}×{} into {}×{}", x.rows, w.rows, acc.rows, acc.cols),
            ));
        }
        if x.rows >= GEMM_MIN_ROWS || w.format.gemv_span().is_none() {
            let y = self.matmul(x, w)?;
            return self.add(acc, &y);
        }
        self.gemv(GemvInput::Plain(x), w, acc, true)
    }

    /// `acc += (silu(gate) ⊙ up) · Wᵀ`, all in the GEMV where the format has a fast one.
    pub fn swiglu_matmul_add(
        &self,
        gate: &GpuTensor,
        up: &GpuTensor,
        w: &GpuWeight,
        acc: &GpuTensor,
    ) -> Result<(), GpuError> {
        same_dims("swiglu", gate, up)?;
        if gate.rows >= GEMM_MIN_ROWS || w.format.gemv_span().is_none() {
            let x = self.swiglu(gate, up)?;
            return self.matmul_add(&x, w, acc);
        }
        check_matmul(gate, w)?;
        if acc.dims() != (gate.rows, w.rows) {
            return Err(shape_error(
                "swiglu_matmul_add",
                format!("{}×{} into {}×{}", gate.rows, w.rows, acc.rows, acc.cols),
            ));
        }
        self.gemv(GemvInput::Swiglu { gate, up }, w, acc, true)
    }

    /// `rms_norm(x, norm, eps) · Wᵀ`.
    pub fn rms_norm_matmul(
        &self,
        x: &GpuTensor,
        norm: &GpuTensor,
        eps: f32,
        w: &GpuWeight,
    ) -> Result<GpuTensor, GpuError> {
        let mut ys = self.rms_norm_matmuls(x, norm, eps, &[w])?;
        Ok(ys.remove(0))
    }

    /// `rms_norm(x, norm, eps) · Wᵢᵀ` for each weight. The forward projects one normed input
    /// several times (q, k, v; gate, up): the norm runs once and its output is reused for as long
    /// as nothing else was recorded or written since, also by later calls. Fusing the norm into
    /// each GEMV instead cost more than the norm pass on the H200 (benches/results/).
    pub fn rms_norm_matmuls(
        &self,
        x: &GpuTensor,
        norm: &GpuTensor,
        eps: f32,
        ws: &[&GpuWeight],
    ) -> Result<Vec<GpuTensor>, GpuError> {
        for w in ws {
            check_matmul(x, w)?;
        }
        let key = (
            x.buffer.clone(),
            norm.buffer.clone(),
            eps.to_bits(),
            x.dims(),
        );
        self.reuse(
            &self.last_normed,
            key,
            || {
                let quantize = self.integer_gemv
                    && ws.iter().any(|w| w.format.has_integer_gemv())
                    && x.rows < GEMM_MIN_ROWS
                    && x.cols.is_multiple_of(QUANTIZED_PAIR);
                self.rms_norm_kernel("rms_norm_matmul", x, None, norm, eps, quantize)
            },
            |normed| self.matmuls(normed, ws),
        )
    }

    /// `x · Wᵢᵀ` for each weight. On one token with integer GEMVs, the weights of a format with
    /// the several-weight GEMV (each in one part) go together, up to four to a dispatch.
    fn matmuls(&self, x: &GpuTensor, ws: &[&GpuWeight]) -> Result<Vec<GpuTensor>, GpuError> {
        let together = |w: &GpuWeight| {
            self.integer_gemv
                && x.rows == 1
                && x.cols.is_multiple_of(QUANTIZED_PAIR)
                && w.format.has_several_gemv()
                && w.parts.len() == 1
        };
        let mut ys: Vec<Option<GpuTensor>> = ws.iter().map(|_| None).collect();
        let mut formats: Vec<WeightFormat> = Vec::new();
        for w in ws {
            if !formats.contains(&w.format) {
                formats.push(w.format);
            }
        }
        for format in formats {
            let group: Vec<usize> = (0..ws.len())
                .filter(|&i| ws[i].format == format && together(ws[i]))
                .collect();
            for chunk in group.chunks(SEVERAL_MAX).filter(|c| c.len() > 1) {
                let chunk_ws: Vec<&GpuWeight> = chunk.iter().map(|&i| ws[i]).collect();
                for (&i, y) in chunk.iter().zip(self.gemv_several(x, &chunk_ws)?) {
                    ys[i] = Some(y);
                }
            }
        }
        ws.iter()
            .zip(ys)
            .map(|(w, y)| y.map_or_else(|| self.matmul(x, w), Ok))
            .collect()
    }

    /// One token through 2..=SEVERAL_MAX weights of one format with the several-weight GEMV,
    /// each in one part, in one dispatch.
    fn gemv_several(&self, x: &GpuTensor, ws: &[&GpuWeight]) -> Result<Vec<GpuTensor>, GpuError> {
        let first = ws[0];
        let ys = ws
            .iter()
            .map(|w| self.output(1, w.rows))
            .collect::<Result<Vec<_>, _>>()?;
        let span = first
            .format
            .gemv_span()
            .expect("formats with a several-weight GEMV have spans");
        let mut rows = [0u32; SEVERAL_MAX];
        for (slot, w) in rows.iter_mut().zip(ws) {
            *slot = w.rows as u32;
        }
        // Slots past the weights repeat the first weight and output; the kernel leaves them.
        let weight_at = |m: usize| &ws.get(m).unwrap_or(&first).parts[0].buffer;
        let output_at = |m: usize| &ys.get(m).unwrap_or(&ys[0]).buffer;
        let workgroups: usize = ws
            .iter()
            .map(|w| w.rows.div_ceil(GEMV_WORKGROUP_ROWS))
            .sum();
        let weight_bytes: u64 = ws.iter().map(|w| (w.rows * w.row_bytes) as u64).sum();
        let key = (x.buffer.clone(), None, x.dims());
        self.reuse(
            &self.last_quantized,
            key,
            || self.quantize_activations(x, None),
            |quantized| {
                self.record_as(
                    Kernel::GemvSeveral(first.format),
                    first.profile_class,
                    &[
                        x.cols as u32,
                        first.row_bytes as u32,
                        (x.cols / span) as u32,
                        ws.len() as u32,
                        rows[0],
                        rows[1],
                        rows[2],
                        rows[3],
                    ],
                    &[
                        weight_at(0),
                        &quantized.buffer,
                        output_at(0),
                        weight_at(1),
                        weight_at(2),
                        weight_at(3),
                        output_at(1),
                        output_at(2),
                        output_at(3),
                    ],
                    workgroups,
                    weight_bytes + f32_bytes(&[x]),
                )
            },
        )?;
        Ok(ys)
    }

    /// `use_it(value)`, the value computed by `compute` unless `slot` holds the one of `key`
    /// and nothing was recorded or written since its last use; then `slot` holds it.
    fn reuse<K: PartialEq, R>(
        &self,
        slot: &Mutex<Option<Reusable<K>>>,
        key: K,
        compute: impl FnOnce() -> Result<GpuTensor, GpuError>,
        use_it: impl FnOnce(&GpuTensor) -> Result<R, GpuError>,
    ) -> Result<R, GpuError> {
        let mut last = lock(slot)?;
        let work = self.recorder.work_recorded()?;
        let reusable = last
            .as_ref()
            .is_some_and(|last| last.key == key && last.work_after == work);
        if !reusable {
            *last = Some(Reusable {
                key,
                value: compute()?,
                work_after: 0,
            });
        }
        let last = last.as_mut().expect("set above");
        let result = use_it(&last.value)?;
        last.work_after = self.recorder.work_recorded()?;
        Ok(result)
    }

    /// Records the GEMV dispatches of `input · Wᵀ` into `out` (added to it with `accumulate`).
    /// Formats with an integer span reader take the input quantized to 14-bit integers.
    fn gemv(
        &self,
        input: GemvInput<'_>,
        w: &GpuWeight,
        out: &GpuTensor,
        accumulate: bool,
    ) -> Result<(), GpuError> {
        let (x, up) = match input {
            GemvInput::Plain(x) => (x, None),
            GemvInput::Swiglu { gate, up } => (gate, Some(up)),
        };
        let integer = self.integer_gemv
            && w.format.has_integer_gemv()
            && x.cols.is_multiple_of(QUANTIZED_PAIR);
        // The fast kernels take GEMV_WORKGROUP_ROWS rows per workgroup in spans; the others one
        // row per workgroup in decoder units.
        let (kernel, units) = match (w.format.gemv_span(), up) {
            (Some(span), _) if integer => (Kernel::GemvQuantized(w.format), w.cols / span),
            (Some(span), Some(_)) => (Kernel::GemvSwiglu(w.format), w.cols / span),
            (Some(span), None) => (Kernel::Gemv(w.format), w.cols / span),
            (None, _) => (Kernel::Gemv(w.format), w.cols / w.format.unit_elems()),
        };
        let rows_per_workgroup = if kernel.has_gemv_parts() {
            GEMV_WORKGROUP_ROWS
        } else {
            1
        };
        let record_parts = |input: &GpuTensor, extra: Option<&GpuTensor>| {
            let input_bytes = f32_bytes(&[input]) + extra.map_or(0, |e| f32_bytes(&[e]));
            for part in &w.parts {
                let mut buffers: Vec<Binding<'_>> = vec![&part.buffer, &input.buffer, &out.buffer];
                buffers.extend(extra.map(|e| &e.buffer));
                self.record_as(
                    kernel,
                    w.profile_class,
                    &[
                        part.rows as u32,
                        w.cols as u32,
                        x.rows as u32,
                        w.row_bytes as u32,
                        w.rows as u32,
                        part.first_row as u32,
                        units as u32,
                        accumulate as u32,
                    ],
                    &buffers,
                    part.rows.div_ceil(rows_per_workgroup) * x.rows,
                    (part.rows * w.row_bytes) as u64 + input_bytes,
                )?;
            }
            Ok(())
        };
        if !integer {
            return record_parts(x, up);
        }
        // The quantization is reused by the next GEMVs of the same input.
        let key = (x.buffer.clone(), up.map(|u| u.buffer.clone()), x.dims());
        self.reuse(
            &self.last_quantized,
            key,
            || self.quantize_activations(x, up),
            |quantized| record_parts(quantized, None),
        )
    }

    /// Rows of x (silu(x) ⊙ up with `up`) as quantize_activations.wgsl lays them out.
    fn quantize_activations(
        &self,
        x: &GpuTensor,
        up: Option<&GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        if let Some(up) = up {
            same_dims("quantize_activations", x, up)?;
        }
        whole_groups("quantize_activations", x, QUANTIZED_PAIR)?;
        let out = self.output(x.rows, x.cols / QUANTIZED_PAIR * QUANTIZED_PAIR_WORDS)?;
        self.record(
            Kernel::QuantizeActivations,
            &[x.rows as u32, x.cols as u32, up.is_some() as u32, 0],
            &[&x.buffer, &up.unwrap_or(x).buffer, &out.buffer],
            (x.len() / 4).div_ceil(Kernel::QuantizeActivations.workgroup_size()),
            f32_bytes(&[x]) * if up.is_some() { 2 } else { 1 },
        )?;
        Ok(out)
    }

    /// `y = x · Wᵀ` by f32 tiles of weight rows × tokens: one dispatch per weight part.
    pub(super) fn gemm(&self, x: &GpuTensor, w: &GpuWeight) -> Result<GpuTensor, GpuError> {
        let out = self.output(x.rows, w.rows)?;
        let token_tiles = x.rows.div_ceil(GEMM_TILE);
        for part in &w.parts {
            let row_tiles = part.rows.div_ceil(GEMM_TILE);
            self.record(
                Kernel::Gemm(w.format),
                &[
                    part.rows as u32,
                    w.cols as u32,
                    x.rows as u32,
                    w.row_bytes as u32,
                    w.rows as u32,
                    part.first_row as u32,
                    row_tiles as u32,
                    0,
                ],
                &[&part.buffer, &x.buffer, &out.buffer],
                row_tiles * token_tiles,
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
    /// With `quantize` (groups of whole pairs of runs) the output is also quantized for the
    /// integer GEMVs, and remembered as the quantization of the output.
    fn rms_norm_kernel(
        &self,
        op: &'static str,
        x: &GpuTensor,
        z: Option<&GpuTensor>,
        w: &GpuTensor,
        eps: f32,
        quantize: bool,
    ) -> Result<GpuTensor, GpuError> {
        one_row(op, w)?;
        whole_groups(op, x, w.cols)?;
        if let Some(z) = z {
            same_dims(op, x, z)?;
        }
        let out = self.output(x.rows, x.cols)?;
        let groups = x.len() / w.cols;
        let params = [
            w.cols as u32,
            groups as u32,
            eps.to_bits(),
            z.is_some() as u32,
        ];
        let mut buffers = vec![&x.buffer, &w.buffer, &z.unwrap_or(x).buffer, &out.buffer];
        let bytes_read = f32_bytes(&[x, w]) + z.map_or(0, |z| f32_bytes(&[z]));
        if !(quantize && w.cols.is_multiple_of(QUANTIZED_PAIR)) {
            self.record(Kernel::RmsNorm, &params, &buffers, groups, bytes_read)?;
            return Ok(out);
        }
        let quantized = self.output(x.rows, x.cols / QUANTIZED_PAIR * QUANTIZED_PAIR_WORDS)?;
        buffers.push(&quantized.buffer);
        // A workgroup per chunk of four values per invocation (rms_norm_quantized.wgsl).
        let chunks = w
            .cols
            .div_ceil(4 * Kernel::RmsNormQuantized.workgroup_size());
        self.record(
            Kernel::RmsNormQuantized,
            &params,
            &buffers,
            groups * chunks,
            bytes_read,
        )?;
        *lock(&self.last_quantized)? = Some(Reusable {
            key: (out.buffer.clone(), None, out.dims()),
            value: quantized,
            work_after: self.recorder.work_recorded()?,
        });
        Ok(out)
    }

    /// Each group of `w.cols` columns: `x / sqrt(mean(x²) + eps) ⊙ w`.
    pub fn rms_norm(&self, x: &GpuTensor, w: &GpuTensor, eps: f32) -> Result<GpuTensor, GpuError> {
        self.rms_norm_kernel("rms_norm", x, None, w, eps, false)
    }

    /// Each group of `w.cols` columns: `x / sqrt(mean(x²) + eps) ⊙ w ⊙ silu(z)`.
    pub fn gated_rms_norm(
        &self,
        x: &GpuTensor,
        z: &GpuTensor,
        w: &GpuTensor,
        eps: f32,
    ) -> Result<GpuTensor, GpuError> {
        // Its output is the input of the delta net's output projection.
        let quantize = self.integer_gemv && x.rows < GEMM_MIN_ROWS;
        self.rms_norm_kernel("gated_rms_norm", x, Some(z), w, eps, quantize)
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
        self.attention_kernel(q, k, v, k_cache, v_cache, pos0, shape, None)
    }

    /// §4 steps 3–6: q (from the query halves of `q_and_gate`) and k RMS-normed per head and
    /// rotated in one dispatch, then [`Wgpu::attention`] with the sigmoid gate applied to its
    /// output in the same dispatch.
    #[allow(clippy::too_many_arguments)]
    pub fn gated_attention(
        &self,
        q_and_gate: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        q_norm: &GpuTensor,
        k_norm: &GpuTensor,
        eps: f32,
        rope: RopeShape,
        k_cache: &GpuTensor,
        v_cache: &GpuTensor,
        pos0: usize,
        shape: AttentionShape,
    ) -> Result<GpuTensor, GpuError> {
        let op = "gated_attention";
        let AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        } = shape;
        let rows = q_and_gate.rows;
        let fits = (1..=MAX_HEAD_DIM).contains(&head_dim)
            && q_and_gate.cols == 2 * n_head * head_dim
            && k.dims() == (rows, n_kv_head * head_dim)
            && q_norm.dims() == (1, head_dim)
            && k_norm.dims() == (1, head_dim)
            && rope.dims <= head_dim
            && rope.dims.is_multiple_of(2);
        if !fits {
            return Err(shape_error(
                op,
                format!(
                    "q_and_gate {rows}×{}, k {}×{}, norms {}×{} and {}×{}, rope over {} dims \
                     for {n_head}/{n_kv_head} heads of {head_dim}",
                    q_and_gate.cols,
                    k.rows,
                    k.cols,
                    q_norm.rows,
                    q_norm.cols,
                    k_norm.rows,
                    k_norm.cols,
                    rope.dims
                ),
            ));
        }
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
        self.attention_kernel(
            &q,
            &k_rotated,
            v,
            k_cache,
            v_cache,
            pos0,
            shape,
            Some(q_and_gate),
        )
    }

    /// The attention kernel, its output times sigmoid of the gate halves of `gate` if given.
    #[allow(clippy::too_many_arguments)]
    fn attention_kernel(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        k_cache: &GpuTensor,
        v_cache: &GpuTensor,
        pos0: usize,
        shape: AttentionShape,
        gate: Option<&GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        let AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        } = shape;
        let kv_cols = n_kv_head * head_dim;
        if !(1..=MAX_HEAD_DIM).contains(&head_dim) || !head_dim.is_multiple_of(4) {
            return Err(shape_error(
                "attention",
                format!("head dim {head_dim} is not a multiple of 4 in 4..={MAX_HEAD_DIM}"),
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
        if q.rows >= ATTENTION_PREFILL_MIN_ROWS && Wgpu::attention_prefill_fits(shape) {
            return self.attention_prefill(q, k, v, k_cache, v_cache, pos0, shape, gate);
        }
        let scale = 1.0 / (head_dim as f32).sqrt();
        if q.rows == 1 {
            return self.decode_attention(q, k, v, k_cache, v_cache, pos0, shape, gate);
        }
        let out = self.output(q.rows, q.cols)?;
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
                gate.is_some() as u32,
            ],
            &[
                &q.buffer,
                &k.buffer,
                &v.buffer,
                &k_cache.buffer,
                &v_cache.buffer,
                &out.buffer,
                &gate.unwrap_or(q).buffer,
            ],
            q.rows * n_head,
            f32_bytes(&[q]) + ((pos0 + q.rows) * kv_cols * 8) as u64,
        )?;
        Ok(out)
    }

    /// One query row: the cache split into blocks of WG rows, each (head, block) a workgroup,
    /// then the blocks merged per head (gated if `gate` is given). Shapes are checked.
    #[allow(clippy::too_many_arguments)]
    fn decode_attention(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        k_cache: &GpuTensor,
        v_cache: &GpuTensor,
        pos0: usize,
        shape: AttentionShape,
        gate: Option<&GpuTensor>,
    ) -> Result<GpuTensor, GpuError> {
        let AttentionShape {
            n_head,
            n_kv_head,
            head_dim,
        } = shape;
        let kv_cols = n_kv_head * head_dim;
        let blocks = (pos0 + 1).div_ceil(WG);
        let partial = self.output(n_head * blocks, 2 + head_dim)?;
        let scale = 1.0 / (head_dim as f32).sqrt();
        self.record(
            Kernel::AttentionBlocks,
            &[
                n_head as u32,
                n_kv_head as u32,
                head_dim as u32,
                pos0 as u32,
                kv_cols as u32,
                blocks as u32,
                scale.to_bits(),
                0,
            ],
            &[
                &q.buffer,
                &k.buffer,
                &v.buffer,
                &k_cache.buffer,
                &v_cache.buffer,
                &partial.buffer,
            ],
            n_head * blocks,
            f32_bytes(&[q]) + ((pos0 + 1) * kv_cols * 8) as u64,
        )?;
        let out = self.output(1, q.cols)?;
        self.record(
            Kernel::AttentionCombine,
            &[
                n_head as u32,
                head_dim as u32,
                blocks as u32,
                gate.is_some() as u32,
            ],
            &[&partial.buffer, &gate.unwrap_or(q).buffer, &out.buffer],
            n_head,
            f32_bytes(&[&partial]),
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

    /// Causal depthwise conv + SiLU of m (see [`Wgpu::conv1d_silu`]), split into q | k | v, q and
    /// k L2-normalised per head (`x · scale / sqrt(Σx² + eps)`), q scaled by `q_scale`.
    pub fn conv_qkv_norm(
        &self,
        m: &GpuTensor,
        w: &GpuTensor,
        state: &GpuTensor,
        shape: DeltaNetShape,
        q_scale: f32,
        eps: f32,
    ) -> Result<Qkv<GpuTensor>, GpuError> {
        let DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        } = shape;
        let (taps, key_width, value_width) = (w.cols, n_k_head * k_dim, n_v_head * v_dim);
        let channels = 2 * key_width + value_width;
        let widest = CONV_QKV_CHANNELS_PER_INVOCATION * WG;
        let fits = taps > 0
            && n_k_head > 0
            && n_v_head > 0
            && (1..=widest).contains(&k_dim)
            && (1..=widest).contains(&v_dim)
            && m.cols == channels
            && w.rows == channels
            && state.dims() == (taps - 1, channels);
        if !fits {
            return Err(shape_error(
                "conv_qkv_norm",
                format!(
                    "m {}×{}, w {}×{taps}, state {}×{} for {n_k_head}×{k_dim} key and \
                     {n_v_head}×{v_dim} value channels (heads at most {widest} wide)",
                    m.rows, m.cols, w.rows, state.rows, state.cols
                ),
            ));
        }
        let q = self.output(m.rows, key_width)?;
        let k = self.output(m.rows, key_width)?;
        let v = self.output(m.rows, value_width)?;
        self.record(
            Kernel::ConvQkvNorm,
            &[
                n_k_head as u32,
                k_dim as u32,
                n_v_head as u32,
                v_dim as u32,
                taps as u32,
                m.rows as u32,
                q_scale.to_bits(),
                eps.to_bits(),
            ],
            &[
                &m.buffer,
                &w.buffer,
                &state.buffer,
                &q.buffer,
                &k.buffer,
                &v.buffer,
            ],
            2 * n_k_head + n_v_head,
            f32_bytes(&[m, w, state]),
        )?;
        Ok(Qkv { q, k, v })
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
        self.delta_rule_kernel(q, k, v, DeltaRuleGates::Computed { g, beta }, state, shape)
    }

    /// [`Wgpu::delta_rule`] with its gates computed from the projections as
    /// [`Wgpu::delta_net_gates`] does, in the same dispatch.
    #[allow(clippy::too_many_arguments)]
    pub fn gated_delta_rule(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        alpha: &GpuTensor,
        beta: &GpuTensor,
        ssm_a: &GpuTensor,
        dt_bias: &GpuTensor,
        state: &GpuTensor,
        shape: DeltaNetShape,
    ) -> Result<GpuTensor, GpuError> {
        let op = "gated_delta_rule";
        one_row(op, ssm_a)?;
        same_dims(op, ssm_a, dt_bias)?;
        if ssm_a.cols != shape.n_v_head {
            return Err(shape_error(
                op,
                format!(
                    "{} gate heads for {} value heads",
                    ssm_a.cols, shape.n_v_head
                ),
            ));
        }
        let gates = DeltaRuleGates::Raw {
            alpha,
            beta,
            ssm_a,
            dt_bias,
        };
        self.delta_rule_kernel(q, k, v, gates, state, shape)
    }

    fn delta_rule_kernel(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        gates: DeltaRuleGates<'_>,
        state: &GpuTensor,
        shape: DeltaNetShape,
    ) -> Result<GpuTensor, GpuError> {
        let DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        } = shape;
        let (gate, strength, gate_params, raw) = match gates {
            DeltaRuleGates::Computed { g, beta } => (g, beta, [g, g], false),
            DeltaRuleGates::Raw {
                alpha,
                beta,
                ssm_a,
                dt_bias,
            } => (alpha, beta, [ssm_a, dt_bias], true),
        };
        let n = q.rows;
        let fits = n_k_head > 0
            && (1..=MAX_K_DIM).contains(&k_dim)
            && v_dim > 0
            && q.dims() == (n, n_k_head * k_dim)
            && k.dims() == (n, n_k_head * k_dim)
            && v.dims() == (n, n_v_head * v_dim)
            && gate.dims() == (n, n_v_head)
            && strength.dims() == (n, n_v_head)
            && state.dims() == (n_v_head, k_dim * v_dim);
        if !fits {
            return Err(shape_error(
                "delta_rule",
                format!(
                    "q {}×{}, v {}×{}, gates {}×{}, state {}×{} for {n_k_head} k heads, \
                     {n_v_head} v heads, k_dim {k_dim} (at most {MAX_K_DIM}), v_dim {v_dim}",
                    q.rows, q.cols, v.rows, v.cols, gate.rows, gate.cols, state.rows, state.cols
                ),
            ));
        }
        if n >= DELTA_RULE_CHUNK_MIN_ROWS {
            // The chunked kernel takes the gates computed (one more dispatch, once a prefill).
            if raw {
                let (g, beta) =
                    self.delta_net_gates(gate, strength, gate_params[0], gate_params[1])?;
                return self.delta_rule_chunked(q, k, v, &g, &beta, state, shape);
            }
            return self.delta_rule_chunked(q, k, v, gate, strength, state, shape);
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
                raw as u32,
                0,
            ],
            &[
                &q.buffer,
                &k.buffer,
                &v.buffer,
                &gate.buffer,
                &strength.buffer,
                &state.buffer,
                &out.buffer,
                &gate_params[0].buffer,
                &gate_params[1].buffer,
            ],
            n_v_head * column_chunks,
            f32_bytes(&[q, k, v, gate, strength, state]),
        )?;
        Ok(out)
    }
}

/// Where the delta rule's decay and write strength come from.
enum DeltaRuleGates<'a> {
    /// g and β as delta_net_gates gives them.
    Computed {
        g: &'a GpuTensor,
        beta: &'a GpuTensor,
    },
    /// The projections and the layer's parameters, the gates computed in the kernel.
    Raw {
        alpha: &'a GpuTensor,
        beta: &'a GpuTensor,
        ssm_a: &'a GpuTensor,
        dt_bias: &'a GpuTensor,
    },
}
