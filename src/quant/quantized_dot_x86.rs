//! x86-64 versions of the kernels in `quantized_dot`: the same integer sums, at two vector
//! widths chosen at run time (AVX-512 with VNNI where the CPU has it, else AVX2).
//!
//! Weight bytes are widened to i16 already multiplied by their run scale: `maddubs` against
//! the scale in every even byte gives the even elements, against it in every odd byte the odd
//! ones, which is the order the activations are stored in. Then a pairwise multiply-add with
//! the 14-bit activations sums into i32 lanes (`vpdpwssd` with VNNI: 32 products in one
//! instruction), and each super-block costs one f32 multiply-add per token.
//!
//! Each kernel takes `N` tokens: a block's levels and scales are unpacked once and used for
//! all of them, which is what makes prefill cheaper per token than decode.

use std::arch::x86_64::*;

use super::activations::ActivationBlock;
use super::activations::Q8_0_PER_ACTIVATION;
use super::q4_k::{unpack_scale_mins, BlockQ4K};
use super::q6_k::BlockQ6K;
use super::q8_0::BlockQ8_0;
use super::GgmlType;

/// The instruction sets the kernels are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    Avx2,
    Avx512Vnni,
}

impl Isa {
    /// The best set this CPU runs, if any; detected once.
    pub(super) fn detect() -> Option<Isa> {
        static DETECTED: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            Isa::Avx512Vnni
                .supported()
                .then_some(Isa::Avx512Vnni)
                .or(Isa::Avx2.supported().then_some(Isa::Avx2))
        })
    }

    /// Whether this CPU has every feature the set's kernels are compiled for.
    pub(super) fn supported(self) -> bool {
        let avx2 = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c");
        match self {
            Isa::Avx2 => avx2,
            Isa::Avx512Vnni => {
                avx2 && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vnni")
            }
        }
    }
}

/// The quantized matmul on AVX2 kernels, four tokens at a time.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn matmul_avx2(
    ty: GgmlType,
    bytes: &[u8],
    row_bytes: usize,
    xs: &[&[ActivationBlock]],
    out: &mut [f32],
) {
    // SAFETY: compiled for AVX2, FMA and F16C, what `Avx2` uses. Four tokens: their i32 and
    // f32 accumulators fill half of the sixteen vector registers.
    unsafe { run::<Avx2, 4>(ty, bytes, row_bytes, xs, out) }
}

/// The quantized matmul on AVX-512 VNNI kernels, eight tokens at a time.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
pub(super) fn matmul_avx512(
    ty: GgmlType,
    bytes: &[u8],
    row_bytes: usize,
    xs: &[&[ActivationBlock]],
    out: &mut [f32],
) {
    // SAFETY: compiled for what `Avx512` uses. Eight tokens: sixteen of the 32 registers.
    unsafe { run::<Avx512, 8>(ty, bytes, row_bytes, xs, out) }
}

/// Runs the format's kernel over every row and the tokens `N` at a time (all rows against one
/// group, then the next group, so a group's activations stay in cache); decode's single token
/// gets a kernel sized for it, and a short last group repeats its first token in the empty
/// slots.
///
/// # Safety
/// Only to be called from a function compiled for `W`'s features.
#[inline(always)]
unsafe fn run<W: Width, const N: usize>(
    ty: GgmlType,
    bytes: &[u8],
    row_bytes: usize,
    xs: &[&[ActivationBlock]],
    out: &mut [f32],
) {
    #[inline(always)]
    fn rows<B: bytemuck::Pod, const N: usize>(
        bytes: &[u8],
        row_bytes: usize,
        xs: &[&[ActivationBlock]],
        out: &mut [f32],
        kernel: impl Fn(&[B], [&[ActivationBlock]; 1]) -> [f32; 1],
        kernel_n: impl Fn(&[B], [&[ActivationBlock]; N]) -> [f32; N],
    ) {
        let n = xs.len();
        let weights =
            |r: usize| bytemuck::cast_slice::<u8, B>(&bytes[r * row_bytes..][..row_bytes]);
        let rows = bytes.len() / row_bytes;
        if let [x] = xs {
            for (r, y) in out.iter_mut().enumerate().take(rows) {
                [*y] = kernel(weights(r), [x]);
            }
            return;
        }
        for (g, group) in xs.chunks(N).enumerate() {
            let acts = std::array::from_fn(|t| *group.get(t).unwrap_or(&group[0]));
            for r in 0..rows {
                let values = kernel_n(weights(r), acts);
                for (y, value) in out[r * n + g * N..][..group.len()].iter_mut().zip(values) {
                    *y = value;
                }
            }
        }
    }
    match ty {
        GgmlType::Q4_K => rows::<BlockQ4K, N>(
            bytes,
            row_bytes,
            xs,
            out,
            |w, a| q4_k::<W, 1>(w, a),
            |w, a| q4_k::<W, N>(w, a),
        ),
        GgmlType::Q6_K => rows::<BlockQ6K, N>(
            bytes,
            row_bytes,
            xs,
            out,
            |w, a| q6_k::<W, 1>(w, a),
            |w, a| q6_k::<W, N>(w, a),
        ),
        GgmlType::Q8_0 => rows::<BlockQ8_0, N>(
            bytes,
            row_bytes,
            xs,
            out,
            |w, a| q8_0::<W, 1>(w, a),
            |w, a| q8_0::<W, N>(w, a),
        ),
        _ => debug_assert!(false, "{} has no quantized dot", ty.name()),
    }
}

