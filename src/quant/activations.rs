//! Activations quantized to 8 bits for the fast matmul mode (the role ggml's Q8_K plays): each
//! block of 256 values keeps one f32 scale, the values as i8, and the sum of every run of 16
//! quants, which the formats with an offset (Q4_K's mins, Q6_K's −32) need.

/// Values per activation block; K-quant super-blocks line up with it.
pub const ACTIVATION_BLOCK: usize = 256;

#[derive(Clone, Copy)]
pub(super) struct ActivationBlock {
    pub(super) d: f32,
    pub(super) qs: [i8; ACTIVATION_BLOCK],
    pub(super) sums16: [i16; ACTIVATION_BLOCK / 16],
}

/// One activation row, quantized once per matmul and reused against every weight row.
#[derive(Clone)]
pub struct QuantizedActivations {
    pub(super) blocks: Vec<ActivationBlock>,
}

impl QuantizedActivations {
    /// Quantizes `x`; `None` if its length is not a whole number of 256-value blocks.
    pub fn new(x: &[f32]) -> Option<QuantizedActivations> {
        if !x.len().is_multiple_of(ACTIVATION_BLOCK) {
            return None;
        }
        Some(QuantizedActivations {
            blocks: super::simd::quantize_activations(x),
        })
    }

    /// The number of values in the row.
    pub fn len(&self) -> usize {
        self.blocks.len() * ACTIVATION_BLOCK
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// Quantizes whole blocks of `x` (a trailing partial block is left out).
#[inline(always)]
pub(super) fn quantize_blocks(x: &[f32]) -> Vec<ActivationBlock> {
    // A plain loop: iterator adapters would be compiled outside the caller's vector build.
    let mut blocks = Vec::with_capacity(x.len() / ACTIVATION_BLOCK);
    for chunk in x.chunks_exact(ACTIVATION_BLOCK) {
        blocks.push(quantize_block(chunk));
    }
    blocks
}

/// Maps the largest magnitude to ±127 (never −128, so a sign flip cannot overflow an i8).
/// Ties round to even, which vector units do in one instruction.
#[inline(always)]
fn quantize_block(x: &[f32]) -> ActivationBlock {
    let amax = x.iter().fold(0.0f32, |amax, v| amax.max(v.abs()));
    let d = amax / 127.0;
    let inverse = if d > 0.0 && d.is_finite() {
        1.0 / d
    } else {
        0.0
    };
    let mut qs = [0i8; ACTIVATION_BLOCK];
    for (q, &value) in qs.iter_mut().zip(x) {
        // `as` saturates and maps NaN to 0.
        *q = (value * inverse).round_ties_even() as i8;
    }
    let mut sums16 = [0i16; ACTIVATION_BLOCK / 16];
    for (sum, run) in sums16.iter_mut().zip(qs.chunks_exact(16)) {
        *sum = run.iter().map(|&q| i16::from(q)).sum();
    }
    ActivationBlock { d, qs, sums16 }
}
