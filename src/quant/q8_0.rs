//! Q8_0: blocks of 32 signed bytes sharing one f16 scale, `x = d·q`.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, stored_f16, BlockFormat, BlockQuantizer, F16_MAX};
use super::GgmlType;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct BlockQ8_0 {
    pub(super) d: [u8; 2],
    pub(super) qs: [i8; 32],
}

pub(super) struct Q8_0;

impl BlockFormat for Q8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    type Block = BlockQ8_0;
    type Weights = [f32; 32];

    #[inline(always)]
    fn decode(block: &BlockQ8_0, out: &mut [f32; 32]) {
        let d = f16_to_f32(block.d);
        for (out, &q) in out.iter_mut().zip(&block.qs) {
            *out = f32::from(q) * d;
        }
    }
}

impl BlockQuantizer for Q8_0 {
    /// Maps the largest magnitude to ±127. Like ggml, the quants are rounded against the
    /// unrounded f32 scale (so results match its reference quantizer bit for bit); the scale is
    /// clamped to the f16 range so huge inputs saturate rather than decode to infinity.
    fn encode(x: &[f32; 32]) -> BlockQ8_0 {
        let amax = x.iter().fold(0.0f32, |amax, v| amax.max(v.abs()));
        let d = (amax / 127.0).min(F16_MAX);
        let inverse = if d == 0.0 { 0.0 } else { 1.0 / d };
        let mut qs = [0i8; 32];
        for (q, value) in qs.iter_mut().zip(x) {
            // `as` saturates (and maps NaN to 0), so rounding slightly past 127 is harmless.
            *q = (value * inverse).round() as i8;
        }
        BlockQ8_0 {
            d: stored_f16(d).1,
            qs,
        }
    }
}