/// What the kernels need from a vector width. The methods are inlined into kernels compiled
/// for the width's features; that is what makes their intrinsic calls sound.
pub(super) trait Width {
    /// 32 weights as i16, in the order of a chunk of activations (evens, then odds).
    type Chunk: Copy;
    /// i32 lanes that sum products.
    type Ints: Copy;
    /// f32 lanes that sum scaled blocks.
    type Floats: Copy;

    fn zero_chunk() -> Self::Chunk;
    fn zero_ints() -> Self::Ints;
    fn zero_floats() -> Self::Floats;
    fn add_ints(a: Self::Ints, b: Self::Ints) -> Self::Ints;
    /// 32 unsigned `levels` times bytes of `factors`, picked by the `shuffle_epi8` indices
    /// `index` (see [`chunk_index`]).
    fn scaled(levels: __m256i, factors: __m128i, index: &[[u8; 32]; 2]) -> Self::Chunk;
    /// 32 signed bytes, widened.
    fn widened(q: __m256i) -> Self::Chunk;
    /// `acc` plus the pairwise sums of `w` times one chunk of activations.
    fn dot(acc: Self::Ints, w: Self::Chunk, a: &[[i16; 16]; 2]) -> Self::Ints;
    /// `acc + scale·ints`.
    fn add_scaled(acc: Self::Floats, scale: f32, ints: Self::Ints) -> Self::Floats;
    /// `acc + scale·x`.
    fn add_scaled_floats(acc: Self::Floats, scale: f32, x: Self::Floats) -> Self::Floats;
    /// `acc − factors·sums`, lane by lane over eight values.
    fn sub_products(acc: Self::Floats, factors: __m256, sums: &[f32; 8]) -> Self::Floats;
    fn total(acc: Self::Floats) -> f32;

    /// A whole super-block of weights times a block of activations, in two chains of
    /// multiply-adds so that one token does not wait on the latency of a single chain.
    #[inline(always)]
    fn dot_block(w: &[Self::Chunk; 8], a: &[[[i16; 16]; 2]; 8]) -> Self::Ints {
        let (mut even, mut odd) = (Self::zero_ints(), Self::zero_ints());
        for c in (0..8).step_by(2) {
            even = Self::dot(even, w[c], &a[c]);
            odd = Self::dot(odd, w[c + 1], &a[c + 1]);
        }
        Self::add_ints(even, odd)
    }
}

/// `shuffle_epi8` indices that scale one chunk of 32 levels: the first 32 put byte `low` of
/// the factors in every even byte of the low 128-bit half and byte `high` in every even byte
/// of the high half, zeros (0x80) in the odd bytes; the second 32 the same in the odd bytes.
/// `maddubs` of the levels with the first gives the even elements times their factor, with
/// the second the odd ones.
const fn chunk_index(low: u8, high: u8) -> [[u8; 32]; 2] {
    let mut index = [[0x80u8; 32]; 2];
    let mut i = 0;
    while i < 8 {
        index[0][2 * i] = low;
        index[0][16 + 2 * i] = high;
        index[1][2 * i + 1] = low;
        index[1][16 + 2 * i + 1] = high;
        i += 1;
    }
    index
}

