//! Q4_0: blocks of 32 4-bit quants with one f16 scale, `x = d·(q − 8)`. Byte j holds element j
//! in its low nibble and element j + 16 in its high nibble.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, BlockFormat};
use super::GgmlType;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct BlockQ4_0 {
    d: [u8; 2],
    qs: [u8; 16],
}

pub(super) struct Q4_0;

impl BlockFormat for Q4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    type Block = BlockQ4_0;
    type Weights = [f32; 32];

    #[inline(always)]
    fn decode(block: &BlockQ4_0, out: &mut [f32; 32]) {
        let d = f16_to_f32(block.d);
        let (low, high) = out.split_at_mut(16);
        for ((low, high), &byte) in low.iter_mut().zip(high).zip(&block.qs) {
            *low = d * f32::from(i16::from(byte & 0x0f) - 8);
            *high = d * f32::from(i16::from(byte >> 4) - 8);
        }
    }
}
