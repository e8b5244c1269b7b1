//! Choosing the next token on the GPU, so that only its id comes back: the repeat penalty, the
//! k best logits in two passes (chunks, then their candidates), and the draw.

use super::kernels::Kernel;
use super::ops::f32_bytes;
use super::{GpuError, GpuTensor, Wgpu};
use crate::sample::{penalizes, Draw};

/// Logits per workgroup of the first pass (WGSL `WG` × `PER` of top_k_chunks.wgsl).
const TOP_K_CHUNK: usize = 4096;
/// The most candidates the draw keeps (WGSL `MAX_K` of top_k_draw.wgsl).
pub const MAX_TOP_K: usize = 64;

impl Wgpu {
    /// Whether [`Wgpu::sample`] can choose by `draw`: greedy, or a top-k of at most
    /// [`MAX_TOP_K`] (a draw over the whole vocabulary needs every logit sorted).
    pub fn samples_on_gpu(draw: &Draw) -> bool {
        draw.temperature <= 0.0 || (1..=MAX_TOP_K).contains(&draw.top_k)
    }

    /// [`crate::backend::Backend::sample`] on the GPU, for a `draw` that
    /// [`Wgpu::samples_on_gpu`] accepts; `logits` are penalized in place.
    pub fn sample(
        &self,
        logits: &GpuTensor,
        recent: &GpuTensor,
        slot: usize,
        draw: &Draw,
    ) -> Result<GpuTensor, GpuError> {
        let cols = logits.cols;
        if logits.rows != 1
            || !(1..1 << 24).contains(&cols)
            || recent.cols != 1
            || slot >= recent.rows
            || !Wgpu::samples_on_gpu(draw)
        {
            return Err(GpuError::Shape {
                op: "sample",
                detail: format!(
                    "logits {}×{cols}, recent ids {}×{} at row {slot}, top-k {} (the GPU draws \
                     from 1..={MAX_TOP_K}, ids exact in f32)",
                    logits.rows, recent.rows, recent.cols, draw.top_k
                ),
            });
        }
        if penalizes(draw.repeat_penalty) {
            self.record(
                Kernel::RepeatPenalty,
                &[
                    cols as u32,
                    recent.rows as u32,
                    draw.repeat_penalty.to_bits(),
                ],
                &[&recent.buffer, &logits.buffer],
                1,
                f32_bytes(&[recent]),
            )?;
        }
        let k = if draw.temperature <= 0.0 {
            1
        } else {
            draw.top_k
        };
        let groups = cols.div_ceil(TOP_K_CHUNK);
        let values = self.output(groups, k)?;
        let indices = self.output(groups, k)?;
        self.record(
            Kernel::TopKChunks,
            &[cols as u32, k as u32, groups as u32],
            &[&logits.buffer, &values.buffer, &indices.buffer],
            groups,
            f32_bytes(&[logits]),
        )?;
        let chosen = self.output(1, 1)?;
        self.record(
            Kernel::TopKDraw,
            &[
                (groups * k) as u32,
                k as u32,
                slot as u32,
                draw.temperature.to_bits(),
                draw.top_p.to_bits(),
                draw.min_p.to_bits(),
                draw.uniform.to_bits(),
            ],
            &[
                &values.buffer,
                &indices.buffer,
                &chosen.buffer,
                &recent.buffer,
            ],
            1,
            f32_bytes(&[&values, &indices]),
        )?;
        Ok(chosen)
    }
}