/// Q4_K: chunk `r` is run `r`, one scale for all of it.
const Q4_K_INDEX: [[[u8; 32]; 2]; 8] = {
    let mut table = [[[0u8; 32]; 2]; 8];
    let mut run = 0;
    while run < 8 {
        table[run] = chunk_index(run as u8, run as u8);
        run += 1;
    }
    table
};

/// Q6_K: chunk `c` is runs `2c` (its low 16 bytes) and `2c + 1` (its high 16 bytes).
const Q6_K_INDEX: [[[u8; 32]; 2]; 8] = {
    let mut table = [[[0u8; 32]; 2]; 8];
    let mut chunk = 0;
    while chunk < 8 {
        table[chunk] = chunk_index(2 * chunk as u8, 2 * chunk as u8 + 1);
        chunk += 1;
    }
    table
};

/// 1 in every even byte, then 1 in every odd byte: `maddubs` of these with signed bytes
/// widens the even ones, then the odd ones.
const ONES: [[u8; 32]; 2] = {
    let mut ones = [[0u8; 32]; 2];
    let mut i = 0;
    while i < 16 {
        ones[0][2 * i] = 1;
        ones[1][2 * i + 1] = 1;
        i += 1;
    }
    ones
};

#[inline(always)]
fn load<T>(bytes: &[T; 32]) -> __m256i {
    // SAFETY: 32 one-byte elements; the unaligned load has no alignment requirement.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
}

struct Avx2;

impl Width for Avx2 {
    type Chunk = [__m256i; 2];
    type Ints = __m256i;
    type Floats = __m256;

    #[inline(always)]
    fn zero_chunk() -> [__m256i; 2] {
        // SAFETY (every method here): only inlined into code compiled for AVX2, FMA and F16C.
        unsafe { [_mm256_setzero_si256(); 2] }
    }

    #[inline(always)]
    fn zero_ints() -> __m256i {
        unsafe { _mm256_setzero_si256() }
    }

    #[inline(always)]
    fn zero_floats() -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }

    #[inline(always)]
    fn add_ints(a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_add_epi32(a, b) }
    }

    #[inline(always)]
    fn scaled(levels: __m256i, factors: __m128i, index: &[[u8; 32]; 2]) -> [__m256i; 2] {
        let factors = unsafe { _mm256_broadcastsi128_si256(factors) };
        let [even, odd] = index;
        unsafe {
            [
                _mm256_maddubs_epi16(levels, _mm256_shuffle_epi8(factors, load(even))),
                _mm256_maddubs_epi16(levels, _mm256_shuffle_epi8(factors, load(odd))),
            ]
        }
    }

    #[inline(always)]
    fn widened(q: __m256i) -> [__m256i; 2] {
        let [even, odd] = &ONES;
        unsafe {
            [
                _mm256_maddubs_epi16(load(even), q),
                _mm256_maddubs_epi16(load(odd), q),
            ]
        }
    }

    #[inline(always)]
    fn dot(acc: __m256i, w: [__m256i; 2], a: &[[i16; 16]; 2]) -> __m256i {
        unsafe {
            let even = _mm256_loadu_si256(a[0].as_ptr().cast());
            let odd = _mm256_loadu_si256(a[1].as_ptr().cast());
            _mm256_add_epi32(
                _mm256_add_epi32(acc, _mm256_madd_epi16(w[0], even)),
                _mm256_madd_epi16(w[1], odd),
            )
        }
    }

    #[inline(always)]
    fn add_scaled(acc: __m256, scale: f32, ints: __m256i) -> __m256 {
        unsafe { _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(ints), acc) }
    }

    #[inline(always)]
    fn add_scaled_floats(acc: __m256, scale: f32, x: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(_mm256_set1_ps(scale), x, acc) }
    }

    #[inline(always)]
    fn sub_products(acc: __m256, factors: __m256, sums: &[f32; 8]) -> __m256 {
        unsafe { _mm256_fnmadd_ps(factors, _mm256_loadu_ps(sums.as_ptr()), acc) }
    }

    #[inline(always)]
    fn total(acc: __m256) -> f32 {
        unsafe {
            let v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
            let pairs = _mm_add_ps(v, _mm_movehl_ps(v, v));
            _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)))
        }
    }
}

