//! What every block format shares: the row drivers that walk blocks, and f16 scale fields.
//!
//! A format only says how one block decodes (and, for some, encodes); the drivers here turn
//! that into whole-row dequantization, fused dot products and quantization.

use bytemuck::{Pod, Zeroable};

use super::lanes::LaneSum;
use super::{GgmlType, QuantError};

/// One block-quantized ggml format.
pub(super) trait BlockFormat {
    const TYPE: GgmlType;
    /// The block exactly as stored in a file. Every field is a byte array, so the struct has
    /// alignment 1 and any byte slice of whole blocks views as a slice of them.
    type Block: Pod;
    /// One block's decoded weights: `[f32; block_elems]`.
    type Weights: Pod + AsRef<[f32]>;

    fn decode(block: &Self::Block, out: &mut Self::Weights);
}

/// A block format this crate can also produce.
pub(super) trait BlockQuantizer: BlockFormat {
    fn encode(x: &Self::Weights) -> Self::Block;
}

/// Exact f16 → f32 widening, written branch-free so row loops vectorize (a library call per
/// element does not). NaN payloads are kept as they are, like numpy's conversion.
#[inline(always)]
pub(super) fn f16_to_f32(bytes: [u8; 2]) -> f32 {
    const EXPONENT_MASK: u32 = 0x1f << 23;
    // 127 − 15: moves an f16 exponent, shifted into f32 position, to the f32 bias.
    const REBIAS: u32 = 112 << 23;
    let bits = u32::from(u16::from_le_bytes(bytes));
    let sign = (bits & 0x8000) << 16;
    let magnitude = (bits & 0x7fff) << 13;
    let exponent = magnitude & EXPONENT_MASK;
    let rebiased = magnitude + REBIAS;
    let value = if exponent == EXPONENT_MASK {
        // Infinity or NaN: the top exponent must stay the top exponent.
        f32::from_bits(rebiased + REBIAS)
    } else if exponent == 0 {
        // Zero or subnormal, m·2^-24: give it exponent 2^-14 as if normal, so the float reads
        // 2^-14 + m·2^-24, then subtract the 2^-14 exactly.
        f32::from_bits(rebiased + (1 << 23)) - f32::from_bits(113 << 23)
    } else {
        f32::from_bits(rebiased)
    };
    f32::from_bits(value.to_bits() | sign)
}

pub(super) fn f32_to_f16(value: f32) -> [u8; 2] {
    half::f16::from_f32(value).to_le_bytes()
}

/// ggml's `nearest_int`: rounds half to even by adding 1.5·2^23 and reading the low mantissa
/// bits. Exact for |x| < 2^22; beyond that (and for NaN) it yields the same bits ggml gets,
/// which is what keeps extreme blocks byte-identical to ggml's.
#[inline(always)]
pub(super) fn nearest_int(x: f32) -> i32 {
    let shifted = x + 12_582_912.0;
    (shifted.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

pub(super) fn blocks<F: BlockFormat>(bytes: &[u8]) -> Result<&[F::Block], QuantError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| QuantError::RaggedBytes {
        ty: F::TYPE,
        bytes: bytes.len(),
        block_bytes: F::TYPE.block_bytes(),
    })
}

fn ragged_elems<F: BlockFormat>(elems: usize) -> QuantError {
    QuantError::RaggedElems {
        ty: F::TYPE,
        elems,
        block_elems: F::TYPE.block_elems(),
    }
}

/// Callers have checked that `out` holds exactly the row's elements.
#[inline(always)]
pub(super) fn dequantize_row<F: BlockFormat>(
    bytes: &[u8],
    out: &mut [f32],
) -> Result<(), QuantError> {
    let blocks = blocks::<F>(bytes)?;
    let out_len = out.len();
    let outs: &mut [F::Weights] =
        bytemuck::try_cast_slice_mut(out).map_err(|_| ragged_elems::<F>(out_len))?;
    for (block, out) in blocks.iter().zip(outs) {
        F::decode(block, out);
    }
    Ok(())
}

/// Decodes one block at a time into a stack buffer and accumulates it against `x`; callers
/// have checked that `x` holds exactly the row's elements.
#[inline(always)]
pub(super) fn dot_row<F: BlockFormat>(bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    let blocks = blocks::<F>(bytes)?;
    let xs: &[F::Weights] = bytemuck::try_cast_slice(x).map_err(|_| ragged_elems::<F>(x.len()))?;
    let mut weights = F::Weights::zeroed();
    let mut sum = LaneSum::default();
    for (block, x) in blocks.iter().zip(xs) {
        F::decode(block, &mut weights);
        sum.add(weights.as_ref(), x.as_ref());
    }
    Ok(sum.total())
}

pub(super) fn quantize_row<F: BlockQuantizer>(
    x: &[f32],
    out: &mut Vec<u8>,
) -> Result<(), QuantError> {
    let xs: &[F::Weights] = bytemuck::try_cast_slice(x).map_err(|_| ragged_elems::<F>(x.len()))?;
    out.reserve(xs.len() * F::TYPE.block_bytes());
    for x in xs {
        out.extend_from_slice(bytemuck::bytes_of(&F::encode(x)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_widening_is_exact_for_every_bit_pattern() {
        for bits in 0..=u16::MAX {
            let ours = f16_to_f32(bits.to_le_bytes());
            let reference = half::f16::from_bits(bits).to_f32();
            assert!(
                ours.to_bits() == reference.to_bits() || (ours.is_nan() && reference.is_nan()),
                "{bits:#06x}: {ours:e} vs {reference:e}"
            );
        }
    }
}
