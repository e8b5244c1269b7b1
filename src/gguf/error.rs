//! Everything that can be wrong with a GGUF file, or with a request made of one.

use crate::quant::GgmlType;

/// A GGUF failure. Messages name the byte offset, metadata key or tensor involved.
///
/// `offset: Option<u64>` fields are `Some` when the reader found the problem in a file and `None`
/// when the writer refused to produce it.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "not a GGUF file: bytes 0..4 are {}, expected \"GGUF\" (0x47 0x47 0x55 0x46)",
        hex_bytes(found)
    )]
    BadMagic { found: [u8; 4] },

    #[error("unsupported GGUF version {version} (at offset 4); versions 2 and 3 are read{}",
        big_endian_hint(*version))]
    UnsupportedVersion { version: u32 },

    #[error(
        "file truncated while reading {what} at offset {offset}: \
             {needed} bytes needed, {available} left"
    )]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        available: u64,
    },

    #[error(
        "{what} at offset {offset} claims {count} {unit}, which need at least {needed} bytes, \
             but only {available} bytes follow"
    )]
    CountTooLarge {
        what: String,
        offset: u64,
        count: u64,
        unit: &'static str,
        needed: u128,
        available: u64,
    },

    #[error("{what} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 { what: String, offset: u64 },

    #[error("key {key:?}: unknown value type {type_id} at offset {offset}")]
    UnknownValueType {
        key: String,
        offset: u64,
        type_id: u32,
    },

    #[error("key {key:?}: bool at offset {offset} is {byte}, expected 0 or 1")]
    InvalidBool { key: String, offset: u64, byte: u8 },

    #[error("key {key:?}: arrays nest deeper than {max} levels at offset {offset}")]
    ArrayTooDeep {
        key: String,
        offset: u64,
        max: usize,
    },

    #[error("duplicate metadata key {key:?}{}", at(offset))]
    DuplicateKey { key: String, offset: Option<u64> },

    #[error("{key} must be a non-zero power of two that fits in u32, found {found}",
        key = super::ALIGNMENT_KEY)]
    BadAlignment { found: String },

    #[error("metadata key {key:?} is missing")]
    MissingKey { key: String },

    #[error("metadata key {key:?} holds {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },

    #[error("metadata key {key:?} holds {value}, which does not fit in {target}")]
    OutOfRange {
        key: String,
        value: String,
        target: &'static str,
    },

    #[error("tensor {tensor:?}{}: unknown ggml type id {type_id}", at(&Some(*offset)))]
    UnknownGgmlType {
        tensor: String,
        offset: u64,
        type_id: u32,
    },

    #[error("tensor {tensor:?}{}: {n_dims} dimensions, at most {max} allowed",
        at(offset), max = super::MAX_DIMS)]
    TooManyDims {
        tensor: String,
        offset: Option<u64>,
        n_dims: u64,
    },

    #[error("tensor {tensor:?}{}: has a zero dimension, ne = {dims:?}", at(offset))]
    ZeroDim {
        tensor: String,
        offset: Option<u64>,
        dims: Vec<u64>,
    },

    #[error("tensor {tensor:?}{}: ne = {dims:?} of {} overflows the element count or byte size",
        at(offset), ggml_type.name())]
    SizeOverflow {
        tensor: String,
        offset: Option<u64>,
        dims: Vec<u64>,
        ggml_type: GgmlType,
    },

    #[error("tensor {tensor:?}{}: ne[0] = {ne0} is not a whole number of {} blocks of {}",
        at(offset), ggml_type.name(), ggml_type.block_elems())]
    NotWholeBlocks {
        tensor: String,
        offset: Option<u64>,
        ne0: u64,
        ggml_type: GgmlType,
    },

    #[error("duplicate tensor name {tensor:?}{}", at(offset))]
    DuplicateTensor { tensor: String, offset: Option<u64> },

    #[error(
        "tensor {tensor:?}: data offset {offset} (relative to the data section) \
             is not a multiple of the alignment {alignment}"
    )]
    MisalignedOffset {
        tensor: String,
        offset: u64,
        alignment: u64,
    },

    #[error(
        "tensor {tensor:?}: {n_bytes} bytes of data at file offset {start} (data section \
             offset {relative}) run past the end of the file ({file_size} bytes)"
    )]
    DataOutOfBounds {
        tensor: String,
        start: u128,
        relative: u64,
        n_bytes: u64,
        file_size: u64,
    },

    #[error(
        "tensors {first:?} (bytes {first_start}..{first_end}) and {second:?} \
             (from byte {second_start}) overlap"
    )]
    OverlappingTensors {
        first: String,
        first_start: u64,
        first_end: u64,
        second: String,
        second_start: u64,
    },

    #[error("tensor data written out of order: expected {expected}, got {got:?}")]
    TensorOutOfOrder { expected: String, got: String },

    #[error("tensor {tensor:?}: {declared} bytes declared, {written} bytes written")]
    DataSizeMismatch {
        tensor: String,
        declared: u64,
        written: u64,
    },

    #[error("{bytes} bytes of tensor data written after every declared tensor was complete")]
    ExtraData { bytes: u64 },
}

fn at(offset: &Option<u64>) -> String {
    match offset {
        Some(offset) => format!(" (info at offset {offset})"),
        None => String::new(),
    }
}

/// Bytes as `0x7d 0x27 ...`, so they cannot read as decimal.
fn hex_bytes(bytes: &[u8]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:#04x}")).collect();
    hex.join(" ")
}

fn big_endian_hint(version: u32) -> &'static str {
    if super::format::SUPPORTED_VERSIONS.contains(&version.swap_bytes()) {
        " (this looks like a big-endian GGUF, which is not supported)"
    } else {
        ""
    }
}
