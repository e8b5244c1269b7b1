//! Weight formats: ggml type ids, block geometry, row dequantization, fused row·x dot products,
//! and quantizers for the formats the fixtures and synthetic models need.
//!
//! CONTRACT (other modules code against exactly these signatures):
//! - `GgmlType`: every ggml type id that a GGUF may name, with `from_id`, `id`, `name`,
//!   `block_elems`, `block_bytes`, `is_supported` (true for F32, F16, BF16, Q8_0, Q4_0, Q5_0,
//!   Q4_K, Q5_K, Q6_K).
//! - `row_bytes(ty, n_elems: u64) -> Option<u64>`: None if n is not a multiple of the block size or overflows.
//! - `dequantize_row(ty, bytes, out: &mut [f32]) -> Result<(), QuantError>`
//! - `dot_row(ty, bytes, x: &[f32]) -> Result<f32, QuantError>` (never materializes the row)
//! - `quantize_row(ty, x: &[f32], out: &mut Vec<u8>) -> Result<(), QuantError>` (F32, F16, BF16, Q8_0, Q4_K, Q6_K)
//! - `dequantize(ty, bytes, n_elems) -> Result<Vec<f32>, QuantError>` (allocating convenience)
//!
//! The f32 paths compute the same operations in the same order on every machine; on x86-64
//! with AVX2 and FMA they are compiled a second time for those features (picked at run time),
//! which only widens the vectors. The 14-bit activation path (`QuantizedActivations`,
//! `dot_row_quantized`) is an approximation for speed, with integer kernels.

mod activations;
mod block;
mod float;
mod ggml_type;
mod lanes;
mod q4_0;
mod q4_k;
mod q5_0;
mod q5_k;
mod q6_k;
mod q8_0;
mod quantized_dot;
#[cfg(target_arch = "x86_64")]
mod quantized_dot_x86;
#[cfg(target_arch = "x86_64")]
mod quantized_matmul_avx512;
mod simd;

pub use activations::{QuantizedActivations, ACTIVATION_BLOCK, ACTIVATION_QUANT_MAX};
pub use ggml_type::{row_bytes, GgmlType};
pub use quantized_dot::{
    dot_row_quantized, dot_row_quantized_scalar, has_quantized_dot, matmul_quantized,
};

use float::{Bf16, F16, F32};

/// Why a row could not be decoded, multiplied or encoded. Lengths are in bytes for encoded
/// rows and in elements for f32 slices.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    #[error("ggml type {} is not supported by {operation}", .ty.name())]
    Unsupported {
        ty: GgmlType,
        operation: &'static str,
    },
    #[error("{} row of {bytes} bytes is not a whole number of {block_bytes}-byte blocks", .ty.name())]
    RaggedBytes {
        ty: GgmlType,
        bytes: usize,
        block_bytes: usize,
    },
    #[error("{} row of {elems} elements is not a whole number of {block_elems}-element blocks", .ty.name())]
    RaggedElems {
        ty: GgmlType,
        elems: usize,
        block_elems: usize,
    },
    #[error("{} matrix of {bytes} bytes is not a whole number of {row_bytes}-byte rows", .ty.name())]
    RaggedRows {
        ty: GgmlType,
        bytes: usize,
        row_bytes: usize,
    },
    #[error("{} row of {bytes} bytes holds {row_elems} elements but {what} has {elems}", .ty.name())]
    LengthMismatch {
        ty: GgmlType,
        bytes: usize,
        row_elems: usize,
        what: &'static str,
        elems: usize,
    },
}

/// Decodes one encoded row into `out`, whose length must be the row's element count.
pub fn dequantize_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    check_row(ty, bytes, out.len(), "the output", "dequantize_row")?;
    simd::dequantize_row(ty, bytes, out)
}

/// [`dequantize_row`] after the checks; inlined into each instruction-set build.
#[inline(always)]
fn dequantize_row_unchecked(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    match ty {
        GgmlType::F32 => float::dequantize_row::<F32>(bytes, out),
        GgmlType::F16 => float::dequantize_row::<F16>(bytes, out),
        GgmlType::BF16 => float::dequantize_row::<Bf16>(bytes, out),
        GgmlType::Q8_0 => block::dequantize_row::<q8_0::Q8_0>(bytes, out),
        GgmlType::Q4_0 => block::dequantize_row::<q4_0::Q4_0>(bytes, out),
        GgmlType::Q5_0 => block::dequantize_row::<q5_0::Q5_0>(bytes, out),
        GgmlType::Q4_K => block::dequantize_row::<q4_k::Q4K>(bytes, out),
        GgmlType::Q5_K => block::dequantize_row::<q5_k::Q5K>(bytes, out),
        GgmlType::Q6_K => block::dequantize_row::<q6_k::Q6K>(bytes, out),
        _ => unsupported(ty, "dequantize_row"),
    }
}

/// The dot product of one encoded row with `x`, decoding one block at a time.
pub fn dot_row(ty: GgmlType, bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    check_row(ty, bytes, x.len(), "x", "dot_row")?;
    simd::dot_row(ty, bytes, x)
}

