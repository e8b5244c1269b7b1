//! Prefill on AVX-512 with VNNI: a slice of Q4_K or Q6_K weight rows is decoded once into the
//! scaled i16 chunks that the per-row kernels build on the fly, then met by every token in tiles
//! of [`ROWS`] rows × [`TOKENS`] tokens whose sums all stay in registers. Each weight chunk
//! loaded serves `TOKENS` tokens and each activation chunk `ROWS` rows: the per-row kernels
//! load one activation chunk per multiply-add, and loads, not multiply-adds, bound them.

use std::arch::x86_64::*;
use std::cell::Cell;

use super::activations::ActivationBlock;
use super::q4_k::BlockQ4K;
use super::q6_k::BlockQ6K;
use super::quantized_dot_x86::{dpwssd_registers, q4_k_block, q6_k_block, Avx512};
use super::GgmlType;

/// Weight rows per tile.
const ROWS: usize = 2;
/// Tokens per tile: with two rows, eight i32 and eight f32 accumulators, two weight chunks and
/// four activation chunks fill 22 of the 32 registers.
pub(super) const TOKENS: usize = 4;

/// One super-block of one row, decoded: the integer sums against it are multiplied by `d` (and
/// the activation step), and activation run sums by `corrections` are taken off.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct DecodedBlock {
    /// Chunks of 32 weights as i16 times their run scale, in the activations' order.
    chunks: [[[i16; 16]; 2]; 8],
    /// One factor per run of 16 activations.
    corrections: [f32; 16],
    d: f32,
}

thread_local! {
    /// Each worker's decoded rows, kept between calls so the buffer is allocated once.
    static DECODED: Cell<Vec<DecodedBlock>> = const { Cell::new(Vec::new()) };
}

/// Whether [`matmul`] handles `ty`.
pub(super) fn handles(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K)
}

