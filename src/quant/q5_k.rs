//! Q5_K: Q4_K plus a fifth bit per element. Byte l of `qh` holds, in bit s, the high bit of
//! element l of run s; scales, mins and the affine step are Q4_K's.

use bytemuck::{Pod, Zeroable};

use super::block::{BlockFormat, BlockQuantizer};
use super::q4_k::{dequantize_runs, quantize_affine_block, Search};
use super::GgmlType;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct BlockQ5K {
    d: [u8; 2],
    dmin: [u8; 2],
    scales: [u8; 12],
    qh: [u8; 32],
    qs: [[u8; 32]; 4],
}

pub(super) struct Q5K;

impl BlockFormat for Q5K {
    const TYPE: GgmlType = GgmlType::Q5_K;
    type Block = BlockQ5K;
    type Weights = [f32; 256];

    #[inline(always)]
    fn decode(block: &BlockQ5K, out: &mut [f32; 256]) {
        let mut runs = [[0u8; 32]; 8];
        for (j, (pair, group)) in runs.chunks_exact_mut(2).zip(&block.qs).enumerate() {
            if let [low, high] = pair {
                let elements = low
                    .iter_mut()
                    .zip(high.iter_mut())
                    .zip(group)
                    .zip(&block.qh);
                for (((low, high), &byte), &high_bits) in elements {
                    *low = (byte & 0x0f) | (((high_bits >> (2 * j)) & 1) << 4);
                    *high = (byte >> 4) | (((high_bits >> (2 * j + 1)) & 1) << 4);
                }
            }
        }
        dequantize_runs(block.d, block.dmin, &block.scales, &runs, out);
    }
}

impl BlockQuantizer for Q5K {
    /// ggml's reference quantizer: Q4_K's affine runs with 5-bit levels and a finer search.
    fn encode(x: &[f32; 256]) -> BlockQ5K {
        let block = quantize_affine_block(
            x,
            &Search {
                max_level: 31,
                rmin: -0.5,
                rdelta: 0.1,
                steps: 15,
            },
        );
        let mut qh = [0u8; 32];
        let mut qs = [[0u8; 32]; 4];
        for (j, (group, pair)) in qs.iter_mut().zip(block.levels.chunks_exact(64)).enumerate() {
            for l in 0..32 {
                let (low, high) = (pair[l], pair[l + 32]);
                qh[l] |= ((low >> 4) << (2 * j)) | ((high >> 4) << (2 * j + 1));
                group[l] = (low & 0x0f) | ((high & 0x0f) << 4);
            }
        }
        BlockQ5K {
            d: block.d,
            dmin: block.dmin,
            scales: block.scales,
            qh,
            qs,
        }
    }
}
