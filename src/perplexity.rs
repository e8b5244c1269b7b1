//! Perplexity of a token sequence, measured the way llama.cpp's `llama-perplexity` measures it, so
//! that the two give the same figure on the same file: the tokens are cut into non-overlapping
//! chunks of `ctx` tokens (a shorter tail is left out), each chunk is evaluated from an empty
//! state, and only the second half of each chunk is scored, so that every scored token has at
//! least `ctx / 2` tokens of context. When the vocabulary asks for BOS, each chunk's first token
//! is replaced by it (the text itself is tokenized with one BOS in front).

use crate::model::{Engine, ModelError};

/// The fewest tokens a chunk may score: the error estimate divides by one less than the count.
const MIN_SCORED: usize = 2;

#[derive(Debug, thiserror::Error)]
pub enum PerplexityError {
    #[error(
        "a chunk of {ctx} tokens scores only {scored} (the second half but its last token); \
         give --ctx {min_ctx} or more"
    )]
    ChunkTooSmall {
        ctx: usize,
        scored: usize,
        min_ctx: usize,
    },
    #[error("--ctx {ctx} is more than the model's trained context of {train_context} tokens")]
    ContextTooLong { ctx: usize, train_context: usize },
    #[error("the text is {tokens} tokens, fewer than one chunk of {ctx}")]
    TextTooShort { tokens: usize, ctx: usize },
    #[error("chunk {chunk}: {source}")]
    Eval {
        chunk: usize,
        #[source]
        source: ModelError,
    },
}

/// Which tokens are measured: `chunks` chunks of `ctx` tokens from the start of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub ctx: usize,
    pub chunks: usize,
}

impl Plan {
    /// The chunks a text of `n_tokens` tokens holds at `ctx` tokens each, at most `max_chunks`.
    pub fn new(
        n_tokens: usize,
        ctx: usize,
        max_chunks: Option<usize>,
        train_context: usize,
    ) -> Result<Plan, PerplexityError> {
        if scored_per_chunk(ctx) < MIN_SCORED {
            let min_ctx = (1..)
                .find(|&c| scored_per_chunk(c) >= MIN_SCORED)
                .unwrap_or(usize::MAX);
            return Err(PerplexityError::ChunkTooSmall {
                ctx,
                scored: scored_per_chunk(ctx),
                min_ctx,
            });
        }
        if ctx > train_context {
            return Err(PerplexityError::ContextTooLong { ctx, train_context });
        }
        let fit = n_tokens / ctx;
        if fit == 0 {
            return Err(PerplexityError::TextTooShort {
                tokens: n_tokens,
                ctx,
            });
        }
        let chunks = max_chunks.map_or(fit, |m| m.min(fit));
        Ok(Plan { ctx, chunks })
    }

    /// Position of the first logits row that is scored in each chunk.
    pub fn first_scored(&self) -> usize {
        self.ctx / 2
    }

    pub fn scored_per_chunk(&self) -> usize {
        scored_per_chunk(self.ctx)
    }
}

/// Rows `ctx/2 ..= ctx-2` are scored: each predicts the next token, and the last row has none.
fn scored_per_chunk(ctx: usize) -> usize {
    ctx.saturating_sub(1 + ctx / 2)
}

/// −log p(`token`) under the softmax of `logits`. The maximum is taken and subtracted in f32 and
/// the exponentials summed in f64, as llama-perplexity does, so that both round alike.
pub fn token_nll(logits: &[f32], token: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| f64::from((l - max).exp())).sum();
    sum.ln() - f64::from(logits[token as usize] - max)
}

/// Running sums of the scored tokens' negative log-likelihoods and their squares.
#[derive(Clone, Copy, Debug, Default)]
pub struct Accumulator {
    nll: f64,
    nll2: f64,
    count: usize,
}

/// A perplexity and its standard error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub ppl: f64,
    /// exp(mean) times the standard error of the mean NLL (the delta method), as llama.cpp
    /// reports it.
    pub error: f64,
    pub tokens: usize,
}

impl Accumulator {
    pub fn add(&mut self, nll: f64) {
        self.nll += nll;
        self.nll2 += nll * nll;
        self.count += 1;
    }

