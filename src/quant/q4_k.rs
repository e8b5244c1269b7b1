//! Q4_K: super-blocks of 256 elements in eight runs of 32. Each run has a 6-bit scale and a
//! 6-bit min, themselves scaled by the block's f16 `d` and `dmin`:
//! `x = d·sc·q − dmin·m` with 4-bit `q`. Group j of 32 bytes holds run 2j in its low nibbles
//! and run 2j + 1 in its high nibbles. Q5_K shares the scale packing and the affine step.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, f32_to_f16, nearest_int, BlockFormat, BlockQuantizer};
use super::GgmlType;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct BlockQ4K {
    pub(super) d: [u8; 2],
    pub(super) dmin: [u8; 2],
    pub(super) scales: [u8; 12],
    pub(super) qs: [[u8; 32]; 4],
}

pub(super) struct Q4K;

/// Unpacks the eight 6-bit scales and mins. Bytes 0..4 hold scales 0..4 and bytes 4..8 mins
/// 0..4 in their low six bits; runs 4..8 keep their low four bits in the nibbles of bytes
/// 8..12 and their top two bits in the spare top bits of bytes 0..8.
/// Works on the three little-endian words at once: each byte lane of a word is one field.
#[inline(always)]
pub(super) fn unpack_scale_mins(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let [a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3] = *packed;
    let (first, second, third) = (
        u32::from_le_bytes([a0, a1, a2, a3]),
        u32::from_le_bytes([b0, b1, b2, b3]),
        u32::from_le_bytes([c0, c1, c2, c3]),
    );
    const LOW_SIX: u32 = 0x3f3f_3f3f;
    const LOW_FOUR: u32 = 0x0f0f_0f0f;
    const TOP_TWO: u32 = 0x0303_0303;
    let scales_low = first & LOW_SIX;
    let mins_low = second & LOW_SIX;
    let scales_high = (third & LOW_FOUR) | (((first >> 6) & TOP_TWO) << 4);
    let mins_high = ((third >> 4) & LOW_FOUR) | (((second >> 6) & TOP_TWO) << 4);
    let join = |low: u32, high: u32| (u64::from(low) | (u64::from(high) << 32)).to_le_bytes();
    (join(scales_low, scales_high), join(mins_low, mins_high))
}

/// The inverse of [`unpack_scale_mins`]; every value must be below 64.
fn pack_scale_mins(scales: &[u8; 8], mins: &[u8; 8]) -> [u8; 12] {
    let mut packed = [0u8; 12];
    for s in 0..4 {
        packed[s] = scales[s] | ((scales[s + 4] >> 4) << 6);
        packed[s + 4] = mins[s] | ((mins[s + 4] >> 4) << 6);
        packed[s + 8] = (scales[s + 4] & 0x0f) | ((mins[s + 4] & 0x0f) << 4);
    }
    packed
}

/// `x = d·sc·q − dmin·m` over eight unpacked runs; `d·sc` and `dmin·m` are rounded to f32 first,
/// as ggml does, so results match it exactly.
#[inline(always)]
pub(super) fn dequantize_runs(
    d: [u8; 2],
    dmin: [u8; 2],
    packed: &[u8; 12],
    runs: &[[u8; 32]; 8],
    out: &mut [f32; 256],
) {
    let d = f16_to_f32(d);
    let dmin = f16_to_f32(dmin);
    let (scales, mins) = unpack_scale_mins(packed);
    let run_params = scales.iter().zip(&mins);
    for ((out, run), (&scale, &min)) in out.chunks_exact_mut(32).zip(runs).zip(run_params) {
        let scale = d * f32::from(scale);
        let min = dmin * f32::from(min);
        for (out, &q) in out.iter_mut().zip(run) {
            *out = scale * f32::from(q) - min;
        }
    }
}

impl BlockFormat for Q4K {
    const TYPE: GgmlType = GgmlType::Q4_K;
    type Block = BlockQ4K;
    type Weights = [f32; 256];

    #[inline(always)]
    fn decode(block: &BlockQ4K, out: &mut [f32; 256]) {
        let mut runs = [[0u8; 32]; 8];
        for (pair, group) in runs.chunks_exact_mut(2).zip(&block.qs) {
            if let [low, high] = pair {
                for ((low, high), &byte) in low.iter_mut().zip(high.iter_mut()).zip(group) {
                    *low = byte & 0x0f;
                    *high = byte >> 4;
                }
            }
        }
        dequantize_runs(block.d, block.dmin, &block.scales, &runs, out);
    }
}

