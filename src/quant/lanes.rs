//! The f32 accumulator behind every fused dot product.

/// Independent partial sums: they break the serial add chain so the compiler can keep them in
/// vector registers, and each lane sums only 1/LANES of the terms, which also bounds the
/// rounding error a long row accumulates.
const LANES: usize = 16;

#[derive(Default)]
pub(super) struct LaneSum {
    lanes: [f32; LANES],
}

impl LaneSum {
    /// Adds Σ w[i]·x[i]; `w` and `x` have the same length.
    #[inline(always)]
    pub(super) fn add(&mut self, w: &[f32], x: &[f32]) {
        let mut w_chunks = w.chunks_exact(LANES);
        let mut x_chunks = x.chunks_exact(LANES);
        for (w, x) in (&mut w_chunks).zip(&mut x_chunks) {
            // Fixed-length views give the compiler a constant trip count to vectorize.
            let (Ok(w), Ok(x)) = (<&[f32; LANES]>::try_from(w), <&[f32; LANES]>::try_from(x))
            else {
                continue;
            };
            for ((lane, w), x) in self.lanes.iter_mut().zip(w).zip(x) {
                *lane += w * x;
            }
        }
        let tail = w_chunks.remainder().iter().zip(x_chunks.remainder());
        for (lane, (w, x)) in self.lanes.iter_mut().zip(tail) {
            *lane += w * x;
        }
    }

    /// Folds the lanes pairwise (halving each round) to keep the final sum balanced.
    #[inline(always)]
    pub(super) fn total(&self) -> f32 {
        let mut lanes = self.lanes;
        let mut width = LANES;
        while width > 1 {
            width /= 2;
            let (low, high) = lanes.split_at_mut(width);
            for (low, high) in low.iter_mut().zip(high.iter()) {
                *low += high;
            }
        }
        lanes.first().copied().unwrap_or(0.0)
    }
}

/// Σ w·x for several `xs` at once, each summed exactly as one [`LaneSum`] over the whole row
/// would (same lanes, same order of additions), so the results are bit-identical to a
/// `dot_row` per x, while each chunk of `w` is loaded once for all of them. Callers have
/// checked that every x has w's length.
#[inline(always)]
pub(super) fn dot_many<const N: usize>(w: &[f32], xs: [&[f32]; N]) -> [f32; N] {
    let mut sums: [LaneSum; N] = std::array::from_fn(|_| LaneSum::default());
    let whole = w.len() / LANES * LANES;
    for start in (0..whole).step_by(LANES) {
        let chunk =
            |v: &[f32]| -> Option<[f32; LANES]> { v.get(start..start + LANES)?.try_into().ok() };
        let Some(w) = chunk(w) else { continue };
        for (sum, x) in sums.iter_mut().zip(xs) {
            if let Some(x) = chunk(x) {
                for ((lane, w), x) in sum.lanes.iter_mut().zip(w).zip(x) {
                    *lane += w * x;
                }
            }
        }
    }
    let w_tail = w.get(whole..).unwrap_or(&[]);
    for (sum, x) in sums.iter_mut().zip(xs) {
        sum.add(w_tail, x.get(whole..).unwrap_or(&[]));
    }
    std::array::from_fn(|t| sums.get(t).map_or(0.0, LaneSum::total))
}
