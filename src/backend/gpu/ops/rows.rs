//! Row and column selection, norms and elementwise ops.

use super::*;

impl Wgpu {
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
    pub(super) fn rms_norm_kernel(
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
}
