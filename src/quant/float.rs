//! The unblocked float formats F32, F16 and BF16: one little-endian value per element, rows of
//! any length. They differ only in how one element converts, so they share the row code.

use bytemuck::Pod;

use super::block::{f16_to_f32, f32_to_f16};
use super::lanes::LaneSum;
use super::{GgmlType, QuantError};

pub(super) trait FloatFormat {
    const TYPE: GgmlType;
    /// One stored element as raw bytes (alignment 1, so any byte slice views as them).
    type Raw: Pod;

    fn to_f32(raw: Self::Raw) -> f32;
    fn from_f32(value: f32) -> Self::Raw;
}

pub(super) struct F32;
pub(super) struct F16;
pub(super) struct Bf16;

impl FloatFormat for F32 {
    const TYPE: GgmlType = GgmlType::F32;
    type Raw = [u8; 4];

    #[inline(always)]
    fn to_f32(raw: [u8; 4]) -> f32 {
        f32::from_le_bytes(raw)
    }

    fn from_f32(value: f32) -> [u8; 4] {
        value.to_le_bytes()
    }
}

impl FloatFormat for F16 {
    const TYPE: GgmlType = GgmlType::F16;
    type Raw = [u8; 2];

    #[inline(always)]
    fn to_f32(raw: [u8; 2]) -> f32 {
        f16_to_f32(raw)
    }

    /// Round to nearest even; out-of-range values become infinities, as in ggml.
    fn from_f32(value: f32) -> [u8; 2] {
        f32_to_f16(value)
    }
}

impl FloatFormat for Bf16 {
    const TYPE: GgmlType = GgmlType::BF16;
    type Raw = [u8; 2];

    /// BF16 is the top half of an f32.
    #[inline(always)]
    fn to_f32(raw: [u8; 2]) -> f32 {
        f32::from_bits(u32::from(u16::from_le_bytes(raw)) << 16)
    }

    /// Round to nearest even on the dropped 16 bits; a NaN keeps its sign and top payload
    /// bits and is forced quiet so truncation cannot turn it into an infinity.
    fn from_f32(value: f32) -> [u8; 2] {
        let bits = value.to_bits();
        let top = if value.is_nan() {
            (bits >> 16) | 0x40
        } else {
            // Cannot overflow: the largest non-NaN pattern (-inf, 0xff80_0000) plus 0x8000 fits.
            (bits + 0x7fff + ((bits >> 16) & 1)) >> 16
        };
        (top as u16).to_le_bytes()
    }
}

fn raws<F: FloatFormat>(bytes: &[u8]) -> Result<&[F::Raw], QuantError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| QuantError::RaggedBytes {
        ty: F::TYPE,
        bytes: bytes.len(),
        block_bytes: F::TYPE.block_bytes(),
    })
}

/// Callers have checked that `out` holds exactly the row's elements.
#[inline(always)]
pub(super) fn dequantize_row<F: FloatFormat>(
    bytes: &[u8],
    out: &mut [f32],
) -> Result<(), QuantError> {
    for (out, raw) in out.iter_mut().zip(raws::<F>(bytes)?) {
        *out = F::to_f32(*raw);
    }
    Ok(())
}

/// Converts a chunk at a time into a stack buffer so the multiply-add loop stays branch-free;
/// callers have checked that `x` holds exactly the row's elements.
#[inline(always)]
pub(super) fn dot_row<F: FloatFormat>(bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    const CHUNK: usize = 64;
    let mut buffer = [0.0f32; CHUNK];
    let mut sum = LaneSum::default();
    for (raws, x) in raws::<F>(bytes)?.chunks(CHUNK).zip(x.chunks(CHUNK)) {
        let weights = &mut buffer[..raws.len()];
        for (weight, raw) in weights.iter_mut().zip(raws) {
            *weight = F::to_f32(*raw);
        }
        sum.add(weights, x);
    }
    Ok(sum.total())
}

pub(super) fn quantize_row<F: FloatFormat>(x: &[f32], out: &mut Vec<u8>) -> Result<(), QuantError> {
    out.reserve(x.len() * std::mem::size_of::<F::Raw>());
    for value in x {
        out.extend_from_slice(bytemuck::bytes_of(&F::from_f32(*value)));
    }
    Ok(())
}
