//! Projections: the decode GEMVs (plain, SwiGLU input, quantized input, several weights at
//! once, the normed input reused) and the prefill GEMM.

use super::*;
use crate::backend::gpu::memory::WeightPart;

impl Wgpu {
    /// `y = x · Wᵀ` for every row of x: one GEMV dispatch per weight part.
    pub fn matmul(&self, x: &GpuTensor, w: &GpuWeight) -> Result<GpuTensor, GpuError> {
        check_matmul(x, w)?;
        if x.rows >= GEMM_MIN_ROWS {
            return if self.cooperative_matrix {
                self.gemm_cooperative(MatmulInput::Plain(x), w)
            } else {
                self.gemm(x, w)
            };
        }
        let out = self.output(x.rows, w.rows)?;
        self.gemv(MatmulInput::Plain(x), w, &out, false)?;
        Ok(out)
    }

    /// `acc += x · Wᵀ`, the add done by the GEMV where the format has a fast one. A prefill adds
    /// in a pass of its own: adding in the cooperative GEMM's epilogue instead ran 2–3% slower
    /// at 1024 and 4096 tokens on the H100 (benches/results/h100-2026-12-07-run40).
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
        self.gemv(MatmulInput::Plain(x), w, acc, true)
    }

    /// `acc += (silu(gate) ⊙ up) · Wᵀ`, all in the GEMV where the format has a fast one; a
    /// prefill on cooperative matrices computes the product as it converts the GEMM's input to
    /// f16 (no f32 product written and read back).
    pub fn swiglu_matmul_add(
        &self,
        gate: &GpuTensor,
        up: &GpuTensor,
        w: &GpuWeight,
        acc: &GpuTensor,
    ) -> Result<(), GpuError> {
        same_dims("swiglu", gate, up)?;
        let input = MatmulInput::Swiglu { gate, up };
        let prefill = gate.rows >= GEMM_MIN_ROWS;
        let fused = if prefill {
            self.cooperative_matrix
        } else {
            w.format.gemv_span().is_some()
        };
        if !fused {
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
        if prefill {
            // The product computed as the GEMM's input is converted to f16.
            let y = self.gemm_cooperative(input, w)?;
            return self.add(acc, &y);
        }
        self.gemv(input, w, acc, true)
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
    pub(super) fn matmuls(
        &self,
        x: &GpuTensor,
        ws: &[&GpuWeight],
    ) -> Result<Vec<GpuTensor>, GpuError> {
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
    pub(super) fn gemv_several(
        &self,
        x: &GpuTensor,
        ws: &[&GpuWeight],
    ) -> Result<Vec<GpuTensor>, GpuError> {
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
                self.dispatch(&KernelDispatch {
                    kernel: Kernel::GemvSeveral(first.format),
                    class: first.profile_class,
                    params: &[
                        x.cols as u32,
                        first.row_bytes as u32,
                        (x.cols / span) as u32,
                        ws.len() as u32,
                        rows[0],
                        rows[1],
                        rows[2],
                        rows[3],
                    ],
                    buffers: &[
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
                    bytes_read: weight_bytes + f32_bytes(&[x]),
                })
            },
        )?;
        Ok(ys)
    }

    /// `use_it(value)`, the value computed by `compute` unless `slot` holds the one of `key`
    /// and nothing was recorded or written since its last use; then `slot` holds it.
    pub(in crate::backend::gpu) fn reuse<K: PartialEq, R>(
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
    pub(super) fn gemv(
        &self,
        input: MatmulInput<'_>,
        w: &GpuWeight,
        out: &GpuTensor,
        accumulate: bool,
    ) -> Result<(), GpuError> {
        let (x, up) = match input {
            MatmulInput::Plain(x) => (x, None),
            MatmulInput::Swiglu { gate, up } => (gate, Some(up)),
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
                self.dispatch(&KernelDispatch {
                    kernel,
                    class: w.profile_class,
                    params: &part_params(w, part, x.rows, [units as u32, accumulate as u32]),
                    buffers: &buffers,
                    workgroups: part.rows.div_ceil(rows_per_workgroup) * x.rows,
                    bytes_read: (part.rows * w.row_bytes) as u64 + input_bytes,
                })?;
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
    pub(super) fn quantize_activations(
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
    pub(in crate::backend::gpu) fn gemm(
        &self,
        x: &GpuTensor,
        w: &GpuWeight,
    ) -> Result<GpuTensor, GpuError> {
        let out = self.output(x.rows, w.rows)?;
        let token_tiles = x.rows.div_ceil(GEMM_TILE);
        for part in &w.parts {
            let row_tiles = part.rows.div_ceil(GEMM_TILE);
            self.record(
                Kernel::Gemm(w.format),
                &part_params(w, part, x.rows, [row_tiles as u32, 0]),
                &[&part.buffer, &x.buffer, &out.buffer],
                row_tiles * token_tiles,
                (part.rows * w.row_bytes) as u64 + f32_bytes(&[x]),
            )?;
        }
        Ok(out)
    }
}

/// The parameter words of a GEMV or GEMM kernel over one part of `w` for `tokens` rows of input:
/// the part's place in the weight, then the kernel's own two words.
fn part_params(w: &GpuWeight, part: &WeightPart, tokens: usize, own: [u32; 2]) -> [u32; 8] {
    [
        part.rows as u32,
        w.cols as u32,
        tokens as u32,
        w.row_bytes as u32,
        w.rows as u32,
        part.first_row as u32,
        own[0],
        own[1],
    ]
}
