//! The prefix cache around the generation loop of `run` and `chat` ([`crate::generate`]):
//! restore the longest kept state whose tokens begin the prompt, prefill the rest (keeping a
//! snapshot at each message boundary and before the prompt's last token, where a next turn that
//! repeats this prompt picks up), generate, then keep the state after the reply, keyed by the
//! tokens it holds.

use crate::generate::{Limits, StopReason};
use crate::model::{Engine, ModelError};
use crate::prefix_cache::{prefill_boundaries, PrefixCache};
use crate::sample::{Sampler, SamplerConfig};
use crate::tokenizer::Tokenizer;
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;

/// What the text consumer wants after a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// A stop string was reached.
    Stop,
    /// The client has gone, or the server is stopping.
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
    mut on_text: impl FnMut(&str) -> Flow,
) -> Result<Outcome, ModelError> {
    let prompt = request.prompt;
    let before_last = prompt.len().checked_sub(1).ok_or(ModelError::EmptyInput)?;
    let mut boundaries = request.boundaries.to_vec();
    boundaries.push(before_last);
    let prefilled = prefill_boundaries(engine, cache, prompt, &boundaries)?;

    let mut history = prompt[..prefilled.position].to_vec();
    let mut declined = Flow::Continue;
    // The server stops a generation through `on_text` (see `worker`), never by interrupt.
    let never = AtomicBool::new(false);
    let generation = crate::generate::generate(
        engine,
        tokenizer,
        &mut Sampler::new(request.sampling),
        &prompt[prefilled.position..],
        &mut history,
        Limits {
            max_new_tokens: request.max_tokens.unwrap_or(usize::MAX),
            interrupt: &never,
        },
        |piece| match on_text(piece) {
            Flow::Continue => ControlFlow::Continue(()),
            flow => {
                declined = flow;
                ControlFlow::Break(())
            }
        },
    )?;
    let finish = match generation.stop {
        StopReason::EndOfGeneration(_) => Finish::Stop,
        StopReason::Budget | StopReason::ContextFull => Finish::Length,
        StopReason::Declined if declined == Flow::Stop => Finish::Stop,
        StopReason::Declined | StopReason::Interrupted => Finish::Cancelled,
    };
    if let StopReason::EndOfGeneration(token) = generation.stop {
        history.push(token);
    }
    // The state holds the prompt and the tokens chosen so far, the last one fed or not.
    if cache.budget_bytes() > 0 && engine.position() > prompt.len() {
        if let Some(held) = history.get(..engine.position()) {
            cache.insert(held.to_vec(), engine.snapshot()?);
        }
    }
    Ok(Outcome {
        finish,
        prompt_tokens: prompt.len(),
        cached_tokens: prefilled.cached,
        completion_tokens: generation.decode_tokens,
    })
}
