//! Q6_K: super-blocks of 256 elements in sixteen runs of 16, each with a signed 8-bit scale
//! times the block's f16 `d` (stored last): `x = d·sc·(q − 32)` with 6-bit `q`.
//!
//! Each half of 128 elements is four quarters of 32. Byte l of the half's 64 `ql` bytes holds
//! element l of quarter 0 (low nibble) and of quarter 2 (high nibble); byte 32 + l holds
//! quarters 1 and 3. Byte l of the half's 32 `qh` bytes holds the top two bits of element l of
//! quarters 0, 1, 2, 3 in bit pairs 0, 2, 4, 6.

use bytemuck::{Pod, Zeroable};

use super::block::{f16_to_f32, stored_f16, BlockFormat, BlockQuantizer};
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

/// Candidate inverse scales tried per run: −(32 + 0.1·k) / peak for k in −9..=9.
const SEARCH_STEPS: i8 = 9;

/// Fits `x ≈ scale·q` with integer `q` in `-32..=31`, minimizing squared error weighted by
/// `x²` (large weights matter most). The peak element is mapped to the negative end, which
/// has one more level; a few neighbouring inverse scales are tried, and for each resulting `q`
/// the best scale follows in closed form.
fn fit_scale(x: &[f32]) -> f32 {
    let peak = x.iter().fold(
        0.0f32,
        |peak, &v| if v.abs() > peak.abs() { v } else { peak },
    );
    // Fit in units of the peak magnitude so squares cannot overflow or underflow.
    let norm = peak.abs();
    if !(norm > 0.0 && norm.is_finite()) {
        return 0.0;
    }
    let peak = peak / norm;
    let mut best_scale = peak / -32.0;
    let mut best_score = f32::NEG_INFINITY;
    for step in -SEARCH_STEPS..=SEARCH_STEPS {
        let inverse_scale = -(32.0 + 0.1 * f32::from(step)) / peak;
        let (sqx, sqq) = x.iter().fold((0.0f32, 0.0f32), |(sqx, sqq), &v| {
            let v = v / norm;
            let q = (v * inverse_scale).round().clamp(-32.0, 31.0);
            let w = v * v;
            (sqx + w * q * v, sqq + w * q * q)
        });
        // With the optimal scale sqx/sqq, the weighted error is Σw·x² − sqx²/sqq.
        if sqq > 0.0 && sqx * sqx / sqq > best_score {
            best_score = sqx * sqx / sqq;
            best_scale = sqx / sqq;
        }
    }
    best_scale * norm
}

impl BlockQuantizer for Q6K {
    /// Run scales become multiples of `d`, chosen so the largest-magnitude one lands on −128
    /// (the i8 end with the extra level); elements are then rounded against the decoded scales.
    fn encode(x: &[f32; 256]) -> BlockQ6K {
        let mut run_scales = [0.0f32; 16];
        for (scale, run) in run_scales.iter_mut().zip(x.chunks_exact(16)) {
            *scale = fit_scale(run);
        }
        let peak = run_scales.iter().fold(
            0.0f32,
            |peak, &s| if s.abs() > peak.abs() { s } else { peak },
        );
        let (d, d_bytes) = stored_f16(peak / -128.0);
        let inverse_d = if d == 0.0 { 0.0 } else { 1.0 / d };

        let mut scales = [0i8; 16];
        let mut levels: Quarters = [[[0; 32]; 4]; 2];
        let runs = levels
            .as_flattened_mut()
            .as_flattened_mut()
            .chunks_exact_mut(16);
        let inputs = x.chunks_exact(16).zip(&run_scales);
        for ((levels, scale), (values, &run_scale)) in runs.zip(&mut scales).zip(inputs) {
            *scale = (run_scale * inverse_d).round().clamp(-128.0, 127.0) as i8;
            let step = d * f32::from(*scale);
            let inverse_step = if step == 0.0 { 0.0 } else { 1.0 / step };
            for (level, &value) in levels.iter_mut().zip(values) {
                *level = ((value * inverse_step).round().clamp(-32.0, 31.0) + 32.0) as u8;
            }
        }

        let mut ql = [[0u8; 64]; 2];
        let mut qh = [[0u8; 32]; 2];
        for ((ql, qh), [q0, q1, q2, q3]) in ql.iter_mut().zip(&mut qh).zip(&levels) {
            let (ql_first, ql_second) = ql.split_at_mut(32);
            let targets = ql_first
                .iter_mut()
                .zip(ql_second.iter_mut())
                .zip(qh.iter_mut());
            let sources = q0.iter().zip(q1).zip(q2).zip(q3);
            for (((first, second), high), (((&q0, &q1), &q2), &q3)) in targets.zip(sources) {
                *first = (q0 & 0x0f) | ((q2 & 0x0f) << 4);
                *second = (q1 & 0x0f) | ((q3 & 0x0f) << 4);
                *high = (q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6);
            }
        }
        BlockQ6K {
            ql,
            qh,
            scales,
            d: d_bytes,
        }
    }
}
