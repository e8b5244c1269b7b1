//! Agreement between two sets of logits, position by position: how `eval --reference` and
//! `check` judge a backend against a reference.

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
}
