//! The engine the CLI drives: one sequence's state on one backend, fed tokens, returning logits.

use std::str::FromStr;
use std::sync::Arc;

use super::config::Config;
use super::forward::{forward, SkipLayers};
use super::state::{Snapshot, State};
use super::weights::Weights;
use super::ModelError;
use crate::backend::cpu::{CpuBackend, CpuMode};
use crate::backend::gpu::Wgpu;
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
        BackendKind::Metal => Err(ModelError::BackendUnavailable {
            backend: "metal",
            reason: "the Metal kernels are not built yet; use --backend wgpu (it runs on Metal \
                     through wgpu) or cpu"
                .into(),
        }),
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
        let needed = self.state.position + tokens.len();
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
        let logits = forward(
            &self.backend,
            &self.config,
            &self.weights,
            &mut self.state,
            tokens,
            all_logits,
            self.skip,
        )?;
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
