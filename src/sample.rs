//! Choosing the next token from logits: greedy, or temperature with top-k / top-p / min-p
//! filtering and a repeat penalty, driven by a seeded generator so runs can be repeated.

/// Sampling settings; `temperature <= 0` means greedy.
#[derive(Clone, Debug)]
pub struct SamplerConfig {
    pub temperature: f32,
    /// Keep only the k most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches p; 1.0 keeps all.
    pub top_p: f32,
    /// Drop tokens less likely than min_p times the most likely one; 0 keeps all.
    pub min_p: f32,
    /// Divides positive (multiplies negative) logits of recently seen tokens; 1.0 is off.
    pub repeat_penalty: f32,
    /// How many recent tokens the repeat penalty looks at.
    pub repeat_window: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            repeat_window: 64,
            seed: 0,
        }
    }
}

pub struct Sampler {
    config: SamplerConfig,
    rng: SplitMix64,
}

/// One token's choice once the repeat penalty is applied: its settings and the uniform number
/// in [0, 1) its draw uses. Backends choose by it (the op `Backend::sample`) exactly as
/// [`Sampler::sample`] does on the host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Draw {
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub uniform: f32,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Sampler {
        let rng = SplitMix64(config.seed);
        Sampler { config, rng }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Greedy with no repeat penalty: the plain argmax of the logits.
    pub fn is_argmax(&self) -> bool {
        self.config.temperature <= 0.0 && !penalizes(self.config.repeat_penalty)
    }

    /// The settings of the next token's choice, taking a number from the generator when the
    /// choice is a draw (temperature > 0), so that the host and a backend choosing by it use
    /// the generator alike.
    pub fn next_draw(&mut self) -> Draw {
        let uniform = if self.config.temperature > 0.0 {
            self.rng.next_f32()
        } else {
            0.0
        };
        Draw {
            temperature: self.config.temperature,
            top_k: self.config.top_k,
            top_p: self.config.top_p,
            min_p: self.config.min_p,
            repeat_penalty: self.config.repeat_penalty,
            uniform,
        }
    }

    /// Picks the next token id given the logits and the tokens so far (for the repeat penalty).
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let start = history.len().saturating_sub(self.config.repeat_window);
        let draw = self.next_draw();
        let mut logits = logits.to_vec();
        apply_repeat_penalty(&mut logits, &history[start..], draw.repeat_penalty);
        choose(&logits, &draw)
    }
}

/// Whether a repeat penalty changes anything (1 is off; so is a non-positive one).
pub fn penalizes(penalty: f32) -> bool {
    penalty != 1.0 && penalty > 0.0
}

/// Divides positive (multiplies negative) logits of the ids in `recent` (each once) by
/// `penalty`.
pub fn apply_repeat_penalty(logits: &mut [f32], recent: &[u32], penalty: f32) {
    if !penalizes(penalty) {
        return;
    }
    let mut seen: Vec<u32> = recent.to_vec();
    seen.sort_unstable();
    seen.dedup();
    for id in seen {
        if let Some(l) = logits.get_mut(id as usize) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
}

/// The token `draw` chooses from (penalized) logits: with temperature ≤ 0 the [`argmax`], else
/// a draw among the finite logits over temperature, cut to the top k, then by top-p and min-p.
pub fn choose(logits: &[f32], draw: &Draw) -> u32 {
    if draw.temperature <= 0.0 {
        return argmax(logits);
    }
    let mut candidates: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_finite())
        .map(|(i, &l)| (i as u32, l / draw.temperature))
        .collect();
    if candidates.is_empty() {
        return argmax(logits);
    }
    candidates.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if draw.top_k > 0 {
        candidates.truncate(draw.top_k);
    }
    let probs = softmax_sorted(&candidates);
    let keep = kept_prefix(&probs, draw.top_p, draw.min_p);
    let total: f32 = probs[..keep].iter().sum();
    let mut target = draw.uniform * total;
    for (i, p) in probs[..keep].iter().enumerate() {
        if target < *p {
            return candidates[i].0;
        }
        target -= p;
    }
    candidates[keep - 1].0
}

/// The index of the largest logit; the lowest index wins ties, NaN never wins.
/// (All NaN: the last index.)
pub fn argmax(logits: &[f32]) -> u32 {
    // Two passes that vectorize, where one compare-and-branch loop ran a vocabulary of 248k
    // logits at ~0.9 ms: the largest value (`f32::max` passes over NaN), then where it is first.
    const LANES: usize = 16;
    let mut lanes = [f32::NAN; LANES];
    let chunks = logits.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (largest, &l) in lanes.iter_mut().zip(chunk) {
            *largest = largest.max(l);
        }
    }
    let largest = lanes.iter().chain(rest).fold(f32::NAN, |m, &l| m.max(l));
    if largest.is_nan() {
        return logits.len().saturating_sub(1) as u32;
    }
    logits.iter().position(|&l| l == largest).unwrap_or(0) as u32
}