pub(super) struct Avx512;

impl Avx512 {
    /// The same 32 bytes in both 256-bit halves.
    #[inline(always)]
    fn twice(v: __m256i) -> __m512i {
        // SAFETY (every method here): only inlined into code compiled for AVX-512 F, BW and
        // VNNI, AVX2, FMA and F16C.
        unsafe { _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1) }
    }

    #[inline(always)]
    fn load(bytes: &[[u8; 32]; 2]) -> __m512i {
        // SAFETY: 64 bytes; unaligned load.
        unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
    }
}

impl Width for Avx512 {
    type Chunk = __m512i;
    type Ints = __m512i;
    type Floats = __m512;

    #[inline(always)]
    fn zero_chunk() -> __m512i {
        unsafe { _mm512_setzero_si512() }
    }

    #[inline(always)]
    fn zero_ints() -> __m512i {
        unsafe { _mm512_setzero_si512() }
    }

    #[inline(always)]
    fn zero_floats() -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    fn add_ints(a: __m512i, b: __m512i) -> __m512i {
        unsafe { _mm512_add_epi32(a, b) }
    }

    #[inline(always)]
    fn scaled(levels: __m256i, factors: __m128i, index: &[[u8; 32]; 2]) -> __m512i {
        // The levels twice, against the even-byte factors in the low half and the odd-byte
        // ones in the high half: one `maddubs` makes the whole chunk.
        unsafe {
            _mm512_maddubs_epi16(
                Avx512::twice(levels),
                _mm512_shuffle_epi8(_mm512_broadcast_i32x4(factors), Avx512::load(index)),
            )
        }
    }

    #[inline(always)]
    fn widened(q: __m256i) -> __m512i {
        unsafe { _mm512_maddubs_epi16(Avx512::load(&ONES), Avx512::twice(q)) }
    }

    #[inline(always)]
    fn dot(acc: __m512i, w: __m512i, a: &[[i16; 16]; 2]) -> __m512i {
        unsafe { dpwssd(acc, w, a) }
    }

    #[inline(always)]
    fn add_scaled(acc: __m512, scale: f32, ints: __m512i) -> __m512 {
        unsafe { _mm512_fmadd_ps(_mm512_set1_ps(scale), _mm512_cvtepi32_ps(ints), acc) }
    }

    #[inline(always)]
    fn add_scaled_floats(acc: __m512, scale: f32, x: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(_mm512_set1_ps(scale), x, acc) }
    }

    #[inline(always)]
    fn sub_products(acc: __m512, factors: __m256, sums: &[f32; 8]) -> __m512 {
        // Zero-extended, so the upper eight lanes add nothing.
        unsafe {
            _mm512_fnmadd_ps(
                _mm512_zextps256_ps512(factors),
                _mm512_zextps256_ps512(_mm256_loadu_ps(sums.as_ptr())),
                acc,
            )
        }
    }

    #[inline(always)]
    fn total(acc: __m512) -> f32 {
        unsafe { _mm512_reduce_add_ps(acc) }
    }
}

