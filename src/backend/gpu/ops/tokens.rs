//! Token ids in and out: embedding rows (of host ids or of ids on the GPU) and argmax.

use super::*;

impl Wgpu {
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

    pub(super) fn embed_kernel(
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
    pub(super) fn upload_u32(&self, values: &[u32]) -> Result<GpuTensor, GpuError> {
        let ids = self.output(1, values.len())?;
        if !values.is_empty() {
            self.recorder
                .write(&ids.buffer, 0, bytemuck::cast_slice(values))?;
        }
        Ok(ids)
    }
}
