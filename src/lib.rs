//! qwen35: an inference engine for the Qwen3.5 / Qwen3.6 hybrid family (GGUF arch `qwen35`).
//!
//! The model is written once ([`model::forward`]) against the narrow op set of
//! [`backend::Backend`]; backends implement ops and own no model logic.

pub mod backend;
pub mod bench;
pub mod chat;
pub mod compare;
pub mod convert;
pub mod generate;
pub mod gguf;
pub mod model;
pub mod npy;
pub mod perplexity;
pub mod prefix_cache;
pub mod quant;
pub mod sample;
pub mod serve;
pub mod state_file;
pub mod synth;
pub mod tokenizer;
pub mod units;
