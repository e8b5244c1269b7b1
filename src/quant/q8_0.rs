//! Q8_0: blocks of 32 signed bytes sharing one f16 scale, `x = d·q`.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, f32_to_f16, BlockFormat, BlockQuantizer};
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

/// ggml's `(int8_t) roundf(v)` as its x86-64 builds compute it: through a 32-bit integer
/// (`cvttss2si`, which gives `i32::MIN` for NaN, infinities and values out of range) whose low
/// byte is kept. In range (|v| ≤ 127.5) that is plain rounding half away from zero; the rest
/// only happens for blocks of subnormals, whose inverse scale overflows to infinity (ggml then
/// stores 0).
fn ggml_round_to_i8(v: f32) -> i8 {
    let rounded = v.round();
    let wide = if rounded.is_finite() && rounded.abs() < 2_147_483_648.0 {
        rounded as i32
    } else {
        i32::MIN
    };
    wide as i8
}

impl BlockQuantizer for Q8_0 {
    /// ggml's reference quantizer: the largest magnitude maps to ±127, the quants are rounded
    /// (half away from zero) against the unrounded f32 scale, and the scale is stored as the
    /// nearest f16, an infinity when it is out of range (as in ggml and gguf-py).
    fn encode(x: &[f32; 32]) -> BlockQ8_0 {
        let amax = x.iter().fold(0.0f32, |amax, v| amax.max(v.abs()));
        let d = amax / 127.0;
        let inverse = if d == 0.0 { 0.0 } else { 1.0 / d };
        let mut qs = [0i8; 32];
        for (q, value) in qs.iter_mut().zip(x) {
            *q = ggml_round_to_i8(value * inverse);
        }
        BlockQ8_0 {
            d: f32_to_f16(d),
            qs,
        }
    }
}
