//! The server's generation loop, the one place where a request's tokens are produced: restore
//! the longest cached prefix, prefill the rest (keeping snapshots at message boundaries and at
//! the end of the prompt), then sample and feed one token at a time through the engine's public
//! API. After the reply, the state is kept once more, keyed by every token it holds.

use crate::model::{Engine, ModelError};
use crate::prefix_cache::{prefill_boundaries, PrefixCache};
use crate::sample::{Sampler, SamplerConfig};
use crate::tokenizer::{StreamDecoder, Tokenizer};
use std::sync::atomic::{AtomicBool, Ordering};

/// What the text consumer wants after a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// A stop string was reached.
    Stop,
    /// The client has gone.
    Cancel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token or a stop string.
    Stop,
    /// The token budget or the context ran out.
    Length,
    /// The client went away, or the server is stopping.
    Cancelled,
}

impl Finish {
    pub fn reason(self) -> &'static str {
        match self {
            Finish::Stop | Finish::Cancelled => "stop",
            Finish::Length => "length",
        }
    }
}

pub struct Request<'a> {
    pub prompt: &'a [u32],
    /// Token counts where a message ends (where a snapshot is worth keeping).
    pub boundaries: &'a [usize],
    pub sampling: SamplerConfig,
    pub max_tokens: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub finish: Finish,
    pub prompt_tokens: usize,
    /// Prompt tokens whose state came from the cache.
    pub cached_tokens: usize,
    pub completion_tokens: usize,
}

/// Generates a reply to `request`, handing text to `on_text` as it becomes valid UTF-8.
pub fn generate(
    engine: &mut dyn Engine,
    cache: &mut PrefixCache,
    tokenizer: &Tokenizer,
    request: Request<'_>,
    stopping: &AtomicBool,
    mut on_text: impl FnMut(&str) -> Flow,
) -> Result<Outcome, ModelError> {
    let prompt = request.prompt;
    let prefilled = prefill_boundaries(engine, cache, prompt, request.boundaries)?;
    let mut logits = engine.eval(&prompt[prefilled.position..], false)?;
    let keep_states = cache.budget_bytes() > 0;
    if keep_states {
        cache.insert(prompt.to_vec(), engine.snapshot()?);
    }

    let mut sampler = Sampler::new(request.sampling);
    let mut history = prompt.to_vec();
    let mut decoder = StreamDecoder::new(tokenizer);
    let mut generated = 0;
    let finish = loop {
        if stopping.load(Ordering::SeqCst) {
            break Finish::Cancelled;
        }
        let next = sampler.sample(&logits, &history);
        if tokenizer.is_eos(next) {
            break Finish::Stop;
        }
        generated += 1;
        history.push(next);
        match on_text(&decoder.push(next)) {
            Flow::Continue => {}
            Flow::Stop => break Finish::Stop,
            Flow::Cancel => break Finish::Cancelled,
        }
        if request.max_tokens.is_some_and(|max| generated >= max)
            || engine.position() >= engine.context_len()
        {
            break Finish::Length;
        }
        logits = engine.eval(&[next], false)?;
    };
    if finish != Finish::Cancelled {
        on_text(&decoder.finish());
    }
    if keep_states && engine.position() > prompt.len() {
        // The state holds the prompt and every generated token but the last (never fed).
        cache.insert(history[..engine.position()].to_vec(), engine.snapshot()?);
    }
    Ok(Outcome {
        finish,
        prompt_tokens: prompt.len(),
        cached_tokens: prefilled.cached,
        completion_tokens: generated,
    })
}
