//! AVX2 versions of the kernels in `quantized_dot`: the same integer sums. Weight bytes are
//! widened to i16 already multiplied by their run scale (`maddubs` against the scale in every
//! even byte gives the even elements, in every odd byte the odd ones: the order in which the
//! activations are stored), then `madd` multiplies them with the 14-bit activations and sums
//! pairs into i32 lanes; one f32 multiply-add per super-block and token.
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

/// The even-indexed and the odd-indexed activations of chunk `c` of a block.
#[inline(always)]
fn chunk(a: &ActivationBlock, c: usize) -> [__m256i; 2] {
    // SAFETY: 16 i16 are 32 bytes; unaligned loads.
    a.qs[c].map(|half| unsafe { _mm256_loadu_si256(half.as_ptr().cast()) })
}

/// Eight f32 values from a block's scaled run sums.
#[inline(always)]
fn eight(sums: &[f32; 8]) -> __m256 {
    // SAFETY: 8 f32 are 32 bytes; unaligned load.
    unsafe { _mm256_loadu_ps(sums.as_ptr()) }
}

/// `shuffle_epi8` indices that put source byte `low` in every even byte of the low 128-bit half
/// and source byte `high` in every even byte of the high half, with zeros in the odd bytes; with
/// `odd`, in the odd bytes, with zeros in the even ones. The source must hold the same 16 bytes
/// in both halves.
#[inline(always)]
fn factor_index(low: u8, high: u8, odd: bool) -> __m256i {
    const ZERO: i16 = 0x80;
    let word = |byte: u8| {
        let byte = i16::from(byte);
        if odd {
            (byte << 8) | ZERO
        } else {
            (ZERO << 8) | byte
        }
    };
    unsafe { _mm256_setr_m128i(_mm_set1_epi16(word(low)), _mm_set1_epi16(word(high))) }
}