/// `vpdpwssd` with the activations read from memory. Written as assembly because LLVM, tuning
/// for a generic x86-64, splits the intrinsic back into `vpmaddwd` and `vpaddd`, which doubles
/// the instructions of the inner loop.
#[target_feature(enable = "avx512f,avx512vnni")]
#[inline]
fn dpwssd(acc: __m512i, w: __m512i, a: &[[i16; 16]; 2]) -> __m512i {
    let mut acc = acc;
    // SAFETY: reads the 64 bytes of `a`, a valid reference; the features are enabled.
    unsafe {
        std::arch::asm!(
            "vpdpwssd {acc}, {w}, zmmword ptr [{a}]",
            acc = inout(zmm_reg) acc,
            w = in(zmm_reg) w,
            a = in(reg) a.as_ptr(),
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    acc
}

/// `vpdpwssd` on registers; assembly for the reason [`dpwssd`] gives.
#[target_feature(enable = "avx512f,avx512vnni")]
#[inline]
pub(super) fn dpwssd_registers(acc: __m512i, w: __m512i, a: __m512i) -> __m512i {
    let mut acc = acc;
    // SAFETY: registers only; the features are enabled.
    unsafe {
        std::arch::asm!(
            "vpdpwssd {acc}, {w}, {a}",
            acc = inout(zmm_reg) acc,
            w = in(zmm_reg) w,
            a = in(zmm_reg) a,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    acc
}

/// Two f16 values (little-endian, back to back) widened at once.
#[inline(always)]
fn f16_pair(first: [u8; 2], second: [u8; 2]) -> (f32, f32) {
    let [a, b] = first;
    let [c, d] = second;
    // SAFETY: F16C and SSE, which every width has.
    unsafe {
        let wide = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from_le_bytes([a, b, c, d])));
        (
            _mm_cvtss_f32(wide),
            _mm_cvtss_f32(_mm_shuffle_ps(wide, wide, 1)),
        )
    }
}

/// Each token's blocks, cut to the row's length so the compiler sees every index in bounds.
#[inline(always)]
fn per_block<const N: usize>(acts: [&[ActivationBlock]; N], len: usize) -> [&[ActivationBlock]; N] {
    let mut cut = acts;
    for (cut, a) in cut.iter_mut().zip(acts) {
        *cut = &a[..len];
    }
    cut
}

/// A Q4_K super-block as eight scaled chunks, its step `d`, and `dmin·m` for each run of 32
/// (what the run's activation sum is multiplied by and taken off).
///
/// # Safety
/// Only to be called from a function compiled for `W`'s features.
#[inline(always)]
pub(super) unsafe fn q4_k_block<W: Width>(w: &BlockQ4K) -> ([W::Chunk; 8], f32, __m256) {
    let low_nibbles = _mm256_set1_epi8(0x0f);
    let (d, dmin) = f16_pair(w.d, w.dmin);
    let (scales, mins) = unpack_scale_mins(&w.scales);
    let factors = _mm_cvtsi64_si128(i64::from_le_bytes(scales));
    let mins = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(
        mins,
    ))));
    // Group j holds run 2j in its low nibbles and run 2j + 1 in its high ones.
    let mut chunks = [W::zero_chunk(); 8];
    for (j, (group, pair)) in w.qs.iter().zip(chunks.chunks_exact_mut(2)).enumerate() {
        let packed = load(group);
        let low = _mm256_and_si256(packed, low_nibbles);
        let high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
        pair[0] = W::scaled(low, factors, &Q4_K_INDEX[2 * j]);
        pair[1] = W::scaled(high, factors, &Q4_K_INDEX[2 * j + 1]);
    }
    (chunks, d, _mm256_mul_ps(mins, _mm256_set1_ps(dmin)))
}

/// Every super-block's levels and scales are unpacked into eight chunks of i16 once, then met
/// by each token's activations.
///
/// # Safety
/// Only to be called from a function compiled for `W`'s features.
#[inline(always)]
unsafe fn q4_k<W: Width, const N: usize>(
    weights: &[BlockQ4K],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    let acts = per_block(acts, weights.len());
    let mut sums = [W::zero_floats(); N];
    for (b, w) in weights.iter().enumerate() {
        let (chunks, d, min_factors) = q4_k_block::<W>(w);
        for (sum, a) in sums.iter_mut().zip(acts) {
            let a = &a[b];
            *sum = W::add_scaled(*sum, a.d * d, W::dot_block(&chunks, &a.qs));
            *sum = W::sub_products(*sum, min_factors, &a.sums32);
        }
    }
    let mut totals = [0f32; N];
    for (total, &sum) in totals.iter_mut().zip(&sums) {
        *total = W::total(sum);
    }
    totals
}