/// Per-run affine fits of a 256-element block as ggml's reference Q4_K/Q5_K quantizers make
/// them (no importance matrix): each run of 32 is fitted by a search over inverse scales with
/// weighted least squares, the run scales and mins are quantized to 6 bits against the block's
/// f16 `d` and `dmin`, and the elements are re-rounded against the decoded values. Every float
/// operation is ggml's, in ggml's order, so the bytes are ggml's.
pub(super) struct AffineBlock {
    pub(super) d: [u8; 2],
    pub(super) dmin: [u8; 2],
    pub(super) scales: [u8; 12],
    /// One level in `0..=max_level` per element.
    pub(super) levels: [u8; 256],
}

/// The search grid of [`fit_run`]: inverse scales `(rmin + rdelta·k + max_level) / range`.
pub(super) struct Search {
    pub(super) max_level: i32,
    pub(super) rmin: f32,
    pub(super) rdelta: f32,
    pub(super) steps: i32,
}

pub(super) fn quantize_affine_block(x: &[f32; 256], search: &Search) -> AffineBlock {
    let mut levels = [0u8; 256];
    let mut run_scales = [0.0f32; 8];
    let mut run_mins = [0.0f32; 8];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    let runs = x.chunks_exact(32).zip(levels.as_chunks_mut::<32>().0);
    for (j, (run, run_levels)) in runs.enumerate() {
        let mut sum_x2 = 0.0f32;
        for &v in run {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0.0f32; 32];
        for (w, &v) in weights.iter_mut().zip(run) {
            *w = av_x + v.abs();
        }
        let (scale, min) = fit_run(run, &weights, search, run_levels);
        run_scales[j] = scale;
        run_mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let inverse_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inverse_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut scales6 = [0u8; 8];
    let mut mins6 = [0u8; 8];
    for j in 0..8 {
        // ggml stores nearest_int's result in a byte before clamping to 63.
        scales6[j] = (nearest_int(inverse_scale * run_scales[j]) as u8).min(63);
        mins6[j] = (nearest_int(inverse_min * run_mins[j]) as u8).min(63);
    }
    let d = f32_to_f16(max_scale / 63.0);
    let dmin = f32_to_f16(max_min / 63.0);
    for j in 0..8 {
        let step = f16_to_f32(d) * f32::from(scales6[j]);
        if step == 0.0 {
            continue;
        }
        let offset = f16_to_f32(dmin) * f32::from(mins6[j]);
        for (level, &v) in levels[32 * j..32 * (j + 1)].iter_mut().zip(&x[32 * j..]) {
            *level = nearest_int((v + offset) / step).clamp(0, search.max_level) as u8;
        }
    }
    AffineBlock {
        d,
        dmin,
        scales: pack_scale_mins(&scales6, &mins6),
        levels,
    }
}

/// ggml's `make_qkx2_quants` for one run of 32 (squared error): fits `x ≈ scale·l − min` with
/// `l` in `0..=max_level`, writing the levels; returns `(scale, min)` with `min ≥ 0`.
fn fit_run(x: &[f32], weights: &[f32; 32], search: &Search, levels: &mut [u8; 32]) -> (f32, f32) {
    let n_max = search.max_level;
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..32 {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let level_of =
        |inverse: f32, v: f32, min: f32| nearest_int(inverse * (v - min)).clamp(0, n_max);
    let inverse = n_max as f32 / (max - min);
    let mut scale = 1.0 / inverse;
    let mut best_error = 0.0f32;
    for i in 0..32 {
        levels[i] = level_of(inverse, x[i], min) as u8;
        let diff = scale * f32::from(levels[i]) + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    let mut candidate = [0u8; 32];
    for k in 0..=search.steps {
        let inverse = (search.rmin + search.rdelta * k as f32 + n_max as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..32 {
            let l = level_of(inverse, x[i], min);
            candidate[i] = l as u8;
            let (w, l) = (weights[i], l as f32);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut error = 0.0f32;
            for i in 0..32 {
                let diff = this_scale * f32::from(candidate[i]) + this_min - x[i];
                error += weights[i] * (diff * diff);
            }
            if error < best_error {
                *levels = candidate;
                best_error = error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

impl BlockQuantizer for Q4K {
    fn encode(x: &[f32; 256]) -> BlockQ4K {
        let block = quantize_affine_block(
            x,
            &Search {
                max_level: 15,
                rmin: -1.0,
                rdelta: 0.1,
                steps: 20,
            },
        );
        let mut qs = [[0u8; 32]; 4];
        for (group, pair) in qs.iter_mut().zip(block.levels.chunks_exact(64)) {
            for (byte, (&low, &high)) in group.iter_mut().zip(pair[..32].iter().zip(&pair[32..])) {
                *byte = low | (high << 4);
            }
        }
        BlockQ4K {
            d: block.d,
            dmin: block.dmin,
            scales: block.scales,
            qs,
        }
    }
}
