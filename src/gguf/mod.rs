//! The GGUF container (ggml `docs/gguf.md`; QWEN35.md §7.1): versions 2 and 3, little-endian.
//!
//! [`GgufFile`] maps a file and parses only its header, metadata and tensor infos; tensor data is
//! handed out as zero-copy slices of the mapping. Every count, length, shape and offset in the file
//! is checked before it is trusted, and every failure is a [`GgufError`] that says what was wrong
//! and where (byte offset, metadata key or tensor name).
//!
//! [`GgufWriter`] produces files for fixtures and synthetic models: the layout is declared up
//! front and tensor data is streamed afterwards, so a model never has to fit in memory.

mod cursor;
mod error;
mod format;
mod metadata;
mod parse;
mod reader;
mod tensor;
mod value;
mod writer;

pub use error::GgufError;
pub use format::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_DIMS};
pub use reader::GgufFile;
pub use tensor::TensorInfo;
pub use value::{MetaArray, MetaValue, ValueType};
pub use writer::{GgufWriter, TensorDataWriter};
