//! The model's thread: requests queue on a channel and are served one at a time; each sends its
//! reply back as events. A client that goes away (its event receiver dropped) stops its
//! generation at the next token, and a panic in one request is reported to that request only.

use super::error::ApiError;
use super::generate::{generate, Finish, Flow, Outcome, Request};
use super::text::{ReasoningSplitter, Split, StopMatcher};
use super::{PanicSite, PlantedPanic};
use crate::model::Engine;
use crate::prefix_cache::PrefixCache;
use crate::sample::SamplerConfig;
use crate::state_file::PromptCacheFile;
use crate::tokenizer::Tokenizer;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use tokio::sync::mpsc as events;

/// Events a request's reply is sent as.
#[derive(Debug)]
pub enum Event {
    Delta(Split),
    Done(Outcome),
    Failed(ApiError),
}

pub struct Job {
    pub prompt: Vec<u32>,
    pub boundaries: Vec<usize>,
    pub sampling: SamplerConfig,
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    /// Whether the prompt opened a reasoning block; `None`: no reasoning split (completions).
    pub reasoning: Option<bool>,
    pub events: events::Sender<Event>,
}

/// Events buffered per request before the model waits for a slow client.
pub const EVENT_BUFFER: usize = 64;

pub struct Worker {
    pub engine: Box<dyn Engine>,
    pub tokenizer: Arc<Tokenizer>,
    pub cache: PrefixCache,
    /// Set when the server stops: running generations end at the next token.
    pub stopping: Arc<AtomicBool>,
    /// Where the state used last is saved when the server stops.
    pub prompt_cache: Option<PromptCacheFile>,
    pub planted: Arc<PlantedPanic>,
}

impl Worker {
    /// Serves jobs until every sender is gone.
    pub fn run(mut self, jobs: mpsc::Receiver<Job>) {
        for job in jobs {
            if job.events.is_closed() {
                continue;
            }
            let events = job.events.clone();
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| self.serve(job)));
            let failure = match result {
                Ok(Ok(outcome)) => {
                    if outcome.finish == Finish::Cancelled {
                        log::info!(
                            "request cancelled after {} tokens",
                            outcome.completion_tokens
                        );
                    }
                    let _ = events.blocking_send(Event::Done(outcome));
                    continue;
                }
                Ok(Err(error)) => error,
                Err(panic) => {
                    // The state may be half-written: start clean.
                    self.engine.reset();
                    self.cache = PrefixCache::new(self.cache.budget_bytes());
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    log::error!("a request panicked: {what}");
                    ApiError::internal(format!("the request failed inside the server: {what}"))
                }
            };
            let _ = events.blocking_send(Event::Failed(failure));
        }
        if let Some(file) = &self.prompt_cache {
            match file.save_from(&self.cache) {
                Ok(Some(count)) => {
                    log::info!("{count} tokens of state saved to {}", file.path.display())
                }
                Ok(None) => {}
                Err(e) => log::error!("saving the prompt cache: {e}"),
            }
        }
    }

    fn serve(&mut self, job: Job) -> Result<Outcome, ApiError> {
        let mut stops = StopMatcher::new(job.stop);
        let mut splitter = match job.reasoning {
            Some(opened) => ReasoningSplitter::new(opened),
            None => ReasoningSplitter::answer_only(),
        };
        let send = |split: Split| -> Flow {
            if job.events.is_closed() || self.stopping.load(Ordering::SeqCst) {
                return Flow::Cancel;
            }
            if !split.is_empty() && job.events.blocking_send(Event::Delta(split)).is_err() {
                return Flow::Cancel;
            }
            Flow::Continue
        };
        let request = Request {
            prompt: &job.prompt,
            boundaries: &job.boundaries,
            sampling: job.sampling,
            max_tokens: job.max_tokens,
        };
        let outcome = generate(
            self.engine.as_mut(),
            &mut self.cache,
            &self.tokenizer,
            request,
            |piece| {
                self.planted.fire(PanicSite::Model);
                let (text, hit) = stops.push(piece);
                match send(splitter.push(&text)) {
                    Flow::Continue if hit => Flow::Stop,
                    flow => flow,
                }
            },
        )
        .map_err(|e| ApiError::internal(format!("generation failed: {e}")))?;
        if outcome.finish != Finish::Cancelled {
            let mut rest = splitter.push(&stops.finish());
            let last = splitter.finish();
            rest.reasoning.push_str(&last.reasoning);
            rest.content.push_str(&last.content);
            send(rest);
        }
        Ok(outcome)
    }
}
