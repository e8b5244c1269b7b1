//! Q6_K: super-blocks of 256 elements in sixteen runs of 16, each with a signed 8-bit scale
//! times the block's f16 `d` (stored last): `x = d·sc·(q − 32)` with 6-bit `q`.
//!
//! Each half of 128 elements is four quarters of 32. Byte l of the half's 64 `ql` bytes holds
//! element l of quarter 0 (low nibble) and of quarter 2 (high nibble); byte 32 + l holds
//! quarters 1 and 3. Byte l of the half's 32 `qh` bytes holds the top two bits of element l of
//! quarters 0, 1, 2, 3 in bit pairs 0, 2, 4, 6.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, f32_to_f16, nearest_int, BlockFormat, BlockQuantizer};
use super::GgmlType;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct BlockQ6K {
    pub(super) ql: [[u8; 64]; 2],
    pub(super) qh: [[u8; 32]; 2],
    pub(super) scales: [i8; 16],
    pub(super) d: [u8; 2],
}

pub(super) struct Q6K;

/// Element quants in order: half, quarter, element.
type Quarters = [[[u8; 32]; 4]; 2];

impl BlockFormat for Q6K {
    const TYPE: GgmlType = GgmlType::Q6_K;
    type Block = BlockQ6K;
    type Weights = [f32; 256];

    #[inline(always)]
    fn decode(block: &BlockQ6K, out: &mut [f32; 256]) {
        let mut levels: Quarters = [[[0; 32]; 4]; 2];
        for ((quarters, ql), qh) in levels.iter_mut().zip(&block.ql).zip(&block.qh) {
            let [q0, q1, q2, q3] = quarters;
            let (ql_first, ql_second) = ql.split_at(32);
            let targets = q0
                .iter_mut()
                .zip(q1.iter_mut())
                .zip(q2.iter_mut())
                .zip(q3.iter_mut());
            let sources = ql_first.iter().zip(ql_second).zip(qh);
            for ((((q0, q1), q2), q3), ((&first, &second), &high)) in targets.zip(sources) {
                *q0 = (first & 0x0f) | ((high & 3) << 4);
                *q1 = (second & 0x0f) | (((high >> 2) & 3) << 4);
                *q2 = (first >> 4) | (((high >> 4) & 3) << 4);
                *q3 = (second >> 4) | ((high >> 6) << 4);
            }
        }
        let d = f16_to_f32(block.d);
        let runs = levels.as_flattened().as_flattened().chunks_exact(16);
        for ((out, run), &scale) in out.chunks_exact_mut(16).zip(runs).zip(&block.scales) {
            let scale = d * f32::from(scale);
            for (out, &q) in out.iter_mut().zip(run) {
                *out = scale * f32::from(i16::from(q) - 32);
            }
        }
    }
}

/// ggml's `GROUP_MAX_EPS`: runs and blocks whose peak is below it are all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `make_qx_quants` for a run of 16 with 6-bit levels and weights `x²` (no importance
/// matrix): the peak element maps to −32, the end with one more level, then 18 neighbouring
/// inverse scales are tried and the best scale follows in closed form. Writes levels `0..=63`
/// (`q + 32`) and returns the scale. Every float operation is ggml's, in ggml's order.
fn fit_run(x: &[f32], levels: &mut [u8]) -> f32 {
    const N_MAX: i32 = 32;
    let mut peak = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            peak = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let level = |inverse: f32, v: f32| nearest_int(inverse * v).clamp(-N_MAX, N_MAX - 1);
    let sums = |inverse: f32| {
        let (mut sum_lx, mut sum_l2) = (0.0f32, 0.0f32);
        for &v in x {
            let l = level(inverse, v) as f32;
            let w = v * v;
            sum_lx += w * v * l;
            sum_l2 += w * l * l;
        }
        (sum_lx, sum_l2)
    };
    let assign = |inverse: f32, levels: &mut [u8]| {
        for (out, &v) in levels.iter_mut().zip(x) {
            *out = (level(inverse, v) + N_MAX) as u8;
        }
    };
    let inverse = -(N_MAX as f32) / peak;
    assign(inverse, levels);
    let (sum_lx, sum_l2) = sums(inverse);
    let mut scale = if sum_l2 != 0.0 { sum_lx / sum_l2 } else { 0.0 };
    let mut best = scale * sum_lx;
    for step in (-9i32..=9).filter(|&k| k != 0) {
        let inverse = -(N_MAX as f32 + 0.1 * step as f32) / peak;
        let (sum_lx, sum_l2) = sums(inverse);
        if sum_l2 > 0.0 && sum_lx * sum_lx > best * sum_l2 {
            assign(inverse, levels);
            scale = sum_lx / sum_l2;
            best = scale * sum_lx;
        }
    }
    scale
}

impl BlockQuantizer for Q6K {
    /// ggml's reference quantizer: run scales from [`fit_run`], quantized to i8 against a block
    /// `d` that maps the largest-magnitude one to −128; elements re-rounded against the decoded
    /// run scales (runs whose decoded scale is zero keep their fitted levels).
    fn encode(x: &[f32; 256]) -> BlockQ6K {
        let mut levels = [0u8; 256];
        let mut run_scales = [0.0f32; 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        let runs = x.chunks_exact(16).zip(levels.chunks_exact_mut(16));
        for ((run, run_levels), scale) in runs.zip(&mut run_scales) {
            *scale = fit_run(run, run_levels);
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = *scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            return BlockQ6K::zeroed();
        }
        let inverse = -128.0 / max_scale;
        let d = f32_to_f16(1.0 / inverse);
        let mut scales = [0i8; 16];
        for (out, &scale) in scales.iter_mut().zip(&run_scales) {
            *out = nearest_int(inverse * scale).min(127) as i8;
        }
        let runs = x.chunks_exact(16).zip(levels.chunks_exact_mut(16));
        for ((run, run_levels), &scale) in runs.zip(&scales) {
            let step = f16_to_f32(d) * f32::from(scale);
            if step == 0.0 {
                continue;
            }
            for (level, &v) in run_levels.iter_mut().zip(run) {
                *level = (nearest_int(v / step).clamp(-32, 31) + 32) as u8;
            }
        }

        let mut ql = [[0u8; 64]; 2];
        let mut qh = [[0u8; 32]; 2];
        for ((ql, qh), half) in ql.iter_mut().zip(&mut qh).zip(levels.chunks_exact(128)) {
            for l in 0..32 {
                let [q0, q1, q2, q3] = [half[l], half[l + 32], half[l + 64], half[l + 96]];
                ql[l] = (q0 & 0x0f) | ((q2 & 0x0f) << 4);
                ql[l + 32] = (q1 & 0x0f) | ((q3 & 0x0f) << 4);
                qh[l] = (q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6);
            }
        }
        BlockQ6K { ql, qh, scales, d }
    }
}