/// `acc + a·b` summed in pairs, in the form compilers turn into one `vpdpwssd` where VNNI is
/// enabled.
#[inline(always)]
fn multiply_add(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)) }
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

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_k<const N: usize>(
    weights: &[BlockQ4K],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    let low_nibbles = _mm256_set1_epi8(0x0f);
    let mut sums = [_mm256_setzero_ps(); N];
    for (b, w) in weights.iter().enumerate() {
        let blocks: [Option<&ActivationBlock>; N] = std::array::from_fn(|t| acts[t].get(b));
        let (d, dmin) = f16_pair(w.d, w.dmin);
        let (scales, mins) = unpack_scale_mins(&w.scales);
        let scales = _mm256_broadcastsi128_si256(_mm_cvtsi64_si128(i64::from_le_bytes(scales)));
        let mins = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(
            mins,
        ))));
        let min_factors = _mm256_mul_ps(mins, _mm256_set1_ps(dmin));
        let mut block = [_mm256_setzero_si256(); N];
        for (j, group) in w.qs.iter().enumerate() {
            let packed = load(group);
            let halves = [
                _mm256_and_si256(packed, low_nibbles),
                _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles),
            ];
            for (half, levels) in halves.into_iter().enumerate() {
                // Run 2j + half is chunk 2j + half of the activations; one scale for all of it.
                let run = 2 * j + half;
                let index = run as u8;
                let even = _mm256_shuffle_epi8(scales, factor_index(index, index, false));
                let odd = _mm256_shuffle_epi8(scales, factor_index(index, index, true));
                let even = _mm256_maddubs_epi16(levels, even);
                let odd = _mm256_maddubs_epi16(levels, odd);
                for (block, a) in block.iter_mut().zip(blocks) {
                    if let Some(a) = a {
                        let [a_even, a_odd] = chunk(a, run);
                        *block = multiply_add(multiply_add(*block, even, a_even), odd, a_odd);
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
            sums[t] = _mm256_fnmadd_ps(min_factors, eight(&a.sums32), sums[t]);
        }
    }
    std::array::from_fn(|t| horizontal_sum(sums[t]))
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
        let scale_bytes = unsafe { _mm_loadu_si128(w.scales.as_ptr().cast()) };
        let scales = _mm256_broadcastsi128_si256(scale_bytes);
        // The −32 offset of every level, as 32·d·sc times the run sums.
        let offset_factor = _mm256_set1_ps(32.0 * d);
        let offsets = [scale_bytes, _mm_srli_si128(scale_bytes, 8)].map(|eight| {
            _mm256_mul_ps(
                offset_factor,
                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight)),
            )
        });
        let mut block = [_mm256_setzero_si256(); N];
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
            for (quarter, levels) in levels.into_iter().enumerate() {
                // Quarter q of half h is chunk 4h + q: runs 8h + 2q (its low 16 bytes) and
                // 8h + 2q + 1 (its high 16 bytes).
                let c = 4 * h + quarter;
                let (low, high) = ((2 * c) as u8, (2 * c + 1) as u8);
                let even = _mm256_shuffle_epi8(scales, factor_index(low, high, false));
                let odd = _mm256_shuffle_epi8(scales, factor_index(low, high, true));
                let even = _mm256_maddubs_epi16(levels, even);
                let odd = _mm256_maddubs_epi16(levels, odd);
                for (block, a) in block.iter_mut().zip(blocks) {
                    if let Some(a) = a {
                        let [a_even, a_odd] = chunk(a, c);
                        *block = multiply_add(multiply_add(*block, even, a_even), odd, a_odd);
                    }
                }
            }
        }
        for (t, a) in blocks.into_iter().enumerate() {
            let Some(a) = a else { continue };
            let [low_runs, high_runs] = [&a.sums16[..8], &a.sums16[8..]]
                .map(|s| <&[f32; 8]>::try_from(s).map_or(_mm256_setzero_ps(), eight));
            sums[t] = _mm256_fmadd_ps(
                _mm256_set1_ps(a.d * d),
                _mm256_cvtepi32_ps(block[t]),
                sums[t],
            );
            sums[t] = _mm256_fnmadd_ps(offsets[0], low_runs, sums[t]);
            sums[t] = _mm256_fnmadd_ps(offsets[1], high_runs, sums[t]);
        }
    }
    std::array::from_fn(|t| horizontal_sum(sums[t]))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q8_0<const N: usize>(
    weights: &[BlockQ8_0],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    // maddubs with 1 in every even (odd) byte sign-extends the even (odd) weights to i16.
    let even_ones = _mm256_set1_epi16(1);
    let odd_ones = _mm256_set1_epi16(1 << 8);
    let mut sums = [_mm256_setzero_ps(); N];
    for (b, ws) in weights.chunks_exact(Q8_0_PER_ACTIVATION).enumerate() {
        let blocks: [Option<&ActivationBlock>; N] = std::array::from_fn(|t| acts[t].get(b));
        let mut block_sums = [_mm256_setzero_ps(); N];
        for (c, w) in ws.iter().enumerate() {
            let q = load(&w.qs);
            let (d, _) = f16_pair(w.d, [0, 0]);
            let d = _mm256_set1_ps(d);
            let even = _mm256_maddubs_epi16(even_ones, q);
            let odd = _mm256_maddubs_epi16(odd_ones, q);
            for (sum, a) in block_sums.iter_mut().zip(blocks) {
                if let Some(a) = a {
                    let [a_even, a_odd] = chunk(a, c);
                    let products = multiply_add(_mm256_madd_epi16(even, a_even), odd, a_odd);
                    *sum = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(products), *sum);
                }
            }
        }
        for (t, a) in blocks.into_iter().enumerate() {
            let Some(a) = a else { continue };
            sums[t] = _mm256_fmadd_ps(_mm256_set1_ps(a.d), block_sums[t], sums[t]);
        }
    }
    std::array::from_fn(|t| horizontal_sum(sums[t]))
}