/// The slice of a matmul `matmul_quantized` describes, for a format [`handles`] takes. The
/// caller has checked the sizes (as for the per-row kernels) and that the CPU runs AVX-512 F,
/// BW and VNNI.
pub(super) fn matmul(
    ty: GgmlType,
    bytes: &[u8],
    row_bytes: usize,
    xs: &[&[ActivationBlock]],
    out: &mut [f32],
) {
    let mut decoded = DECODED.take();
    // SAFETY: the caller made sure the CPU has the features.
    unsafe { matmul_avx512(ty, bytes, row_bytes, xs, out, &mut decoded) };
    DECODED.set(decoded);
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
fn matmul_avx512(
    ty: GgmlType,
    bytes: &[u8],
    row_bytes: usize,
    xs: &[&[ActivationBlock]],
    out: &mut [f32],
    decoded: &mut Vec<DecodedBlock>,
) {
    let rows = bytes.len() / row_bytes;
    decoded.clear();
    // SAFETY (the decoders): compiled for the features `Avx512` uses.
    match ty {
        GgmlType::Q4_K => {
            for w in bytemuck::cast_slice::<u8, BlockQ4K>(bytes) {
                let (chunks, d, min_factors) = unsafe { q4_k_block::<Avx512>(w) };
                let mut runs = [0f32; 8];
                // SAFETY: 8 f32 are 32 bytes; unaligned store.
                unsafe { _mm256_storeu_ps(runs.as_mut_ptr(), min_factors) };
                // A Q4_K run is 32 values: both of its runs of 16 take its factor.
                let mut corrections = [0f32; 16];
                for (pair, &factor) in corrections.chunks_exact_mut(2).zip(&runs) {
                    pair.fill(factor);
                }
                decoded.push(decoded_block(chunks, d, corrections));
            }
        }
        GgmlType::Q6_K => {
            for w in bytemuck::cast_slice::<u8, BlockQ6K>(bytes) {
                let (chunks, d, offsets) = unsafe { q6_k_block::<Avx512>(w) };
                let mut corrections = [0f32; 16];
                for (eight, offset) in corrections.chunks_exact_mut(8).zip(offsets) {
                    // SAFETY: 8 f32 are 32 bytes; unaligned store.
                    unsafe { _mm256_storeu_ps(eight.as_mut_ptr(), offset) };
                }
                decoded.push(decoded_block(chunks, d, corrections));
            }
        }
        _ => {
            debug_assert!(false, "{} is not decoded for tiles", ty.name());
            return;
        }
    }
    let blocks = decoded.len() / rows.max(1);
    let row = |r: usize| &decoded[r * blocks..][..blocks];
    let n = xs.len();
    // A token group stays in L1 while every row meets it; the decoded rows stay in L2.
    for (g, group) in xs.chunks(TOKENS).enumerate() {
        let mut acts = [group[0]; TOKENS];
        for (slot, x) in acts.iter_mut().zip(group) {
            *slot = x;
        }
        let mut write = |r: usize, values: &[f32; TOKENS]| {
            for (y, &value) in out[r * n + g * TOKENS..][..group.len()]
                .iter_mut()
                .zip(values)
            {
                *y = value;
            }
        };
        let mut r = 0;
        while r + ROWS <= rows {
            let mut tile_rows = [row(r); ROWS];
            for (i, slot) in tile_rows.iter_mut().enumerate() {
                *slot = row(r + i);
            }
            let sums = unsafe { tile::<ROWS>(tile_rows, acts) };
            for (i, values) in sums.iter().enumerate() {
                write(r + i, values);
            }
            r += ROWS;
        }
        while r < rows {
            let [values] = unsafe { tile::<1>([row(r)], acts) };
            write(r, &values);
            r += 1;
        }
    }
}

#[inline(always)]
fn decoded_block(chunks: [__m512i; 8], d: f32, corrections: [f32; 16]) -> DecodedBlock {
    let mut block = DecodedBlock {
        chunks: [[[0; 16]; 2]; 8],
        corrections,
        d,
    };
    for (stored, chunk) in block.chunks.iter_mut().zip(chunks) {
        // SAFETY: 64 bytes; unaligned store.
        unsafe { _mm512_storeu_si512(stored.as_mut_ptr().cast(), chunk) };
    }
    block
}

/// `R` decoded rows times `TOKENS` tokens.
///
/// # Safety
/// Only to be called from a function compiled for AVX-512 F and VNNI.
#[inline(always)]
unsafe fn tile<const R: usize>(
    rows: [&[DecodedBlock]; R],
    acts: [&[ActivationBlock]; TOKENS],
) -> [[f32; TOKENS]; R] {
    let blocks = rows[0].len();
    let mut sums = [[_mm512_setzero_ps(); TOKENS]; R];
    for b in 0..blocks {
        let mut w_blocks = [&rows[0][b]; R];
        for (block, row) in w_blocks.iter_mut().zip(&rows) {
            *block = &row[b];
        }
        let mut a_blocks = [&acts[0][b]; TOKENS];
        for (block, a) in a_blocks.iter_mut().zip(&acts) {
            *block = &a[b];
        }
        let mut ints = [[_mm512_setzero_si512(); TOKENS]; R];
        for c in 0..8 {
            let mut w = [_mm512_setzero_si512(); R];
            for (w, block) in w.iter_mut().zip(&w_blocks) {
                *w = _mm512_loadu_si512(block.chunks[c].as_ptr().cast());
            }
            for (t, a) in a_blocks.iter().enumerate() {
                let a = _mm512_loadu_si512(a.qs[c].as_ptr().cast());
                for (ints, &w) in ints.iter_mut().zip(&w) {
                    ints[t] = dpwssd_registers(ints[t], w, a);
                }
            }
        }
        for ((sums, ints), block) in sums.iter_mut().zip(&ints).zip(&w_blocks) {
            let corrections = _mm512_loadu_ps(block.corrections.as_ptr());
            for ((sum, &ints), a) in sums.iter_mut().zip(ints).zip(&a_blocks) {
                *sum = _mm512_fmadd_ps(
                    _mm512_set1_ps(block.d * a.d),
                    _mm512_cvtepi32_ps(ints),
                    *sum,
                );
                let run_sums = _mm512_loadu_ps(a.sums16.as_ptr().cast());
                *sum = _mm512_fnmadd_ps(corrections, run_sums, *sum);
            }
        }
    }
    let mut totals = [[0f32; TOKENS]; R];
    for (totals, sums) in totals.iter_mut().zip(&sums) {
        for (total, &sum) in totals.iter_mut().zip(sums) {
            *total = _mm512_reduce_add_ps(sum);
        }
    }
    totals
}
