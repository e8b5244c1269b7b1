//! AVX2 versions of the kernels in `quantized_dot`: the same integer sums, 32 products per
//! `maddubs` (unsigned weight levels × signed activations), widened to i32 by `madd` with the
//! run scales, and one f32 multiply-add per block and token.
//!
//! Each kernel takes `N` tokens: a block's levels and scales are unpacked once and used for
//! all of them, which is what makes prefill cheaper per token than decode.

use std::arch::x86_64::*;

use super::activations::ActivationBlock;
use super::q4_k::{unpack_scale_mins, BlockQ4K};
use super::q6_k::BlockQ6K;
use super::q8_0::BlockQ8_0;
use super::quantized_dot::Q8_0_PER_ACTIVATION;

/// The features every function here is compiled for.
pub(super) fn supported() -> bool {
    static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DETECTED.get_or_init(|| {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    })
}

#[inline(always)]
fn load<T>(bytes: &[T; 32]) -> __m256i {
    // SAFETY: 32 one-byte elements; the unaligned load has no alignment requirement.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
}

/// The `i`-th 32 activation quants of a block (zeros past its end, which callers never ask for).
#[inline(always)]
fn activations(a: &ActivationBlock, i: usize) -> __m256i {
    let chunk: Option<&[i8; 32]> =
        a.qs.get(i * 32..i * 32 + 32)
            .and_then(|c| c.try_into().ok());
    chunk.map_or_else(|| unsafe { _mm256_setzero_si256() }, load)
}

/// The block's 16 run sums as i16 lanes.
#[inline(always)]
fn run_sums(a: &ActivationBlock) -> __m256i {
    // SAFETY: 16 i16 are 32 bytes; unaligned load.
    unsafe { _mm256_loadu_si256(a.sums16.as_ptr().cast()) }
}

/// Two f16 values (little-endian, back to back) widened at once.
#[target_feature(enable = "avx2,fma,f16c")]
fn f16_pair(first: [u8; 2], second: [u8; 2]) -> (f32, f32) {
    let [a, b] = first;
    let [c, d] = second;
    let wide = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from_le_bytes([a, b, c, d])));
    (
        _mm_cvtss_f32(wide),
        _mm_cvtss_f32(_mm_shuffle_ps(wide, wide, 1)),
    )
}

#[target_feature(enable = "avx2,fma")]
fn horizontal_sum(v: __m256) -> f32 {
    horizontal_sum_128(_mm_add_ps(
        _mm256_castps256_ps128(v),
        _mm256_extractf128_ps(v, 1),
    ))
}

#[target_feature(enable = "avx2,fma")]
fn horizontal_sum_128(v: __m128) -> f32 {
    let pairs = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)))
}

