//! Agreement between two sets of logits, position by position: how `eval --reference` and
//! `check` judge a backend against a reference; and element by element, how the op tests judge a
//! kernel's output.

/// How one position's logits compare with the reference's.
#[derive(Clone, Debug)]
pub struct PositionAgreement {
    pub cosine: f64,
    pub max_abs_diff: f32,
    pub top1: u32,
    pub reference_top1: u32,
}

/// Summary over all positions.
#[derive(Clone, Debug)]
pub struct Agreement {
    pub positions: Vec<PositionAgreement>,
    pub min_cosine: f64,
    pub max_abs_diff: f32,
    /// Positions whose arg-max equals the reference's.
    pub top1_matches: usize,
}

/// Compares row-major `[n, vocab]` logits; the two slices must have the same length, a multiple
/// of `vocab`.
pub fn compare_logits(ours: &[f32], reference: &[f32], vocab: usize) -> Agreement {
    assert_eq!(ours.len(), reference.len(), "logit sets differ in size");
    assert!(
        vocab > 0 && ours.len().is_multiple_of(vocab),
        "size is not a multiple of vocab"
    );
    let positions: Vec<PositionAgreement> = ours
        .chunks_exact(vocab)
        .zip(reference.chunks_exact(vocab))
        .map(|(a, b)| PositionAgreement {
            cosine: cosine(a, b),
            max_abs_diff: a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f32::max),
            top1: crate::sample::argmax(a),
            reference_top1: crate::sample::argmax(b),
        })
        .collect();
    Agreement {
        min_cosine: positions.iter().map(|p| p.cosine).fold(1.0, f64::min),
        max_abs_diff: positions.iter().map(|p| p.max_abs_diff).fold(0.0, f32::max),
        top1_matches: positions
            .iter()
            .filter(|p| p.top1 == p.reference_top1)
            .count(),
        positions,
    }
}

/// Cosine similarity in f64; NaN anywhere gives NaN (which fails every threshold).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 && bb == 0.0 {
        return 1.0;
    }
    ab / (aa.sqrt() * bb.sqrt())
}

/// How far an element may be from its reference: |got − want| ≤ atol + rtol·|want|.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub atol: f32,
    pub rtol: f32,
}

/// An output held to its reference element by element.
#[derive(Clone, Debug)]
pub struct ElementComparison {
    /// Over the whole output (NaN when any element is NaN).
    pub cosine: f64,
    /// The element furthest outside its tolerance (or nearest to leaving it).
    pub worst_index: usize,
    pub worst_got: f32,
    pub worst_want: f32,
    /// |got − want| / (atol + rtol·|want|) at the worst element: above 1 fails; infinite where
    /// either value is not finite.
    pub worst_ratio: f64,
    /// Elements outside their tolerance.
    pub outside: usize,
    pub len: usize,
    pub tolerance: Tolerance,
}

impl ElementComparison {
    pub fn passes(&self) -> bool {
        self.outside == 0
    }
}

impl std::fmt::Display for ElementComparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} elements outside |Δ| ≤ {:e} + {:e}·|want|; worst at [{}]: got {:e}, want {:e} \
             ({:.3}× its tolerance); cosine {:.10}",
            self.outside,
            self.len,
            self.tolerance.atol,
            self.tolerance.rtol,
            self.worst_index,
            self.worst_got,
            self.worst_want,
            self.worst_ratio,
            self.cosine
        )
    }
}

/// Holds `got` to `want` element by element; the slices must have the same length. An element
/// where either value is not finite fails, whatever the tolerance.
pub fn compare_elements(got: &[f32], want: &[f32], tolerance: Tolerance) -> ElementComparison {
    assert_eq!(got.len(), want.len(), "outputs differ in size");
    let mut worst = (0, f64::NEG_INFINITY);
    let mut outside = 0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ratio = if g.is_finite() && w.is_finite() {
            let allowed = tolerance.atol as f64 + tolerance.rtol as f64 * (w as f64).abs();
            let diff = (g as f64 - w as f64).abs();
            if diff == 0.0 {
                0.0
            } else {
                diff / allowed
            }
        } else {
            f64::INFINITY
        };
        if ratio > 1.0 {
            outside += 1;
        }
        if ratio > worst.1 {
            worst = (i, ratio);
        }
    }
    let (worst_got, worst_want) = match got.get(worst.0) {
        Some(&g) => (g, want[worst.0]),
        None => (0.0, 0.0),
    };
    ElementComparison {
        cosine: cosine(got, want),
        worst_index: worst.0,
        worst_got,
        worst_want,
        worst_ratio: worst.1.max(0.0),
        outside,
        len: got.len(),
        tolerance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_logits_agree_fully() {
        let a = [1.0, -2.0, 3.0, 0.5, 0.0, 4.0];
        let r = compare_logits(&a, &a, 3);
        assert_eq!(r.top1_matches, 2);
        assert!((r.min_cosine - 1.0).abs() < 1e-12);
        assert_eq!(r.max_abs_diff, 0.0);
    }

    #[test]
    fn a_flipped_position_is_reported() {
        let ours = [1.0, 2.0, 0.0, 0.0];
        let reference = [2.0, 1.0, 0.0, 0.0];
        let r = compare_logits(&ours, &reference, 2);
        assert_eq!(r.top1_matches, 1);
        assert_eq!(r.positions[0].top1, 1);
        assert_eq!(r.positions[0].reference_top1, 0);
        assert!((r.min_cosine - 0.8).abs() < 1e-9);
        assert_eq!(r.max_abs_diff, 1.0);
    }

    #[test]
    fn nan_fails_cosine() {
        assert!(cosine(&[f32::NAN, 1.0], &[1.0, 1.0]).is_nan());
    }

    /// One element in 100,000 left at zero moves neither the cosine nor the norm past what a
    /// global test allows (cosine ≥ 0.99999, norms within 1e-3); the per-element test names it. A NaN fails likewise.
    #[test]
    fn one_wrong_element_or_nan_fails_the_element_test() {
        let want: Vec<f32> = (0..100_000)
            .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let tolerance = Tolerance {
            atol: 1e-6,
            rtol: 1e-5,
        };
        let mut got: Vec<f32> = want.iter().map(|w| w * (1.0 + 1e-6)).collect();
        assert!(compare_elements(&got, &want, tolerance).passes());
        // An element the kernel never wrote.
        got[31_337] = 0.0;
        let planted = compare_elements(&got, &want, tolerance);
        assert!(!planted.passes());
        assert_eq!((planted.worst_index, planted.outside), (31_337, 1));
        assert!(planted.cosine > 0.99999, "{planted}");
        got[31_337] = want[31_337];
        got[4] = f32::NAN;
        let nan = compare_elements(&got, &want, tolerance);
        assert!(!nan.passes());
        assert_eq!((nan.worst_index, nan.outside), (4, 1));
        assert!(
            nan.worst_ratio.is_infinite() && nan.cosine.is_nan(),
            "{nan}"
        );
    }
}
