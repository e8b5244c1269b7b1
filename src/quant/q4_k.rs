//! Q4_K: super-blocks of 256 elements in eight runs of 32. Each run has a 6-bit scale and a
//! 6-bit min, themselves scaled by the block's f16 `d` and `dmin`:
//! `x = d·sc·q − dmin·m` with 4-bit `q`. Group j of 32 bytes holds run 2j in its low nibbles
//! and run 2j + 1 in its high nibbles. Q5_K shares the scale packing and the affine step.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, stored_f16, BlockFormat, BlockQuantizer};
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

/// Candidate inverse scales tried per run: (max_q − 1 + 0.1·k) / range for k in 0..=20.
const SEARCH_STEPS: u8 = 20;
/// Rounds of re-assigning levels under the best fit so far and refitting.
const REFINE_ROUNDS: usize = 4;

/// Fits `x ≈ scale·q − min` with integer `q` in `0..=max_q`, `scale ≥ 0` and `min ≥ 0`
/// (the format cannot shift a run upwards), minimizing squared error weighted towards
/// larger magnitudes (`rms(x) + |x|`), since large weights matter most to a layer's output.
///
/// Plain min/max scaling wastes levels on outliers; instead a few scales around
/// `max_q / range` are tried, and for each resulting assignment of `q` the best
/// (scale, min) follows in closed form from weighted least squares. The winner is then
/// refined by alternating level assignment and refitting while the error drops.
fn fit_scale_min(x: &[f32], max_q: f32) -> (f32, f32) {
    let lowest = x.iter().fold(0.0f32, |lo, &v| lo.min(v));
    let highest = x.iter().fold(0.0f32, |hi, &v| hi.max(v));
    // Fit in units of the largest magnitude so squares cannot overflow or underflow.
    let norm = highest.max(-lowest);
    if !(norm > 0.0 && norm.is_finite()) {
        return (0.0, 0.0);
    }
    let (lowest, range) = (lowest / norm, (highest - lowest) / norm);
    let rms = (x.iter().map(|v| (v / norm) * (v / norm)).sum::<f32>() / x.len() as f32).sqrt();
    let weighted = || x.iter().map(move |&v| (v / norm, rms + (v / norm).abs()));

    // Levels for `x ≈ q / inverse_scale + offset`, with each value and its weight.
    let levels = |offset: f32, inverse_scale: f32| {
        weighted().map(move |(v, w)| {
            let q = ((v - offset) * inverse_scale).round().clamp(0.0, max_q);
            (v, w, q)
        })
    };
    let error = |offset: f32, inverse_scale: f32, fit: Fit| -> f32 {
        levels(offset, inverse_scale)
            .map(|(v, w, q)| w * (fit.scale * q + fit.offset - v).powi(2))
            .sum()
    };
    // The least-squares (scale, offset ≤ 0) for the levels of (offset, inverse_scale).
    let refit = |offset: f32, inverse_scale: f32| -> Option<(Fit, f32)> {
        let sums = levels(offset, inverse_scale).fold([0.0f32; 5], |s, (v, w, q)| {
            [
                s[0] + w,
                s[1] + w * q,
                s[2] + w * q * q,
                s[3] + w * v,
                s[4] + w * q * v,
            ]
        });
        let [sw, sq, sqq, sx, sqx] = sums;
        let det = sw * sqq - sq * sq;
        if det.is_nan() || det <= 0.0 {
            return None;
        }
        let mut fit = Fit {
            scale: (sw * sqx - sq * sx) / det,
            offset: (sqq * sx - sq * sqx) / det,
        };
        if fit.offset > 0.0 {
            fit = Fit {
                scale: sqx / sqq,
                offset: 0.0,
            };
        }
        (fit.scale > 0.0).then(|| (fit, error(offset, inverse_scale, fit)))
    };

    let plain = Fit {
        scale: range / max_q,
        offset: lowest,
    };
    let mut best = (plain, error(lowest, max_q / range, plain));
    for step in 0..=SEARCH_STEPS {
        let inverse_scale = (max_q - 1.0 + 0.1 * f32::from(step)) / range;
        if let Some(candidate) = refit(lowest, inverse_scale) {
            if candidate.1 < best.1 {
                best = candidate;
            }
        }
    }
    for _ in 0..REFINE_ROUNDS {
        match refit(best.0.offset, 1.0 / best.0.scale) {
            Some(candidate) if candidate.1 < best.1 => best = candidate,
            _ => break,
        }
    }
    (best.0.scale * norm, -best.0.offset * norm)
}

