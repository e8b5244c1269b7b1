//! Q5_0: Q4_0 with a fifth bit per element, `x = d·(q − 16)`. The 32 high bits form one
//! little-endian u32 whose bit i belongs to element i.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, BlockFormat};
use super::GgmlType;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct BlockQ5_0 {
    d: [u8; 2],
    qh: [u8; 4],
    qs: [u8; 16],
}

pub(super) struct Q5_0;

impl BlockFormat for Q5_0 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    type Block = BlockQ5_0;
    type Weights = [f32; 32];

    #[inline(always)]
    fn decode(block: &BlockQ5_0, out: &mut [f32; 32]) {
        let d = f16_to_f32(block.d);
        let high_bits = u32::from_le_bytes(block.qh);
        let (low, high) = out.split_at_mut(16);
        for (j, ((low, high), &byte)) in low.iter_mut().zip(high).zip(&block.qs).enumerate() {
            let low_q = u32::from(byte & 0x0f) | (((high_bits >> j) & 1) << 4);
            let high_q = u32::from(byte >> 4) | (((high_bits >> (j + 16)) & 1) << 4);
            *low = d * (low_q as f32 - 16.0);
            *high = d * (high_q as f32 - 16.0);
        }
    }
}
