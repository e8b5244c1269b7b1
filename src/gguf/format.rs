//! Constants of the GGUF layout shared by the reader and the writer.

/// "GGUF" as it appears in the first four bytes.
pub(super) const MAGIC: [u8; 4] = *b"GGUF";

/// Versions 2 and 3 share one little-endian layout (v3 only added big-endian files, which carry
/// the version byte-swapped); version 1 used 32-bit counts and is not read.
pub(super) const SUPPORTED_VERSIONS: [u32; 2] = [2, 3];

/// The version [`super::GgufWriter`] writes unless told otherwise.
pub(super) const DEFAULT_VERSION: u32 = 3;

/// Metadata key that overrides the data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Data alignment when [`ALIGNMENT_KEY`] is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// ggml's GGML_MAX_DIMS: a tensor info may name at most this many dimensions.
pub const MAX_DIMS: usize = 4;

/// How deeply arrays may nest inside arrays. GGUF sets no limit, but each level costs the parser
/// a stack frame, so a crafted file of nothing but array headers could otherwise overflow it.
pub const MAX_ARRAY_DEPTH: usize = 8;
