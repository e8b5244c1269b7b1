//! Activations quantized to 14-bit integers for the fast matmul mode (the role ggml's Q8_K
//! plays, with 64 times finer steps): each block of 256 values keeps one f32 scale, the values
//! as i16, and the scaled sums of its runs, which the formats with an offset (Q4_K's mins,
//! Q6_K's −32) need.
//!
//! Why 14 bits: 8-bit activations cost 0.015 of logit cosine on the tiny Q4_K fixture (its
//! random weights amplify every perturbation layer after layer); the error shrinks with the
//! step, so 64 times finer steps leave about 4·10⁻⁶. And ±8191 is the widest range for which
//! every kernel can sum a whole 256-value super-block in one i32 lane: the largest weight
//! factor is a Q6_K level times its scale (63·128), and a lane of 8 adds 32 such products.

/// Values per activation block; K-quant super-blocks line up with it.
pub const ACTIVATION_BLOCK: usize = 256;

/// Q8_0 blocks per activation block.
pub(super) const Q8_0_PER_ACTIVATION: usize = ACTIVATION_BLOCK / 32;

/// The largest quant magnitude: a block's step is its largest |value| / this.
pub const ACTIVATION_QUANT_MAX: f32 = 8191.0;

/// Values per chunk of the stored layout (see [`ActivationBlock::qs`]).
pub(super) const CHUNK: usize = 32;

#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(super) struct ActivationBlock {
    /// The quants by chunk of 32 elements, each as its 16 even-indexed values, then its 16
    /// odd-indexed ones. That is the order in which the vector kernels widen 32 weight bytes to
    /// i16 (one `maddubs` against a factor in every even byte, one in every odd byte), so no
    /// kernel shuffles activations.
    pub(super) qs: [[[i16; CHUNK / 2]; 2]; ACTIVATION_BLOCK / CHUNK],
    /// `d` times the sum of the quants of each run of 16 (in element order).
    pub(super) sums16: [[f32; 8]; ACTIVATION_BLOCK / 16 / 8],
    /// `d` times the sum of the quants of each run of 32.
    pub(super) sums32: [f32; ACTIVATION_BLOCK / 32],
    /// The step: value ≈ d·quant.
    pub(super) d: f32,
}

impl ActivationBlock {
    /// The quant of element `i` (in element order).
    #[inline(always)]
    pub(super) fn quant(&self, i: usize) -> i32 {
        i32::from(self.qs[i / CHUNK][i % 2][i % CHUNK / 2])
    }
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
            blocks: quantize_activations(x),
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

/// [`quantize_blocks`] in the build for AVX2 and FMA where the CPU has them (bit-identical:
/// see `simd`).
#[cfg(target_arch = "x86_64")]
fn quantize_activations(x: &[f32]) -> Vec<ActivationBlock> {
    if super::simd::has_avx2_fma() {
        // SAFETY: the CPU supports the features the function is compiled for.
        unsafe { quantize_blocks_avx2(x) }
    } else {
        quantize_blocks(x)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn quantize_blocks_avx2(x: &[f32]) -> Vec<ActivationBlock> {
    quantize_blocks(x)
}

#[cfg(not(target_arch = "x86_64"))]
fn quantize_activations(x: &[f32]) -> Vec<ActivationBlock> {
    quantize_blocks(x)
}

/// Quantizes whole blocks of `x` (a trailing partial block is left out).
#[inline(always)]
fn quantize_blocks(x: &[f32]) -> Vec<ActivationBlock> {
    // A plain loop: iterator adapters would be compiled outside the caller's vector build.
    let mut blocks = Vec::with_capacity(x.len() / ACTIVATION_BLOCK);
    for chunk in x.chunks_exact(ACTIVATION_BLOCK) {
        blocks.push(quantize_block(chunk));
    }
    blocks
}

/// Maps the largest magnitude to ±[`ACTIVATION_QUANT_MAX`]. Ties round to even, which vector units do in
/// one instruction.
#[inline(always)]
fn quantize_block(x: &[f32]) -> ActivationBlock {
    let amax = x.iter().fold(0.0f32, |amax, v| amax.max(v.abs()));
    let d = amax / ACTIVATION_QUANT_MAX;
    let inverse = if d > 0.0 && d.is_finite() {
        1.0 / d
    } else {
        0.0
    };
    let mut quants = [0i16; ACTIVATION_BLOCK];
    for (q, &value) in quants.iter_mut().zip(x) {
        // `as` saturates and maps NaN to 0.
        *q = (value * inverse).round_ties_even() as i16;
    }
    let mut qs = [[[0i16; CHUNK / 2]; 2]; ACTIVATION_BLOCK / CHUNK];
    for ([evens, odds], chunk) in qs.iter_mut().zip(quants.chunks_exact(CHUNK)) {
        for ((even, odd), pair) in evens.iter_mut().zip(odds).zip(chunk.chunks_exact(2)) {
            *even = pair[0];
            *odd = pair[1];
        }
    }
    let mut run_sums = [0i32; ACTIVATION_BLOCK / 16];
    for (sum, run) in run_sums.iter_mut().zip(quants.chunks_exact(16)) {
        *sum = run.iter().map(|&q| i32::from(q)).sum();
    }
    let mut sums16 = [[0f32; 8]; ACTIVATION_BLOCK / 16 / 8];
    for (scaled, &sum) in sums16.as_flattened_mut().iter_mut().zip(&run_sums) {
        *scaled = d * sum as f32;
    }
    let mut sums32 = [0f32; ACTIVATION_BLOCK / 32];
    for (scaled, pair) in sums32.iter_mut().zip(run_sums.chunks_exact(2)) {
        *scaled = d * (pair[0] + pair[1]) as f32;
    }
    ActivationBlock {
        qs,
        sums16,
        sums32,
        d,
    }
}
