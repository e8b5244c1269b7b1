//! Time to first token for a long system prompt and a short question: cold (the whole prompt
//! prefilled) against restored (the state after the system prompt taken from the prefix cache,
//! only the question prefilled), as the server and `chat` serve a repeated system prompt.

use super::Spread;
use crate::model::{Engine, ModelError};
use crate::prefix_cache::{prefill_boundaries, PrefixCache};
use crate::sample::argmax;
use serde::Serialize;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct TtftOptions {
    pub system_tokens: usize,
    pub question_tokens: usize,
    pub repeats: usize,
    pub seed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TtftReport {
    pub system_tokens: usize,
    pub question_tokens: usize,
    /// Seconds from the request's tokens to the first token chosen, every run.
    pub cold_secs: Vec<f64>,
    pub restored_secs: Vec<f64>,
    pub cold: Spread,
    pub restored: Spread,
    /// The host memory the cached state after the system prompt takes.
    pub snapshot_bytes: usize,
    /// Prompt tokens the restored runs took from the cache (the system prompt's length).
    pub restored_tokens: usize,
}

/// Random token ids below `vocab`, from a fixed seed (xorshift: the prompt's content does not
/// change the work).
fn random_tokens(count: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % vocab as u64) as u32
        })
        .collect()
}

/// One request: from its tokens to the first token chosen, through the cache.
fn first_token(
    engine: &mut dyn Engine,
    cache: &mut PrefixCache,
    prompt: &[u32],
    boundary: usize,
) -> Result<(f64, usize), ModelError> {
    let started = Instant::now();
    let prefilled = prefill_boundaries(engine, cache, prompt, &[boundary])?;
    let logits = engine.eval(&prompt[prefilled.position..], false)?;
    argmax(&logits);
    Ok((started.elapsed().as_secs_f64(), prefilled.cached))
}

pub fn time_to_first_token(
    engine: &mut dyn Engine,
    options: &TtftOptions,
) -> Result<TtftReport, ModelError> {
    let vocab = engine.config().vocab;
    let system = random_tokens(options.system_tokens, vocab, options.seed);
    let mut cold_secs = Vec::new();
    let mut restored_secs = Vec::new();
    let mut snapshot_bytes = 0;
    let mut restored_tokens = 0;
    for run in 0..options.repeats {
        let question = random_tokens(
            options.question_tokens,
            vocab,
            options.seed + 1 + run as u64,
        );
        let prompt = [system.as_slice(), &question].concat();
        // Cold: an empty cache, the whole prompt prefilled (stopping at the system prompt's end
        // to keep its state, as a server does).
        let mut cache = PrefixCache::new(usize::MAX);
        let (secs, _) = first_token(engine, &mut cache, &prompt, system.len())?;
        cold_secs.push(secs);
        snapshot_bytes = cache.used_bytes();
        // Restored: the same system prompt with another question.
        let other = random_tokens(
            options.question_tokens,
            vocab,
            options.seed + 1000 + run as u64,
        );
        let prompt = [system.as_slice(), &other].concat();
        let (secs, cached) = first_token(engine, &mut cache, &prompt, system.len())?;
        restored_tokens = cached;
        restored_secs.push(secs);
    }
    Ok(TtftReport {
        system_tokens: options.system_tokens,
        question_tokens: options.question_tokens,
        cold: Spread::of(&cold_secs),
        restored: Spread::of(&restored_secs),
        cold_secs,
        restored_secs,
        snapshot_bytes,
        restored_tokens,
    })
}
