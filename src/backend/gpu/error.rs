//! What can go wrong on the GPU backend, with the context needed to act on it.

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no GPU adapter found (wgpu: {0}); set WGPU_BACKEND or install a Vulkan/Metal driver")]
    NoAdapter(String),
    #[error("the adapter {adapter} refused a device: {reason}")]
    RequestDevice { adapter: String, reason: String },
    #[error("kernel {kernel} does not build: {reason}")]
    Kernel { kernel: String, reason: String },
    #[error("{op}: {detail}")]
    Shape { op: &'static str, detail: String },
    #[error("weight {tensor}: type {ty} has no GPU kernel")]
    UnsupportedType { tensor: String, ty: String },
    #[error(
        "{what} needs {bytes} bytes in one binding but the adapter binds at most {limit} bytes"
    )]
    TooLarge {
        what: String,
        bytes: u64,
        limit: u64,
    },
    #[error(
        "the GPU is out of memory: {what} needs {needed} bytes and {allocated} bytes are \
         already allocated{}",
        limit.map(|l| format!(" of the {l} allowed by the GPU memory limit")).unwrap_or_default()
    )]
    OutOfMemory {
        what: String,
        needed: u64,
        allocated: u64,
        /// The cap set by [`super::GpuOptions::memory_limit`], when one was.
        limit: Option<u64>,
    },
    #[error("embedding: token {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange { token: u32, vocab: usize },
    #[error("GPU device error: {0}")]
    Device(String),
    #[error("reading back from the GPU failed: {0}")]
    Readback(String),
}