    /// The estimate over what has been added; `None` before two tokens.
    pub fn estimate(&self) -> Option<Estimate> {
        if self.count < MIN_SCORED {
            return None;
        }
        let n = self.count as f64;
        let mean = self.nll / n;
        let ppl = mean.exp();
        // Rounding can take the variance of near-equal values a hair below zero.
        let variance = (self.nll2 / n - mean * mean).max(0.0);
        Some(Estimate {
            ppl,
            error: (variance / (n - 1.0)).sqrt() * ppl,
            tokens: self.count,
        })
    }
}

/// Measures `tokens` on `engine`, whose context must hold `plan.ctx` tokens. `bos` is the token
/// that replaces each chunk's first, when the vocabulary adds one. `on_chunk` gets the chunk's
/// index and the running estimate after it.
pub fn measure(
    engine: &mut dyn Engine,
    tokens: &[u32],
    plan: Plan,
    bos: Option<u32>,
    mut on_chunk: impl FnMut(usize, Estimate),
) -> Result<Estimate, PerplexityError> {
    let vocab = engine.config().vocab;
    let first = plan.first_scored();
    let mut sums = Accumulator::default();
    for (chunk, window) in tokens.chunks_exact(plan.ctx).take(plan.chunks).enumerate() {
        let mut input = window.to_vec();
        if let Some(bos) = bos {
            input[0] = bos;
        }
        let eval = |source| PerplexityError::Eval {
            chunk: chunk + 1,
            source,
        };
        engine.reset();
        // Only the scored half needs its logits back.
        engine.eval(&input[..first], false).map_err(eval)?;
        let logits = engine.eval(&input[first..], true).map_err(eval)?;
        for (row, &next) in logits.chunks_exact(vocab).zip(&window[first + 1..]) {
            sums.add(token_nll(row, next));
        }
        if let Some(estimate) = sums.estimate() {
            on_chunk(chunk, estimate);
        }
    }
    // The plan scores at least MIN_SCORED tokens in its one or more chunks.
    sums.estimate().ok_or(PerplexityError::TextTooShort {
        tokens: tokens.len(),
        ctx: plan.ctx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nll_of_a_uniform_distribution_is_log_vocab() {
        let logits = [3.0_f32; 8];
        assert!((token_nll(&logits, 5) - 8f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn nll_is_the_negative_log_softmax() {
        let logits = [1.0_f32, 2.0, 0.5, -1.0];
        let z: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
        let expected = -(2.0f64.exp() / z).ln();
        assert!((token_nll(&logits, 1) - expected).abs() < 1e-6);
    }

    #[test]
    fn estimate_is_exp_mean_with_the_delta_method_error() {
        let mut sums = Accumulator::default();
        let values = [1.0, 2.0, 4.0];
        for v in values {
            sums.add(v);
        }
        let e = sums.estimate().unwrap();
        let mean = 7.0 / 3.0;
        let sample_var: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 3.0;
        assert!((e.ppl - f64::exp(mean)).abs() < 1e-12);
        assert!((e.error - (sample_var / 2.0).sqrt() * e.ppl).abs() < 1e-9);
        assert_eq!(e.tokens, 3);
    }

    #[test]
    fn one_token_gives_no_estimate() {
        let mut sums = Accumulator::default();
        sums.add(1.0);
        assert!(sums.estimate().is_none());
    }

    #[test]
    fn plan_counts_whole_chunks_and_scores_the_second_half() {
        let plan = Plan::new(1000, 128, None, 4096).unwrap();
        assert_eq!(plan.chunks, 7);
        assert_eq!(plan.first_scored(), 64);
        assert_eq!(plan.scored_per_chunk(), 63);
        assert_eq!(Plan::new(1000, 128, Some(3), 4096).unwrap().chunks, 3);
        assert_eq!(Plan::new(1000, 128, Some(30), 4096).unwrap().chunks, 7);
    }

    #[test]
    fn plan_refuses_what_cannot_be_measured() {
        assert!(matches!(
            Plan::new(100, 128, None, 4096),
            Err(PerplexityError::TextTooShort {
                tokens: 100,
                ctx: 128
            })
        ));
        assert!(matches!(
            Plan::new(10_000, 8192, None, 4096),
            Err(PerplexityError::ContextTooLong { .. })
        ));
        assert!(matches!(
            Plan::new(100, 4, None, 4096),
            Err(PerplexityError::ChunkTooSmall { min_ctx: 5, .. })
        ));
        assert!(Plan::new(100, 5, None, 4096).is_ok());
    }
}
