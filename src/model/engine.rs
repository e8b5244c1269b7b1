//! The engine the CLI drives: one sequence's state on one backend, fed tokens, returning logits.

use std::str::FromStr;
use std::sync::Arc;

use super::config::Config;
use super::forward::{forward, SkipLayers, Tokens};
use super::state::{Snapshot, State};
use super::weights::Weights;
use super::ModelError;
use crate::backend::cpu::{CpuBackend, CpuMode};
use crate::backend::gpu::Wgpu;
use crate::backend::metal::Metal;
use crate::backend::{Backend, BackendStats, OpTiming};
use crate::gguf::GgufFile;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The exact f32 reference.
    Cpu,
    /// The CPU with 8-bit activations in the K-quant and Q8_0 matmuls (faster, not exact).
    CpuFast,
    Wgpu,
    Metal,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::CpuFast => "cpu-fast",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Metal => "metal",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<BackendKind, ModelError> {
        match s {
            "cpu" => Ok(BackendKind::Cpu),
            "cpu-fast" => Ok(BackendKind::CpuFast),
            "wgpu" => Ok(BackendKind::Wgpu),
            "metal" => Ok(BackendKind::Metal),
            other => Err(ModelError::UnknownBackend(other.to_string())),
        }
    }
}

pub trait Engine: Send {
    fn config(&self) -> &Config;
    /// Tokens consumed so far.
    fn position(&self) -> usize;
    fn context_len(&self) -> usize;
    /// Feeds `tokens` and returns the last token's logits ([vocab]) or, with `all_logits`, every
    /// token's ([n·vocab], token-major). Fails with `ContextFull` before touching the state when
    /// the tokens do not fit.
    fn eval(&mut self, tokens: &[u32], all_logits: bool) -> Result<Vec<f32>, ModelError>;
    /// Greedy decoding from `first`: feeds it, then each token chosen (the argmax of the
    /// logits, taken on the backend), at most `n` steps. The next step is queued on the backend
    /// before the previous token has reached the host, so a GPU never waits for this loop.
    /// `on_token` gets each chosen token and returns false to stop. Returns the chosen tokens;
    /// every one of them has been fed except, after `n` steps, the last.
    fn decode_greedy(
        &mut self,
        first: u32,
        n: usize,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<Vec<u32>, ModelError>;
    /// Back to an empty sequence.
    fn reset(&mut self);
    /// A host copy of the state; fails only when the backend cannot read it back.
    fn snapshot(&self) -> Result<Snapshot, ModelError>;
    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), ModelError>;
    /// Turns the backend's per-op-class timing on or off.
    fn set_profiling(&mut self, on: bool);
    /// The backend's counters since the last call, which resets them.
    fn take_stats(&mut self) -> BackendStats;
    /// Leaves out the bodies of one kind of layer from now on (benchmarking only: the logits
    /// are wrong unless `skip` is `SkipLayers::None`).
    fn set_skip(&mut self, skip: SkipLayers);
}

/// Loads the model in `file` onto `backend` with a context of `ctx` tokens (0: the trained
/// context); `threads` sizes the CPU pool (0: one per core).
pub fn load_engine(
    file: Arc<GgufFile>,
    backend: BackendKind,
    threads: usize,
    ctx: usize,
) -> Result<Box<dyn Engine>, ModelError> {
    let config = Config::from_gguf(&file)?;
    match backend {
        BackendKind::Cpu | BackendKind::CpuFast => {
            let mode = if backend == BackendKind::CpuFast {
                CpuMode::Fast
            } else {
                CpuMode::Exact
            };
            let cpu = CpuBackend::with_options(threads, mode).map_err(|e| {
                ModelError::BackendUnavailable {
                    backend: backend.name(),
                    reason: e.to_string(),
                }
            })?;
            Ok(Box::new(Session::new(cpu, &file, config, ctx)?))
        }
        BackendKind::Wgpu => {
            let gpu = Wgpu::new().map_err(|e| ModelError::BackendUnavailable {
                backend: "wgpu",
                reason: e.to_string(),
            })?;
            Ok(Box::new(Session::new(gpu, &file, config, ctx)?))
        }
        BackendKind::Metal => {
            let metal = Metal::new().map_err(|e| ModelError::BackendUnavailable {
                backend: "metal",
                reason: e.to_string(),
            })?;
            Ok(Box::new(Session::new(metal, &file, config, ctx)?))
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
    skip: SkipLayers,
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
            skip: SkipLayers::None,
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
            skip,
            ..
        } = self;
        backend.run(|| forward(backend, config, weights, state, tokens, all, *skip))
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
        self.skip = skip;
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

    fn decode_greedy(
        &mut self,
        first: u32,
        n: usize,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<Vec<u32>, ModelError> {
        self.check_input(n, &[first])?;
        let mut chosen = Vec::with_capacity(n);
        if n == 0 {
            return Ok(chosen);
        }
        let mut in_flight = std::collections::VecDeque::with_capacity(2);
        let logits = self.forward(Tokens::Host(&[first]), false)?;
        let mut ids = self.backend.argmax(&logits)?;
        in_flight.push_back(self.backend.start_read(&ids));
        for step in 1..=n {
            // Queue the next step on the id still on the backend, then learn the previous one.
            if step < n {
                let logits = self.forward(Tokens::OnBackend(&ids), false)?;
                ids = self.backend.argmax(&logits)?;
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

    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), ModelError> {
        self.state.restore(&self.backend, snapshot)
    }
}
