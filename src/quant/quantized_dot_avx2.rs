//! AVX2 versions of the kernels in `quantized_dot`: the same integer sums, 32 products per
//! `maddubs` (unsigned weight levels × signed activations), widened to i32 by `madd` with the
//! run scales, and one f32 multiply-add per block.
//!
//! Every load reads 32 bytes at a constant offset inside a fixed-size block array, so none can
//! leave its block.

use std::arch::x86_64::*;

use super::activations::ActivationBlock;
use super::block::f16_to_f32;
use super::q4_k::{unpack_scale_mins, BlockQ4K};
use super::q6_k::BlockQ6K;
use super::q8_0::BlockQ8_0;
use super::quantized_dot::{q4_k_min_sum, q6_k_offset_sum, Q8_0_PER_ACTIVATION};

#[inline(always)]
fn load<T>(bytes: &[T; 32]) -> __m256i {
    // SAFETY: 32 one-byte elements; the unaligned load has no alignment requirement.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
}

/// The `i`-th 32 activation quants of a block.
#[inline(always)]
fn activations(a: &ActivationBlock, i: usize) -> __m256i {
    let chunk: Option<&[i8; 32]> =
        a.qs.get(i * 32..i * 32 + 32)
            .and_then(|c| c.try_into().ok());
    chunk.map_or_else(|| unsafe { _mm256_setzero_si256() }, load)
}

#[target_feature(enable = "avx2,fma")]
fn horizontal_sum(v: __m256) -> f32 {
    let pairs = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let pairs = _mm_add_ps(pairs, _mm_movehl_ps(pairs, pairs));
    let total = _mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1));
    _mm_cvtss_f32(total)
}

#[target_feature(enable = "avx2,fma")]
pub(super) fn q4_k(weights: &[BlockQ4K], acts: &[ActivationBlock]) -> f32 {
    let low_nibbles = _mm256_set1_epi8(0x0f);
    let mut sum = _mm256_setzero_ps();
    let mut min_sum = 0.0f32;
    for (w, a) in weights.iter().zip(acts) {
        let (scales, mins) = unpack_scale_mins(&w.scales);
        let mut block = _mm256_setzero_si256();
        for (j, group) in w.qs.iter().enumerate() {
            let packed = load(group);
            let low = _mm256_and_si256(packed, low_nibbles);
            let high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
            let low = _mm256_maddubs_epi16(low, activations(a, 2 * j));
            let high = _mm256_maddubs_epi16(high, activations(a, 2 * j + 1));
            let low = _mm256_madd_epi16(low, _mm256_set1_epi16(i16::from(scales[2 * j])));
            let high = _mm256_madd_epi16(high, _mm256_set1_epi16(i16::from(scales[2 * j + 1])));
            block = _mm256_add_epi32(block, _mm256_add_epi32(low, high));
        }
        let d = _mm256_set1_ps(a.d * f16_to_f32(w.d));
        sum = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(block), sum);
        min_sum += a.d * f16_to_f32(w.dmin) * q4_k_min_sum(&mins, a) as f32;
    }
    horizontal_sum(sum) - min_sum
}

#[target_feature(enable = "avx2,fma")]
pub(super) fn q6_k(weights: &[BlockQ6K], acts: &[ActivationBlock]) -> f32 {
    let low_nibbles = _mm256_set1_epi8(0x0f);
    let two_bits = _mm256_set1_epi8(3);
    // Bits `shift..shift + 2` of every high byte, moved to bits 4..6 of a level.
    let high_bits = |qh: __m256i, shift: i32| {
        let bits = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift)), two_bits);
        _mm256_slli_epi16(bits, 4)
    };
    let mut sum = _mm256_setzero_ps();
    let mut offset_sum = 0.0f32;
    for (w, a) in weights.iter().zip(acts) {
        let mut block = _mm256_setzero_si256();
        for (h, (ql, qh)) in w.ql.iter().zip(&w.qh).enumerate() {
            let (Ok(first), Ok(second)) = (
                <&[u8; 32]>::try_from(&ql[..32]),
                <&[u8; 32]>::try_from(&ql[32..]),
            ) else {
                continue;
            };
            let (first, second, qh) = (load(first), load(second), load(qh));
            let levels = [
                _mm256_or_si256(_mm256_and_si256(first, low_nibbles), high_bits(qh, 0)),
                _mm256_or_si256(_mm256_and_si256(second, low_nibbles), high_bits(qh, 2)),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(first, 4), low_nibbles),
                    high_bits(qh, 4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(second, 4), low_nibbles),
                    high_bits(qh, 6),
                ),
            ];
            for (quarter, levels) in levels.into_iter().enumerate() {
                let run = h * 8 + quarter * 2;
                let scale = |r: usize| i16::from(w.scales.get(r).copied().unwrap_or(0));
                // Each 128-bit half of the products covers one run of 16.
                let scales =
                    _mm256_set_m128i(_mm_set1_epi16(scale(run + 1)), _mm_set1_epi16(scale(run)));
                let products = _mm256_maddubs_epi16(levels, activations(a, h * 4 + quarter));
                block = _mm256_add_epi32(block, _mm256_madd_epi16(products, scales));
            }
        }
        let d = a.d * f16_to_f32(w.d);
        sum = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(block), sum);
        offset_sum += d * (32 * q6_k_offset_sum(&w.scales, a)) as f32;
    }
    horizontal_sum(sum) - offset_sum
}

#[target_feature(enable = "avx2,fma")]
pub(super) fn q8_0(weights: &[BlockQ8_0], acts: &[ActivationBlock]) -> f32 {
    let ones = _mm256_set1_epi16(1);
    let mut sum = _mm256_setzero_ps();
    for (ws, a) in weights.chunks_exact(Q8_0_PER_ACTIVATION).zip(acts) {
        for (i, w) in ws.iter().enumerate() {
            let q = load(&w.qs);
            // maddubs wants one unsigned operand: |w| against a carrying w's sign.
            let magnitudes = _mm256_sign_epi8(q, q);
            let signed_acts = _mm256_sign_epi8(activations(a, i), q);
            let products = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitudes, signed_acts), ones);
            let d = _mm256_set1_ps(a.d * f16_to_f32(w.d));
            sum = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(products), sum);
        }
    }
    horizontal_sum(sum)
}
