//! The generation loop of `run`, `chat` and `bench`'s run-path row: prefill the prompt, then
//! decode through [`Engine::decode`] (each token chosen on the backend, the next step queued
//! before the previous token is read), streaming text as it becomes valid UTF-8. The server
//! generates through it too, with its prefix cache around it (`serve::generate`).

use crate::model::{Engine, ModelError, TokenChoice};
use crate::sample::Sampler;
use crate::tokenizer::{StreamDecoder, Tokenizer};
use crate::units::count;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token (not fed back to the model).
    EndOfGeneration(u32),
    /// The token budget ran out.
    Budget,
    /// The context is full.
    ContextFull,
    /// The user interrupted (Ctrl-C).
    Interrupted,
    /// The text consumer wanted no more (the server: a stop sequence, or the client went away).
    Declined,
}

pub struct Generation {
    pub stop: StopReason,
    pub prefill_tokens: usize,
    pub prefill_secs: f64,
    pub decode_tokens: usize,
    pub decode_secs: f64,
}

impl Generation {
    pub fn speed_report(&self) -> String {
        let rate = |n: usize, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        format!(
            "prefill {} in {:.2} s ({:.2} tok/s), decode {} in {:.2} s ({:.2} tok/s)",
            count(self.prefill_tokens, "token"),
            self.prefill_secs,
            rate(self.prefill_tokens, self.prefill_secs),
            count(self.decode_tokens, "token"),
            self.decode_secs,
            rate(self.decode_tokens, self.decode_secs)
        )
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            StopReason::EndOfGeneration(token) => write!(f, "end of generation (token {token})"),
            StopReason::Budget => write!(f, "token limit (-n) reached"),
            StopReason::ContextFull => write!(f, "context full"),
            StopReason::Interrupted => write!(f, "interrupted"),
            StopReason::Declined => write!(f, "the reader wanted no more text"),
        }
    }
}

pub struct Limits<'a> {
    pub max_new_tokens: usize,
    pub interrupt: &'a AtomicBool,
}

/// Feeds `prompt` (must be non-empty) and generates until a stop condition; `history` holds the
/// tokens the repeat penalty may look at and grows with the prompt and the reply. `on_text` gets
/// the reply as it becomes valid UTF-8 and may break to stop it ([`StopReason::Declined`]).
///
/// Decoding runs a step ahead, so the last token chosen (an end-of-generation token included)
/// may have been fed as well: the engine's position tells how many tokens its state holds.
pub fn generate(
    engine: &mut dyn Engine,
    tokenizer: &Tokenizer,
    sampler: &mut Sampler,
    prompt: &[u32],
    history: &mut Vec<u32>,
    limits: Limits,
    mut on_text: impl FnMut(&str) -> ControlFlow<()>,
) -> Result<Generation, ModelError> {
    let (&last, earlier) = prompt.split_last().ok_or(ModelError::EmptyInput)?;
    let started = Instant::now();
    if !earlier.is_empty() {
        engine.eval(earlier, false)?;
    }
    let prefill_secs = started.elapsed().as_secs_f64();
    history.extend_from_slice(prompt);

    // `last` is the first decode step: each step feeds one token and chooses the next.
    let room = engine.context_len().saturating_sub(engine.position());
    let steps = limits.max_new_tokens.min(room);
    if steps == 0 {
        engine.eval(&[last], false)?;
    }
    let mut decoder = StreamDecoder::new(tokenizer);
    let mut stop = None;
    let mut reply = Vec::new();
    let decode_started = Instant::now();
    let choice = TokenChoice::Sampled {
        sampler,
        history: history.as_slice(),
    };
    engine.decode(last, steps, choice, &mut |token| {
        if tokenizer.eos_ids().contains(&token) {
            stop = Some(StopReason::EndOfGeneration(token));
            return false;
        }
        reply.push(token);
        if on_text(&decoder.push(token)).is_break() {
            stop = Some(StopReason::Declined);
            return false;
        }
        if limits.interrupt.swap(false, Ordering::SeqCst) {
            stop = Some(StopReason::Interrupted);
            return false;
        }
        true
    })?;
    let decode_secs = decode_started.elapsed().as_secs_f64();
    if stop != Some(StopReason::Declined) {
        // Whatever the consumer makes of the held-back tail, generation is over.
        let _ = on_text(&decoder.finish());
    }
    history.extend_from_slice(&reply);
    let stop = stop.unwrap_or(if steps < limits.max_new_tokens {
        StopReason::ContextFull
    } else {
        StopReason::Budget
    });
    Ok(Generation {
        decode_tokens: reply.len(),
        stop,
        prefill_tokens: earlier.len(),
        prefill_secs,
        decode_secs,
    })
}
