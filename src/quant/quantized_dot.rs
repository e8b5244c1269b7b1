//! Weight rows times 14-bit activations: integer products within each block, one f32 step per
//! block (as ggml's CPU kernels do with 8 bits). The scalar kernels here are the definition;
//! the vector ones in `quantized_dot_x86` compute the same integer sums.

use super::activations::{
    ActivationBlock, QuantizedActivations, ACTIVATION_BLOCK, Q8_0_PER_ACTIVATION,
};
use super::block::{blocks, f16_to_f32};
use super::q4_k::{unpack_scale_mins, BlockQ4K, Q4K};
use super::q6_k::{BlockQ6K, Q6K};
use super::q8_0::{BlockQ8_0, Q8_0};
use super::{check_row, GgmlType, QuantError};

/// Whether [`dot_row_quantized`] handles rows of `ty`.
pub fn has_quantized_dot(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K | GgmlType::Q8_0)
}

/// The dot product of one encoded row (Q4_K, Q6_K or Q8_0) with quantized activations, on the
/// fastest kernels this CPU runs.
pub fn dot_row_quantized(
    ty: GgmlType,
    bytes: &[u8],
    x: &QuantizedActivations,
) -> Result<f32, QuantError> {
    let mut y = 0.0;
    matmul_quantized(
        ty,
        bytes,
        std::slice::from_ref(x),
        std::slice::from_mut(&mut y),
    )?;
    Ok(y)
}

