//! The engine the CLI drives: one sequence's state on one backend, fed tokens, returning logits.

use std::sync::Arc;

use super::config::Config;
use super::forward::{forward, Tokens};
use super::state::{Snapshot, State};
use super::weights::{Mixer, Weights};
use super::ModelError;
use crate::backend::cpu::{CpuBackend, CpuMode};
use crate::backend::gpu::{GpuError, Wgpu};
use crate::backend::metal::{self, MetalError};
use crate::backend::{Backend, BackendKind, BackendOptions, BackendStats, OpTiming};
use crate::gguf::GgufFile;
use crate::sample::Sampler;

pub trait Engine: Send {
    fn config(&self) -> &Config;
    /// Tokens consumed so far.
    fn position(&self) -> usize;
    fn context_len(&self) -> usize;
    /// Feeds `tokens` and returns the last token's logits ([vocab]) or, with `all_logits`, every
    /// token's ([n·vocab], token-major). Fails with `ContextFull` before touching the state when
    /// the tokens do not fit.
    fn eval(&mut self, tokens: &[u32], all_logits: bool) -> Result<Vec<f32>, ModelError>;
    /// Decoding from `first`: feeds it, then each token chosen (on the backend, as `choice`
    /// says), at most `n` steps. The next step is queued on the backend before the previous
    /// token has reached the host, so a GPU never waits for this loop. `on_token` gets each
    /// chosen token and returns false to stop. Returns the chosen tokens; every one of them has
    /// been fed except, after `n` steps, the last.
    fn decode(
        &mut self,
        first: u32,
        n: usize,
        choice: TokenChoice<'_>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<Vec<u32>, ModelError>;
    /// [`Engine::decode`] choosing the argmax of the logits.
    fn decode_greedy(
        &mut self,
        first: u32,
        n: usize,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<Vec<u32>, ModelError> {
        self.decode(first, n, TokenChoice::Greedy, on_token)
    }
    /// Back to an empty sequence.
    fn reset(&mut self);
    /// A host copy of the state; fails only when the backend cannot read it back.
    fn snapshot(&self) -> Result<Snapshot, ModelError>;
    /// Puts a snapshot's state back, uploaded when this returns.
    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), ModelError>;
    /// Turns the backend's per-op-class timing on or off.
    fn set_profiling(&mut self, on: bool);
    /// The backend's counters since the last call, which resets them.
    fn take_stats(&mut self) -> BackendStats;
    /// Leaves out the token mixing of the layers `skip` names from now on (benchmarking only:
    /// the logits are wrong unless `skip` is `SkipLayers::None`).
    fn set_skip(&mut self, skip: SkipLayers);
}

/// Layers whose token mixing is not run, for timing the rest (`qwen35 bench --skip` and
/// `--ladder`): their projections, output projection and MLP still run. Anything but `None`
/// gives wrong logits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SkipLayers {
    #[default]
    None,
    DeltaNet,
    Attention,
    /// Both kinds: what is left is the matrix products, norms and activations.
    Both,
}

impl SkipLayers {
    fn skips<B: Backend>(self, mixer: &Mixer<B>) -> bool {
        matches!(
            (self, mixer),
            (SkipLayers::DeltaNet | SkipLayers::Both, Mixer::DeltaNet(_))
                | (
                    SkipLayers::Attention | SkipLayers::Both,
                    Mixer::Attention(_)
                )
        )
    }
}

/// How [`Engine::decode`] chooses each token.
pub enum TokenChoice<'a> {
    /// The argmax of the logits.
    Greedy,
    /// The choice of [`Sampler::sample`], made on the backend with the sampler's settings and
    /// generator; `history` holds the tokens so far, `first` included (for the repeat penalty).
    Sampled {
        sampler: &'a mut Sampler,
        history: &'a [u32],
    },
}

/// The state of [`TokenChoice`] through one [`Engine::decode`]: for a draw or a repeat penalty,
/// the recent ids on the backend and the row the next id goes to.
struct Chooser<'a, T> {
    sampled: Option<(&'a mut Sampler, T)>,
    next_slot: usize,
}