/// `x ≈ scale·q + offset`, in the normalized units of [`fit_scale_min`].
#[derive(Clone, Copy)]
struct Fit {
    scale: f32,
    offset: f32,
}

/// A Q4_K/Q5_K block's quantized scale fields and the per-run (scale, min) they decode to.
struct ScaleMins {
    d: [u8; 2],
    dmin: [u8; 2],
    packed: [u8; 12],
    runs: [(f32, f32); 8],
}

/// Fits every run of 32, then stores the fits as 6-bit multiples of `d` and `dmin` (chosen so
/// the largest scale and min land on 63), reporting what a decoder will reconstruct.
fn quantize_scale_mins(x: &[f32; 256], max_q: f32) -> ScaleMins {
    let mut fits = [(0.0f32, 0.0f32); 8];
    for (fit, run) in fits.iter_mut().zip(x.chunks_exact(32)) {
        *fit = fit_scale_min(run, max_q);
    }
    let (largest_scale, largest_min) = fits
        .iter()
        .fold((0.0f32, 0.0f32), |(s, m), &(fs, fm)| (s.max(fs), m.max(fm)));
    let (d, d_bytes) = stored_f16(largest_scale / 63.0);
    let (dmin, dmin_bytes) = stored_f16(largest_min / 63.0);
    let six_bits = |value: f32, unit: f32| {
        if unit > 0.0 {
            (value / unit).round().clamp(0.0, 63.0) as u8
        } else {
            0
        }
    };
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    let mut runs = [(0.0f32, 0.0f32); 8];
    for (((scale, min), run), &(fit_scale, fit_min)) in
        scales.iter_mut().zip(&mut mins).zip(&mut runs).zip(&fits)
    {
        *scale = six_bits(fit_scale, d);
        *min = six_bits(fit_min, dmin);
        *run = (d * f32::from(*scale), dmin * f32::from(*min));
    }
    ScaleMins {
        d: d_bytes,
        dmin: dmin_bytes,
        packed: pack_scale_mins(&scales, &mins),
        runs,
    }
}

/// The level in `0..=max_q` nearest to `value` under a run's decoded (scale, min).
fn nearest_level(value: f32, (scale, min): (f32, f32), max_q: f32) -> u8 {
    if scale > 0.0 {
        ((value + min) / scale).round().clamp(0.0, max_q) as u8
    } else {
        0
    }
}

impl BlockQuantizer for Q4K {
    fn encode(x: &[f32; 256]) -> BlockQ4K {
        let fit = quantize_scale_mins(x, 15.0);
        let mut qs = [[0u8; 32]; 4];
        let run_pairs = x.chunks_exact(64).zip(fit.runs.chunks_exact(2));
        for (group, (values, params)) in qs.iter_mut().zip(run_pairs) {
            if let [low_params, high_params] = params {
                let (low, high) = values.split_at(32);
                for ((byte, &low), &high) in group.iter_mut().zip(low).zip(high) {
                    *byte = nearest_level(low, *low_params, 15.0)
                        | (nearest_level(high, *high_params, 15.0) << 4);
                }
            }
        }
        BlockQ4K {
            d: fit.d,
            dmin: fit.dmin,
            scales: fit.packed,
            qs,
        }
    }
}