/// A slice of a matmul: `out[r·n + t]` = row `r` of the encoded rows back to back in `bytes`,
/// times token `t` of the `n = xs.len()` tokens' activations. Each row's blocks are unpacked
/// once per group of tokens rather than once per token.
pub fn matmul_quantized(
    ty: GgmlType,
    bytes: &[u8],
    xs: &[QuantizedActivations],
    out: &mut [f32],
) -> Result<(), QuantError> {
    let Some(first) = xs.first() else {
        return Ok(());
    };
    let row_bytes = first.blocks.len() * activation_block_bytes(ty)?;
    let row_elems = first.len();
    if let Some(x) = xs.iter().find(|x| x.len() != row_elems) {
        return Err(QuantError::LengthMismatch {
            ty,
            bytes: row_bytes,
            row_elems,
            what: "another token's activations",
            elems: x.len(),
        });
    }
    if row_bytes == 0 || !bytes.len().is_multiple_of(row_bytes) {
        return Err(QuantError::RaggedRows {
            ty,
            bytes: bytes.len(),
            row_bytes,
        });
    }
    let rows = bytes.len() / row_bytes;
    if out.len() != rows * xs.len() {
        return Err(QuantError::LengthMismatch {
            ty,
            bytes: bytes.len(),
            row_elems: rows * xs.len(),
            what: "the output (one value per row and token)",
            elems: out.len(),
        });
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::quantized_dot_x86::Isa::detect() {
        let xs: Vec<&[ActivationBlock]> = xs.iter().map(|x| &x.blocks[..]).collect();
        matmul_x86(isa, ty, bytes, row_bytes, &xs, out);
        return Ok(());
    }
    for (row, ys) in bytes
        .chunks_exact(row_bytes)
        .zip(out.chunks_exact_mut(xs.len()))
    {
        for (y, x) in ys.iter_mut().zip(xs) {
            *y = dot_row_quantized_scalar(ty, row, x)?;
        }
    }
    Ok(())
}

/// Bytes of `ty` that one activation block meets.
fn activation_block_bytes(ty: GgmlType) -> Result<usize, QuantError> {
    if !has_quantized_dot(ty) {
        return unsupported(ty);
    }
    Ok(ty.block_bytes() * ACTIVATION_BLOCK / ty.block_elems())
}

/// [`dot_row_quantized`] on the portable kernels (what non-AVX2 machines run; tests compare
/// the vector kernels with it).
pub fn dot_row_quantized_scalar(
    ty: GgmlType,
    bytes: &[u8],
    x: &QuantizedActivations,
) -> Result<f32, QuantError> {
    check_quantized(ty, bytes, x)?;
    let sum = match ty {
        GgmlType::Q4_K => blocks::<Q4K>(bytes)?
            .iter()
            .zip(&x.blocks)
            .map(|(w, a)| q4_k_block(w, a))
            .sum(),
        GgmlType::Q6_K => blocks::<Q6K>(bytes)?
            .iter()
            .zip(&x.blocks)
            .map(|(w, a)| q6_k_block(w, a))
            .sum(),
        GgmlType::Q8_0 => blocks::<Q8_0>(bytes)?
            .chunks_exact(Q8_0_PER_ACTIVATION)
            .zip(&x.blocks)
            .map(|(w, a)| q8_0_blocks(w, a))
            .sum(),
        _ => return unsupported(ty),
    };
    Ok(sum)
}

fn check_quantized(ty: GgmlType, bytes: &[u8], x: &QuantizedActivations) -> Result<(), QuantError> {
    if !has_quantized_dot(ty) {
        return unsupported(ty);
    }
    check_row(ty, bytes, x.len(), "x", "dot_row_quantized")
}

fn unsupported<T>(ty: GgmlType) -> Result<T, QuantError> {
    Err(QuantError::Unsupported {
        ty,
        operation: "dot_row_quantized",
    })
}

/// Σ (d·sc·q − dmin·m)·a over one super-block: the scales multiply integer products, and the
/// mins meet the activations only through their run sums.
fn q4_k_block(w: &BlockQ4K, a: &ActivationBlock) -> f32 {
    let (scales, mins) = unpack_scale_mins(&w.scales);
    let mut sum = 0i64;
    for (j, group) in w.qs.iter().enumerate() {
        let (mut low, mut high) = (0i64, 0i64);
        for (l, &byte) in group.iter().enumerate() {
            low += i64::from(byte & 0x0f) * i64::from(a.quant(64 * j + l));
            high += i64::from(byte >> 4) * i64::from(a.quant(64 * j + 32 + l));
        }
        sum += low * i64::from(scales[2 * j]) + high * i64::from(scales[2 * j + 1]);
    }
    let min_sum: f32 = mins
        .iter()
        .zip(&a.sums32)
        .map(|(&m, &s)| f32::from(m) * s)
        .sum();
    a.d * f16_to_f32(w.d) * sum as f32 - f16_to_f32(w.dmin) * min_sum
}

/// Σ d·sc·(q − 32)·a over one super-block; the −32 meets the activations through run sums.
fn q6_k_block(w: &BlockQ6K, a: &ActivationBlock) -> f32 {
    let mut sum = 0i64;
    for (h, (ql, qh)) in w.ql.iter().zip(&w.qh).enumerate() {
        for l in 0..32 {
            let (first, second, high) = (ql[l], ql[l + 32], qh[l]);
            let quants = [
                (first & 0x0f) | ((high & 3) << 4),
                (second & 0x0f) | (((high >> 2) & 3) << 4),
                (first >> 4) | (((high >> 4) & 3) << 4),
                (second >> 4) | ((high >> 6) << 4),
            ];
            for (quarter, &q) in quants.iter().enumerate() {
                let element = h * 128 + quarter * 32 + l;
                let scale = i64::from(w.scales[element / 16]);
                sum += scale * i64::from(q) * i64::from(a.quant(element));
            }
        }
    }
    let offset: f32 = w
        .scales
        .iter()
        .zip(a.sums16.as_flattened())
        .map(|(&sc, &s)| f32::from(sc) * s)
        .sum();
    f16_to_f32(w.d) * (a.d * sum as f32 - 32.0 * offset)
}

fn q8_0_blocks(w: &[BlockQ8_0], a: &ActivationBlock) -> f32 {
    let sums = w.iter().enumerate().map(|(c, w)| {
        let sum: i32 =
            w.qs.iter()
                .enumerate()
                .map(|(l, &q)| i32::from(q) * a.quant(c * 32 + l))
                .sum();
        f16_to_f32(w.d) * sum as f32
    });
    a.d * sums.sum::<f32>()
}

#[cfg(target_arch = "x86_64")]
/// [`matmul_quantized`] on `isa`'s kernels. The caller has checked that `ty` has a
/// quantized dot, that `bytes` is whole rows of `row_bytes`, that every token has one
/// activation block per `row_bytes`' worth of blocks, and that `out` has one value per row and
/// token; `isa` must be supported.
fn matmul_x86(
    isa: super::quantized_dot_x86::Isa,
    ty: GgmlType,
    bytes: &[u8],
    row_bytes: usize,
    xs: &[&[ActivationBlock]],
    out: &mut [f32],
) {
    debug_assert!(isa.supported());
    use super::quantized_dot_x86::{matmul_avx2, matmul_avx512, Isa};
    use super::quantized_matmul_avx512 as tiled;
    // SAFETY: the caller made sure the CPU has the features of `isa`.
    unsafe {
        match isa {
            Isa::Avx2 => matmul_avx2(ty, bytes, row_bytes, xs, out),
            Isa::Avx512Vnni if xs.len() >= tiled::TOKENS && tiled::handles(ty) => {
                tiled::matmul(ty, bytes, row_bytes, xs, out)
            }
            Isa::Avx512Vnni => matmul_avx512(ty, bytes, row_bytes, xs, out),
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::quant::quantize_row;
    use crate::quant::quantized_dot_x86::Isa;

    fn values(seed: u32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let k = (i as u32)
                    .wrapping_mul(2654435761)
                    .wrapping_add(seed * 40503);
                (k % 2001) as f32 / 1000.0 - 1.0 + if i % 61 == 0 { 5.0 } else { 0.0 }
            })
            .collect()
    }

    /// Every supported width (and on AVX-512 the tiled prefill) against the scalar definition,
    /// for one token and for groups with a short last one.
    #[test]
    fn every_width_matches_the_scalar_kernels() {
        let cols = 1024;
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
            let mut row = Vec::new();
            quantize_row(ty, &values(1, cols), &mut row).unwrap();
            let acts: Vec<QuantizedActivations> = (0..11)
                .map(|t| QuantizedActivations::new(&values(10 + t, cols)).unwrap())
                .collect();
            let expected: Vec<f32> = acts
                .iter()
                .map(|x| dot_row_quantized_scalar(ty, &row, x).unwrap())
                .collect();
            let xs: Vec<&[ActivationBlock]> = acts.iter().map(|x| &x.blocks[..]).collect();
            for isa in [Isa::Avx2, Isa::Avx512Vnni] {
                if !isa.supported() {
                    eprintln!("{isa:?} not run: this CPU lacks it");
                    continue;
                }
                for n in [1, xs.len()] {
                    // Three copies of the row (a whole tile of two rows and one left over):
                    // each must give every token's value.
                    let mut out = vec![0f32; 3 * n];
                    matmul_x86(isa, ty, &row.repeat(3), row.len(), &xs[..n], &mut out);
                    let expected = expected[..n].iter().cycle();
                    for (t, (&got, &want)) in out.iter().zip(expected).enumerate() {
                        assert!(
                            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                            "{} {isa:?} token {t} of {n}: {got} vs {want}",
                            ty.name()
                        );
                    }
                }
            }
        }
    }
}