/// The 6-bit levels of one half of a Q6_K block, as its four chunks of 32.
#[inline(always)]
fn q6_k_levels(ql: &[u8; 64], qh: &[u8; 32]) -> [__m256i; 4] {
    let (first, second) = ql.split_at(32);
    let (Ok(first), Ok(second)) = (<&[u8; 32]>::try_from(first), <&[u8; 32]>::try_from(second))
    else {
        unreachable!("64 bytes split at 32");
    };
    // SAFETY: AVX2, which every width has.
    unsafe {
        let (first, second, qh) = (load(first), load(second), load(qh));
        let low_nibbles = _mm256_set1_epi8(0x0f);
        let two_bits = _mm256_set1_epi8(3);
        let top = |bits: __m256i| _mm256_slli_epi16(_mm256_and_si256(bits, two_bits), 4);
        [
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
        ]
    }
}

/// A Q6_K super-block as eight scaled chunks, its step `d`, and `32·d·sc` for each run of 16
/// (what the run's activation sum is multiplied by and taken off: the −32 of every level).
///
/// # Safety
/// Only to be called from a function compiled for `W`'s features.
#[inline(always)]
pub(super) unsafe fn q6_k_block<W: Width>(w: &BlockQ6K) -> ([W::Chunk; 8], f32, [__m256; 2]) {
    let (d, _) = f16_pair(w.d, [0, 0]);
    let factors = _mm_loadu_si128(w.scales.as_ptr().cast());
    let offset_factor = _mm256_set1_ps(32.0 * d);
    let offsets = [
        _mm256_mul_ps(
            offset_factor,
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(factors)),
        ),
        _mm256_mul_ps(
            offset_factor,
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(factors, 8))),
        ),
    ];
    let mut chunks = [W::zero_chunk(); 8];
    for (h, quarters) in chunks.chunks_exact_mut(4).enumerate() {
        let levels = q6_k_levels(&w.ql[h], &w.qh[h]);
        for (quarter, chunk) in quarters.iter_mut().enumerate() {
            *chunk = W::scaled(levels[quarter], factors, &Q6_K_INDEX[4 * h + quarter]);
        }
    }
    (chunks, d, offsets)
}

/// # Safety
/// Only to be called from a function compiled for `W`'s features.
#[inline(always)]
unsafe fn q6_k<W: Width, const N: usize>(
    weights: &[BlockQ6K],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    let acts = per_block(acts, weights.len());
    let mut sums = [W::zero_floats(); N];
    for (b, w) in weights.iter().enumerate() {
        let (chunks, d, offsets) = q6_k_block::<W>(w);
        for (sum, a) in sums.iter_mut().zip(acts) {
            let a = &a[b];
            let [low_runs, high_runs] = &a.sums16;
            *sum = W::add_scaled(*sum, a.d * d, W::dot_block(&chunks, &a.qs));
            *sum = W::sub_products(*sum, offsets[0], low_runs);
            *sum = W::sub_products(*sum, offsets[1], high_runs);
        }
    }
    let mut totals = [0f32; N];
    for (total, &sum) in totals.iter_mut().zip(&sums) {
        *total = W::total(sum);
    }
    totals
}

/// # Safety
/// Only to be called from a function compiled for `W`'s features.
#[inline(always)]
unsafe fn q8_0<W: Width, const N: usize>(
    weights: &[BlockQ8_0],
    acts: [&[ActivationBlock]; N],
) -> [f32; N] {
    let (weights, _) = weights.as_chunks::<Q8_0_PER_ACTIVATION>();
    let acts = per_block(acts, weights.len());
    let mut sums = [W::zero_floats(); N];
    for (b, ws) in weights.iter().enumerate() {
        let mut chunks = [W::zero_chunk(); 8];
        let mut scales = [0f32; 8];
        for ((chunk, scale), w) in chunks.iter_mut().zip(&mut scales).zip(ws) {
            *chunk = W::widened(load(&w.qs));
            *scale = f16_pair(w.d, [0, 0]).0;
        }
        for (sum, a) in sums.iter_mut().zip(acts) {
            let a = &a[b];
            // Every Q8_0 block has its own scale: one f32 step per chunk.
            let mut block = W::zero_floats();
            for ((&chunk, &scale), a) in chunks.iter().zip(&scales).zip(&a.qs) {
                block = W::add_scaled(block, scale, W::dot(W::zero_ints(), chunk, a));
            }
            *sum = W::add_scaled_floats(*sum, a.d, block);
        }
    }
    let mut totals = [0f32; N];
    for (total, &sum) in totals.iter_mut().zip(&sums) {
        *total = W::total(sum);
    }
    totals
}
