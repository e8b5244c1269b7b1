//! The qwen35 model: configuration, weights, per-sequence state, the forward pass written once
//! against [`crate::backend::Backend`], and the [`Engine`] the CLI drives.

pub mod config;
pub mod engine;
pub mod forward;
pub mod state;
pub mod weights;

pub use crate::backend::BackendKind;
pub use config::{Config, LayerKind};
pub use engine::{load_engine, load_engine_with, Engine, Session, SkipLayers, TokenChoice};
pub use state::Snapshot;

use crate::backend::BackendError;
use crate::gguf::GgufError;
use crate::quant::QuantError;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("general.architecture is {found:?}, expected \"qwen35\"")]
    WrongArch { found: String },
    #[error("{key}: {reason}")]
    InvalidConfig { key: String, reason: String },
    #[error("tensor {name} is missing")]
    MissingTensor { name: String },
    #[error("tensor {name} has shape {found:?}, expected {expected:?} (ggml ne order)")]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("tensor {name} has type {ty}, which this engine cannot compute with")]
    UnsupportedType { name: String, ty: String },
    #[error("tensor {name}: {source}")]
    Dequantize {
        name: String,
        #[source]
        source: QuantError,
    },
    #[error("tensor {name}: {source}")]
    Upload {
        name: String,
        #[source]
        source: BackendError,
    },
    /// This machine has no device for the backend (no adapter at all, or none of its kind).
    #[error("backend {backend} is unavailable: {reason}")]
    BackendUnavailable {
        backend: &'static str,
        reason: String,
    },
    /// The backend's device exists but could not be opened or set up.
    #[error("backend {backend} failed to start: {reason}")]
    BackendFailed {
        backend: &'static str,
        reason: String,
    },
    #[error("context full: {needed} tokens needed, context is {ctx}")]
    ContextFull { needed: usize, ctx: usize },
    #[error("a context of {ctx} tokens cannot be allocated")]
    ContextTooLarge { ctx: usize },
    #[error("allocating the state for a context of {ctx} tokens: {source}")]
    StateAllocation {
        ctx: usize,
        #[source]
        source: BackendError,
    },
    #[error("no tokens to evaluate")]
    EmptyInput,
    #[error("token {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange { token: u32, vocab: usize },
    #[error("layer {layer}: state does not match the layer's kind")]
    StateMismatch { layer: usize },
    #[error("snapshot does not fit this engine: {reason}")]
    SnapshotMismatch { reason: String },
    #[error("the backend returned no token id (a failed readback; the device may be lost)")]
    NoTokenRead,
    #[error(transparent)]
    Backend(#[from] BackendError),
}