/// Lane `i` of every 128-bit half holds word `index` of the source half, for `shuffle_epi8`.
#[inline(always)]
fn word_broadcast(index: usize) -> __m256i {
    let low = (2 * index) as i16;
    unsafe { _mm256_set1_epi16(((low + 1) << 8) | low) }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_k<const N: usize>(
    weights: &[BlockQ4K],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    let low_nibbles = _mm256_set1_epi8(0x0f);
    let mut sums = [_mm256_setzero_ps(); N];
    let mut min_sums = [_mm_setzero_ps(); N];
    for (b, w) in weights.iter().enumerate() {
        let blocks: [Option<&ActivationBlock>; N] = std::array::from_fn(|t| acts[t].get(b));
        let (d, dmin) = f16_pair(w.d, w.dmin);
        let (scales, mins) = unpack_scale_mins(&w.scales);
        let scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(
            i64::from_le_bytes(scales),
        )));
        let mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(i64::from_le_bytes(mins)));
        let mut block = [_mm256_setzero_si256(); N];
        for (j, group) in w.qs.iter().enumerate() {
            let packed = load(group);
            let halves = [
                _mm256_and_si256(packed, low_nibbles),
                _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles),
            ];
            for (half, levels) in halves.into_iter().enumerate() {
                let run = 2 * j + half;
                let scale = _mm256_shuffle_epi8(scales, word_broadcast(run));
                for (block, a) in block.iter_mut().zip(blocks) {
                    if let Some(a) = a {
                        let products = _mm256_maddubs_epi16(levels, activations(a, run));
                        *block = _mm256_add_epi32(*block, _mm256_madd_epi16(products, scale));
                    }
                }
            }
        }
        for (t, a) in blocks.into_iter().enumerate() {
            let Some(a) = a else { continue };
            sums[t] = _mm256_fmadd_ps(
                _mm256_set1_ps(a.d * d),
                _mm256_cvtepi32_ps(block[t]),
                sums[t],
            );
            let sums16 = run_sums(a);
            let pair_sums = _mm_hadd_epi16(
                _mm256_castsi256_si128(sums16),
                _mm256_extracti128_si256(sums16, 1),
            );
            let weighted = _mm_cvtepi32_ps(_mm_madd_epi16(pair_sums, mins));
            min_sums[t] = _mm_fmadd_ps(_mm_set1_ps(a.d * dmin), weighted, min_sums[t]);
        }
    }
    std::array::from_fn(|t| horizontal_sum(sums[t]) - horizontal_sum_128(min_sums[t]))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q6_k<const N: usize>(
    weights: &[BlockQ6K],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    let low_nibbles = _mm256_set1_epi8(0x0f);
    let two_bits = _mm256_set1_epi8(3);
    let mut sums = [_mm256_setzero_ps(); N];
    for (b, w) in weights.iter().enumerate() {
        let blocks: [Option<&ActivationBlock>; N] = std::array::from_fn(|t| acts[t].get(b));
        let (d, _) = f16_pair(w.d, [0, 0]);
        // SAFETY: 16 i8 are 16 bytes; unaligned load.
        let scales = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(w.scales.as_ptr().cast()) });
        // The −32 offset of every level, as 32·Σ sc·(run sum), taken off the integer sums.
        let mut block: [__m256i; N] = std::array::from_fn(|t| match blocks[t] {
            Some(a) => _mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_slli_epi32(_mm256_madd_epi16(scales, run_sums(a)), 5),
            ),
            None => _mm256_setzero_si256(),
        });
        for (h, (ql, qh)) in w.ql.iter().zip(&w.qh).enumerate() {
            let (Ok(first), Ok(second)) = (
                <&[u8; 32]>::try_from(&ql[..32]),
                <&[u8; 32]>::try_from(&ql[32..]),
            ) else {
                continue;
            };
            let (first, second, qh) = (load(first), load(second), load(qh));
            let top = |bits: __m256i| _mm256_slli_epi16(_mm256_and_si256(bits, two_bits), 4);
            let levels = [
                _mm256_or_si256(_mm256_and_si256(first, low_nibbles), top(qh)),
                _mm256_or_si256(
                    _mm256_and_si256(second, low_nibbles),
                    top(_mm256_srli_epi16(qh, 2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(first, 4), low_nibbles),
                    top(_mm256_srli_epi16(qh, 4)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(second, 4), low_nibbles),
                    top(_mm256_srli_epi16(qh, 6)),
                ),
            ];
            // The scales of runs 16h .. 16h + 8 sit in the low half of `scales` for h = 0 and
            // the high half for h = 1; put that half in both lanes.
            let half_scales = if h == 0 {
                _mm256_permute2x128_si256(scales, scales, 0x00)
            } else {
                _mm256_permute2x128_si256(scales, scales, 0x11)
            };
            for (quarter, levels) in levels.into_iter().enumerate() {
                // Each 128-bit half of the products covers one run of 16: runs 2q and 2q + 1.
                let pair = _mm256_shuffle_epi8(half_scales, word_broadcast(2 * quarter));
                let next = _mm256_shuffle_epi8(half_scales, word_broadcast(2 * quarter + 1));
                let scale = _mm256_blend_epi32(pair, next, 0xf0);
                for (block, a) in block.iter_mut().zip(blocks) {
                    if let Some(a) = a {
                        let products =
                            _mm256_maddubs_epi16(levels, activations(a, h * 4 + quarter));
                        *block = _mm256_add_epi32(*block, _mm256_madd_epi16(products, scale));
                    }
                }
            }
        }
        for (t, a) in blocks.into_iter().enumerate() {
            let Some(a) = a else { continue };
            sums[t] = _mm256_fmadd_ps(
                _mm256_set1_ps(a.d * d),
                _mm256_cvtepi32_ps(block[t]),
                sums[t],
            );
        }
    }
    std::array::from_fn(|t| horizontal_sum(sums[t]))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q8_0<const N: usize>(
    weights: &[BlockQ8_0],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    let ones = _mm256_set1_epi16(1);
    let mut sums = [_mm256_setzero_ps(); N];
    for (b, ws) in weights.chunks_exact(Q8_0_PER_ACTIVATION).enumerate() {
        let blocks: [Option<&ActivationBlock>; N] = std::array::from_fn(|t| acts[t].get(b));
        for (i, w) in ws.iter().enumerate() {
            let q = load(&w.qs);
            let (d, _) = f16_pair(w.d, [0, 0]);
            // maddubs wants one unsigned operand: |w| against activations carrying w's sign.
            let magnitudes = _mm256_sign_epi8(q, q);
            for (sum, a) in sums.iter_mut().zip(blocks) {
                if let Some(a) = a {
                    let signed = _mm256_sign_epi8(activations(a, i), q);
                    let products =
                        _mm256_madd_epi16(_mm256_maddubs_epi16(magnitudes, signed), ones);
                    *sum = _mm256_fmadd_ps(
                        _mm256_set1_ps(a.d * d),
                        _mm256_cvtepi32_ps(products),
                        *sum,
                    );
                }
            }
        }
    }
    std::array::from_fn(|t| horizontal_sum(sums[t]))
}