impl<'a, T> Chooser<'a, T> {
    fn new<B: Backend<Tensor = T>>(
        backend: &B,
        choice: TokenChoice<'a>,
    ) -> Result<Chooser<'a, T>, ModelError> {
        match choice {
            TokenChoice::Sampled { sampler, history } if !sampler.is_argmax() => {
                let window = sampler.config().repeat_window.max(1);
                let tail = &history[history.len().saturating_sub(window)..];
                let mut ids: Vec<f32> = tail.iter().map(|&t| t as f32).collect();
                ids.resize(window, -1.0);
                let recent = backend.upload(window, 1, &ids)?;
                Ok(Chooser {
                    sampled: Some((sampler, recent)),
                    next_slot: tail.len() % window,
                })
            }
            _ => Ok(Chooser {
                sampled: None,
                next_slot: 0,
            }),
        }
    }

    /// The id chosen from `logits`, left on the backend.
    fn choose<B: Backend<Tensor = T>>(
        &mut self,
        backend: &B,
        mut logits: T,
    ) -> Result<T, ModelError> {
        match &mut self.sampled {
            Some((sampler, recent)) => {
                let draw = sampler.next_draw();
                let id = backend.sample(&mut logits, recent, self.next_slot, &draw)?;
                self.next_slot = (self.next_slot + 1) % backend.dims(recent).0;
                Ok(id)
            }
            None => Ok(backend.argmax(&logits)?),
        }
    }
}

/// Loads the model in `file` onto `backend` with a context of `ctx` tokens (0: the trained
/// context); `threads` sizes the CPU pool (0: one per core); the GPU backends as by default.
pub fn load_engine(
    file: Arc<GgufFile>,
    backend: BackendKind,
    threads: usize,
    ctx: usize,
) -> Result<Box<dyn Engine>, ModelError> {
    let options = BackendOptions {
        threads,
        ..BackendOptions::default()
    };
    load_engine_with(file, backend, &options, ctx)
}

/// [`load_engine`] with the backend set up by `options`.
pub fn load_engine_with(
    file: Arc<GgufFile>,
    backend: BackendKind,
    options: &BackendOptions,
    ctx: usize,
) -> Result<Box<dyn Engine>, ModelError> {
    let config = Config::from_gguf(&file)?;
    let unavailable = |reason: String| ModelError::BackendUnavailable {
        backend: backend.name(),
        reason,
    };
    let failed = |reason: String| ModelError::BackendFailed {
        backend: backend.name(),
        reason,
    };
    match backend {
        BackendKind::Cpu | BackendKind::CpuFast => {
            let mode = if backend == BackendKind::CpuFast {
                CpuMode::Fast
            } else {
                CpuMode::Exact
            };
            let cpu = CpuBackend::with_options(options.threads, mode)
                .map_err(|e| failed(e.to_string()))?;
            Ok(Box::new(Session::new(cpu, &file, config, ctx)?))
        }
        BackendKind::Wgpu => {
            let gpu = Wgpu::with_options(&options.gpu).map_err(|e| match e {
                GpuError::NoAdapter(_) => unavailable(e.to_string()),
                _ => failed(e.to_string()),
            })?;
            Ok(Box::new(Session::new(gpu, &file, config, ctx)?))
        }
        BackendKind::Metal => {
            let gpu = metal::open(&options.gpu).map_err(|e| match e {
                MetalError::NoMetalAdapter { .. } => unavailable(e.to_string()),
                _ => failed(e.to_string()),
            })?;
            Ok(Box::new(Session::new(gpu, &file, config, ctx)?))
        }
    }
}

/// The profile class of the logits readbacks, before any.
fn no_readbacks() -> OpTiming {
    OpTiming {
        class: "readback".into(),
        ..OpTiming::default()
    }
}

/// One sequence on one backend.
pub struct Session<B: Backend> {
    backend: B,
    config: Config,
    weights: Weights<B>,
    state: State<B>,
    /// With profiling on, the logits readbacks, timed apart from the forward they wait for.
    readback: Option<OpTiming>,
}

impl<B: Backend> Session<B> {
    pub fn new(
        backend: B,
        file: &Arc<GgufFile>,
        config: Config,
        ctx: usize,
    ) -> Result<Session<B>, ModelError> {
        let weights = Weights::load(file, &config, &backend)?;
        let ctx = if ctx == 0 { config.train_context } else { ctx };
        let kv_row_bytes = config.n_kv_head * config.head_dim * std::mem::size_of::<f32>();
        if ctx
            .checked_mul(kv_row_bytes)
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(ModelError::ContextTooLarge { ctx });
        }
        let state = State::new(&backend, &config, ctx);
        backend
            .status()
            .map_err(|source| ModelError::StateAllocation { ctx, source })?;
        Ok(Session {
            backend,
            config,
            weights,
            state,
            readback: None,
        })
    }
}