/// [`dot_row`] after the checks; inlined into each instruction-set build.
#[inline(always)]
fn dot_row_unchecked(ty: GgmlType, bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    match ty {
        GgmlType::F32 => float::dot_row::<F32>(bytes, x),
        GgmlType::F16 => float::dot_row::<F16>(bytes, x),
        GgmlType::BF16 => float::dot_row::<Bf16>(bytes, x),
        GgmlType::Q8_0 => block::dot_row::<q8_0::Q8_0>(bytes, x),
        GgmlType::Q4_0 => block::dot_row::<q4_0::Q4_0>(bytes, x),
        GgmlType::Q5_0 => block::dot_row::<q5_0::Q5_0>(bytes, x),
        GgmlType::Q4_K => block::dot_row::<q4_k::Q4K>(bytes, x),
        GgmlType::Q5_K => block::dot_row::<q5_k::Q5K>(bytes, x),
        GgmlType::Q6_K => block::dot_row::<q6_k::Q6K>(bytes, x),
        _ => unsupported(ty, "dot_row"),
    }
}

/// `out[t] = w · xs[t]` for f32 rows, bit-identical to `dot_row(GgmlType::F32, ..)` per token
/// but reading `w` once per few tokens (the exact prefill's inner kernel).
pub fn dot_f32_tokens(w: &[f32], xs: &[&[f32]], out: &mut [f32]) -> Result<(), QuantError> {
    let mismatch = |what, elems| QuantError::LengthMismatch {
        ty: GgmlType::F32,
        bytes: std::mem::size_of_val(w),
        row_elems: w.len(),
        what,
        elems,
    };
    if out.len() != xs.len() {
        return Err(mismatch("the output (one value per x)", out.len()));
    }
    if let Some(x) = xs.iter().find(|x| x.len() != w.len()) {
        return Err(mismatch("an x", x.len()));
    }
    simd::dot_f32_tokens(w, xs, out);
    Ok(())
}

/// [`dot_f32_tokens`] after the checks; inlined into each instruction-set build.
#[inline(always)]
fn dot_f32_tokens_unchecked(w: &[f32], xs: &[&[f32]], out: &mut [f32]) {
    const TOKENS: usize = 4;
    let mut groups = xs.chunks_exact(TOKENS);
    let mut outs = out.chunks_exact_mut(TOKENS);
    for (group, ys) in (&mut groups).zip(&mut outs) {
        let group = std::array::from_fn(|t| group.get(t).copied().unwrap_or(&[][..]));
        ys.copy_from_slice(&lanes::dot_many::<TOKENS>(w, group));
    }
    for (x, y) in groups.remainder().iter().zip(outs.into_remainder()) {
        let [single] = lanes::dot_many(w, [*x]);
        *y = single;
    }
}

/// Encodes `x` as one row of `ty`, appending the bytes to `out`.
pub fn quantize_row(ty: GgmlType, x: &[f32], out: &mut Vec<u8>) -> Result<(), QuantError> {
    let block_elems = ty.block_elems();
    if !x.len().is_multiple_of(block_elems) {
        return Err(QuantError::RaggedElems {
            ty,
            elems: x.len(),
            block_elems,
        });
    }
    match ty {
        GgmlType::F32 => float::quantize_row::<F32>(x, out),
        GgmlType::F16 => float::quantize_row::<F16>(x, out),
        GgmlType::BF16 => float::quantize_row::<Bf16>(x, out),
        GgmlType::Q8_0 => block::quantize_row::<q8_0::Q8_0>(x, out),
        GgmlType::Q4_K => block::quantize_row::<q4_k::Q4K>(x, out),
        GgmlType::Q5_K => block::quantize_row::<q5_k::Q5K>(x, out),
        GgmlType::Q6_K => block::quantize_row::<q6_k::Q6K>(x, out),
        _ => unsupported(ty, "quantize_row"),
    }
}

/// Decodes an encoded row of `n_elems` elements into a new vector.
pub fn dequantize(ty: GgmlType, bytes: &[u8], n_elems: usize) -> Result<Vec<f32>, QuantError> {
    // Validate before allocating so a bogus element count cannot request a huge buffer.
    check_row(ty, bytes, n_elems, "the element count", "dequantize")?;
    let mut out = vec![0.0; n_elems];
    dequantize_row(ty, bytes, &mut out)?;
    Ok(out)
}

fn unsupported<T>(ty: GgmlType, operation: &'static str) -> Result<T, QuantError> {
    Err(QuantError::Unsupported { ty, operation })
}

/// Checks that `bytes` is whole blocks of a supported type holding exactly `elems` elements.
fn check_row(
    ty: GgmlType,
    bytes: &[u8],
    elems: usize,
    what: &'static str,
    operation: &'static str,
) -> Result<(), QuantError> {
    if !ty.is_supported() {
        return unsupported(ty, operation);
    }
    let block_bytes = ty.block_bytes();
    if !bytes.len().is_multiple_of(block_bytes) {
        return Err(QuantError::RaggedBytes {
            ty,
            bytes: bytes.len(),
            block_bytes,
        });
    }
    let row_elems = (bytes.len() / block_bytes).checked_mul(ty.block_elems());
    if row_elems != Some(elems) {
        return Err(QuantError::LengthMismatch {
            ty,
            bytes: bytes.len(),
            row_elems: row_elems.unwrap_or(usize::MAX),
            what,
            elems,
        });
    }
    Ok(())
}
