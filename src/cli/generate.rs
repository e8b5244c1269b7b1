//! The generation loop shared by `run` and `chat`: prefill the prompt, then sample and decode
//! one token at a time, streaming text as it becomes valid UTF-8.

use qwen35::model::Engine;
use qwen35::sample::Sampler;
use qwen35::tokenizer::{StreamDecoder, Tokenizer};
use qwen35::units::count;
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
        }
    }
}

pub struct Limits<'a> {
    pub max_new_tokens: usize,
    pub interrupt: &'a AtomicBool,
}

/// Feeds `prompt` (must be non-empty) and generates until a stop condition; `history` holds the
/// tokens the repeat penalty may look at and grows with the reply.
pub fn generate(
    engine: &mut dyn Engine,
    tokenizer: &Tokenizer,
    sampler: &mut Sampler,
    prompt: &[u32],
    history: &mut Vec<u32>,
    limits: Limits,
    mut on_text: impl FnMut(&str),
) -> anyhow::Result<Generation> {
    let started = Instant::now();
    let mut logits = engine.eval(prompt, false)?;
    let prefill_secs = started.elapsed().as_secs_f64();
    history.extend_from_slice(prompt);

    let mut decoder = StreamDecoder::new(tokenizer);
    let mut tokens = Vec::new();
    let decode_started = Instant::now();
    let stop = loop {
        if limits.interrupt.swap(false, Ordering::SeqCst) {
            break StopReason::Interrupted;
        }
        let next = sampler.sample(&logits, history);
        if tokenizer.eos_ids().contains(&next) {
            break StopReason::EndOfGeneration(next);
        }
        on_text(&decoder.push(next));
        tokens.push(next);
        history.push(next);
        if tokens.len() >= limits.max_new_tokens {
            break StopReason::Budget;
        }
        if engine.position() >= engine.context_len() {
            break StopReason::ContextFull;
        }
        logits = engine.eval(&[next], false)?;
    };
    on_text(&decoder.finish());
    Ok(Generation {
        decode_tokens: tokens.len(),
        stop,
        prefill_tokens: prompt.len(),
        prefill_secs,
        decode_secs: decode_started.elapsed().as_secs_f64(),
    })
}