/// Probabilities of candidates already sorted by descending logit.
fn softmax_sorted(candidates: &[(u32, f32)]) -> Vec<f32> {
    let max = candidates[0].1;
    let exps: Vec<f32> = candidates.iter().map(|c| (c.1 - max).exp()).collect();
    let sum: f32 = exps.iter().sum();
    exps.iter().map(|e| e / sum).collect()
}

/// How many of the (descending) probabilities survive top-p and min-p; at least one.
fn kept_prefix(probs: &[f32], top_p: f32, min_p: f32) -> usize {
    let floor = probs[0] * min_p;
    let mut cumulative = 0.0;
    let mut keep = 0;
    for &p in probs {
        if keep > 0 && (p < floor || cumulative >= top_p) {
            break;
        }
        cumulative += p;
        keep += 1;
    }
    keep
}

/// A small, well-mixed 64-bit generator (Steele, Lea and Flood's SplitMix64): seeded runs repeat.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(config: SamplerConfig) -> Sampler {
        Sampler::new(config)
    }

    #[test]
    fn greedy_takes_the_largest_and_lowest_index_on_ties() {
        let mut s = sampler(SamplerConfig::default());
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 3.0], &[]), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0, 0.5]), 1);
    }

    #[test]
    fn argmax_is_the_first_largest_in_any_lane_and_skips_nan() {
        let mut logits: Vec<f32> = (0..1000).map(|i| ((i * 37) % 101) as f32 * -0.5).collect();
        assert_eq!(argmax(&logits), 0);
        logits[517] = 3.0;
        logits[900] = 3.0;
        logits[999] = 2.0;
        logits[3] = f32::NAN;
        assert_eq!(argmax(&logits), 517);
        logits[998] = 4.0;
        assert_eq!(argmax(&logits), 998);
        assert_eq!(argmax(&[f32::NAN; 20]), 19);
        assert_eq!(argmax(&[-0.0, 0.0]), 0);
        assert_eq!(argmax(&[]), 0);
    }

    #[test]
    fn top_k_one_is_greedy_at_any_temperature() {
        let mut s = sampler(SamplerConfig {
            temperature: 5.0,
            top_k: 1,
            seed: 7,
            ..Default::default()
        });
        for _ in 0..50 {
            assert_eq!(s.sample(&[0.0, 0.5, 0.2, 0.49], &[]), 1);
        }
    }

    #[test]
    fn sampling_follows_the_distribution_and_repeats_with_the_seed() {
        let logits = [0.0f32, (3.0f32).ln(), f32::NEG_INFINITY];
        let config = SamplerConfig {
            temperature: 1.0,
            seed: 42,
            ..Default::default()
        };
        let draws: Vec<u32> = {
            let mut s = sampler(config.clone());
            (0..4000).map(|_| s.sample(&logits, &[])).collect()
        };
        let ones = draws.iter().filter(|&&t| t == 1).count() as f32 / 4000.0;
        assert!((ones - 0.75).abs() < 0.03, "P(1) = {ones}, want 0.75");
        assert!(!draws.contains(&2), "a -inf logit was sampled");
        let mut again = sampler(config);
        let replay: Vec<u32> = (0..4000).map(|_| again.sample(&logits, &[])).collect();
        assert_eq!(draws, replay);
    }

    #[test]
    fn top_p_and_min_p_cut_the_tail() {
        // probabilities 0.5, 0.3, 0.2 (after softmax of their logs)
        let logits = [0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
        for (top_p, min_p, allowed) in [
            (0.5, 0.0, vec![0]),
            (0.8, 0.0, vec![0, 1]),
            (1.0, 0.5, vec![0, 1]),
        ] {
            let mut s = sampler(SamplerConfig {
                temperature: 1.0,
                top_p,
                min_p,
                seed: 3,
                ..Default::default()
            });
            let mut seen: Vec<u32> = (0..500).map(|_| s.sample(&logits, &[])).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen, allowed, "top_p {top_p} min_p {min_p}");
        }
    }

    #[test]
    fn repeat_penalty_moves_greedy_off_a_recent_token() {
        let mut s = sampler(SamplerConfig {
            repeat_penalty: 2.0,
            ..Default::default()
        });
        assert_eq!(s.sample(&[2.0, 1.5], &[]), 0);
        assert_eq!(s.sample(&[2.0, 1.5], &[0]), 1);
        assert_eq!(s.sample(&[-1.0, -1.5], &[0]), 1);
    }
}
