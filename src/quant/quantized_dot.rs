//! Weight rows times 8-bit activations: integer products within each block, one f32 step per
//! block (as ggml's CPU kernels do). The scalar kernels here are the definition; the AVX2 ones
//! in `quantized_dot_avx2` compute the same integer sums.

use super::activations::{ActivationBlock, QuantizedActivations, ACTIVATION_BLOCK};
use super::block::{blocks, f16_to_f32};
use super::q4_k::{unpack_scale_mins, BlockQ4K, Q4K};
use super::q6_k::{BlockQ6K, Q6K};
use super::q8_0::{BlockQ8_0, Q8_0};
use super::{check_row, GgmlType, QuantError};

/// Q8_0 blocks per activation block.
pub(super) const Q8_0_PER_ACTIVATION: usize = ACTIVATION_BLOCK / 32;

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
    dot_row_quantized_tokens(
        ty,
        bytes,
        std::slice::from_ref(x),
        std::slice::from_mut(&mut y),
    )?;
    Ok(y)
}

/// One encoded row against several tokens' activations (`out[t]` for `xs[t]`): the row's
/// blocks are unpacked once per group of tokens rather than once per token.
pub fn dot_row_quantized_tokens(
    ty: GgmlType,
    bytes: &[u8],
    xs: &[QuantizedActivations],
    out: &mut [f32],
) -> Result<(), QuantError> {
    if out.len() != xs.len() {
        return Err(QuantError::LengthMismatch {
            ty,
            bytes: bytes.len(),
            row_elems: xs.len(),
            what: "the output (one value per token)",
            elems: out.len(),
        });
    }
    for x in xs {
        check_quantized(ty, bytes, x)?;
    }
    #[cfg(target_arch = "x86_64")]
    if super::quantized_dot_avx2::supported() {
        // SAFETY: the CPU supports the features the kernels are compiled for.
        return unsafe { tokens_avx2(ty, bytes, xs, out) };
    }
    for (y, x) in out.iter_mut().zip(xs) {
        *y = dot_row_quantized_scalar(ty, bytes, x)?;
    }
    Ok(())
}

/// Tokens per pass of the vector kernels over a weight row.
#[cfg(target_arch = "x86_64")]
const TOKENS_PER_PASS: usize = 8;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn tokens_avx2(
    ty: GgmlType,
    bytes: &[u8],
    xs: &[QuantizedActivations],
    out: &mut [f32],
) -> Result<(), QuantError> {
    use super::quantized_dot_avx2 as avx2;
    /// A short last group runs the same kernel with its missing token slots empty.
    fn run<B, const N: usize>(
        weights: &[B],
        xs: &[QuantizedActivations],
        out: &mut [f32],
        kernel: impl Fn(&[B], [&[ActivationBlock]; N]) -> [f32; N],
    ) {
        for (group, ys) in xs.chunks(N).zip(out.chunks_mut(N)) {
            let acts = std::array::from_fn(|t| group.get(t).map_or(&[][..], |x| &x.blocks[..]));
            for (y, value) in ys.iter_mut().zip(kernel(weights, acts)) {
                *y = value;
            }
        }
    }
    // Decode has one token: a kernel sized for it skips the empty slots' bookkeeping.
    let single = xs.len() == 1;
    match ty {
        GgmlType::Q4_K => {
            let w = blocks::<Q4K>(bytes)?;
            if single {
                run::<_, 1>(w, xs, out, |w, a| avx2::q4_k(w, a))
            } else {
                run::<_, TOKENS_PER_PASS>(w, xs, out, |w, a| avx2::q4_k(w, a))
            }
        }
        GgmlType::Q6_K => {
            let w = blocks::<Q6K>(bytes)?;
            if single {
                run::<_, 1>(w, xs, out, |w, a| avx2::q6_k(w, a))
            } else {
                run::<_, TOKENS_PER_PASS>(w, xs, out, |w, a| avx2::q6_k(w, a))
            }
        }
        GgmlType::Q8_0 => {
            let w = blocks::<Q8_0>(bytes)?;
            if single {
                run::<_, 1>(w, xs, out, |w, a| avx2::q8_0(w, a))
            } else {
                run::<_, TOKENS_PER_PASS>(w, xs, out, |w, a| avx2::q8_0(w, a))
            }
        }
        _ => return unsupported(ty),
    }
    Ok(())
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
        .zip(&a.sums16)
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