impl<B: Backend> Session<B> {
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Fails before touching the state when `count` more tokens do not fit or an id is not in
    /// the vocabulary.
    fn check_input(&self, count: usize, tokens: &[u32]) -> Result<(), ModelError> {
        let needed = self.state.position + count;
        if needed > self.state.context_len {
            return Err(ModelError::ContextFull {
                needed,
                ctx: self.state.context_len,
            });
        }
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= self.config.vocab) {
            return Err(ModelError::TokenOutOfRange {
                token,
                vocab: self.config.vocab,
            });
        }
        Ok(())
    }

    fn forward(
        &mut self,
        tokens: Tokens<'_, B::Tensor>,
        all: bool,
    ) -> Result<B::Tensor, ModelError> {
        let Session {
            backend,
            config,
            weights,
            state,
            ..
        } = self;
        backend.run(|| forward(backend, config, weights, state, tokens, all))
    }
}

impl<B: Backend> Engine for Session<B> {
    fn set_profiling(&mut self, on: bool) {
        self.backend.set_profiling(on);
        self.readback = on.then(no_readbacks);
    }

    fn take_stats(&mut self) -> BackendStats {
        let mut stats = self.backend.take_stats();
        if let Some(readback) = self.readback.as_mut().filter(|r| r.calls > 0) {
            stats.ops.push(std::mem::replace(readback, no_readbacks()));
        }
        stats
    }

    fn set_skip(&mut self, skip: SkipLayers) {
        for layer in &mut self.weights.layers {
            layer.skip_mixing = skip.skips(&layer.mixer);
        }
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn position(&self) -> usize {
        self.state.position
    }

    fn context_len(&self) -> usize {
        self.state.context_len
    }

    fn eval(&mut self, tokens: &[u32], all_logits: bool) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::EmptyInput);
        }
        self.check_input(tokens.len(), tokens)?;
        let logits = self.forward(Tokens::Host(tokens), all_logits)?;
        let rows = self.backend.dims(&logits).0;
        let logits = match &mut self.readback {
            Some(readback) => {
                self.backend.synchronize();
                let started = std::time::Instant::now();
                let values = self.backend.read_rows(&logits, 0, rows);
                readback.seconds += started.elapsed().as_secs_f64();
                readback.calls += 1;
                readback.bytes_read += std::mem::size_of_val(values.as_slice()) as u64;
                values
            }
            None => self.backend.read_rows(&logits, 0, rows),
        };
        self.backend.status()?;
        Ok(logits)
    }

    fn decode(
        &mut self,
        first: u32,
        n: usize,
        choice: TokenChoice<'_>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<Vec<u32>, ModelError> {
        self.check_input(n, &[first])?;
        let mut chosen = Vec::with_capacity(n);
        if n == 0 {
            return Ok(chosen);
        }
        let mut chooser = Chooser::new(&self.backend, choice)?;
        let mut in_flight = std::collections::VecDeque::with_capacity(2);
        let logits = self.forward(Tokens::Host(&[first]), false)?;
        let mut ids = chooser.choose(&self.backend, logits)?;
        in_flight.push_back(self.backend.start_read(&ids));
        for step in 1..=n {
            // Queue the next step on the id still on the backend, then learn the previous one.
            if step < n {
                let logits = self.forward(Tokens::OnBackend(&ids), false)?;
                ids = chooser.choose(&self.backend, logits)?;
                in_flight.push_back(self.backend.start_read(&ids));
            }
            let Some(read) = in_flight.pop_front() else {
                break;
            };
            let values = match &mut self.readback {
                // Profiling: the wait is timed alone, after the queued work has finished.
                Some(readback) => {
                    self.backend.synchronize();
                    let started = std::time::Instant::now();
                    let values = read.wait();
                    readback.seconds += started.elapsed().as_secs_f64();
                    readback.calls += 1;
                    readback.bytes_read += std::mem::size_of_val(values.as_slice()) as u64;
                    values
                }
                None => read.wait(),
            };
            let token = match values.first() {
                Some(&id) if id >= 0.0 && (id as usize) < self.config.vocab => id as u32,
                // A failed read yields no id: the device's error says why.
                _ => {
                    self.backend.status()?;
                    return Err(ModelError::NoTokenRead);
                }
            };
            chosen.push(token);
            if !on_token(token) {
                break;
            }
        }
        Ok(chosen)
    }

    fn reset(&mut self) {
        self.state.reset(&self.backend);
    }

    fn snapshot(&self) -> Result<Snapshot, ModelError> {
        let snapshot = self.state.snapshot(&self.backend);
        self.backend.status()?;
        Ok(snapshot)
    }

    /// Waits for the upload, so that it is neither charged to the next step (a benchmark's
    /// timed decode at depth) nor its error deferred to it.
    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), ModelError> {
        self.state.restore(&self.backend, snapshot)?;
        self.backend.synchronize();
        self.backend.status()?;
        Ok(())
    }
}
