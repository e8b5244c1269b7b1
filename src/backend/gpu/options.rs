//! How the wgpu backend is set up. The caller chooses (the CLI from its flags); the backend reads
//! no environment variables of its own.

/// The wgpu backend's settings; [`Default`] is the fast path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    /// A cap on the bytes allocated on the device below its own: an allocation past it fails as
    /// out of memory, as one past the device's memory does (to share a GPU with other programs,
    /// and to test running out without filling a real device).
    pub memory_limit: Option<u64>,
    /// Decode GEMVs of the formats with an integer span reader on 14-bit integer activations
    /// (else on f32 activations, to compare).
    pub integer_gemv: bool,
    /// Prefill GEMMs on cooperative matrices (tensor cores) where the device has them.
    pub cooperative_matrix: bool,
    /// The chunked delta rule's products on cooperative matrices (f16 operands, f32 sums) where
    /// the device has them, `cooperative_matrix` is on and the chunks run (see
    /// `chunked_delta_rule`). Off by default: on the H100 it ran no
    /// faster than the f32 kernel (benches/results/h100-2026-12-06-deltacoop), which is exact.
    pub cooperative_delta_rule: bool,
    /// The delta rule of a prefill by chunks (delta_chunks.rs) even where the device has the
    /// subgroups for one scan per state column (delta_rule_scan.wgsl); to compare.
    pub chunked_delta_rule: bool,
    /// Prefill attention on cooperative matrices (f16 products, f32 softmax) where the device
    /// has them; else the f32 kernel.
    pub cooperative_attention: bool,
    /// Loop bounding and guarded integer division in every kernel, besides the buffer bounds
    /// checks that are always on. They cost ALU in every inner loop (decode of the 27B shape ran
    /// 23% faster on the H200 without them) and guard against what the kernels do not do.
    pub all_shader_checks: bool,
    /// Kernels with subgroup operations where the adapter has them (tests run both variants).
    pub subgroups: bool,
    /// Decode attention by query head and block of cache rows at every depth, each query head
    /// reading its kv head's rows again (else so only up to 1024 cached rows, and past them one
    /// pass over each kv head's rows for its GQA group; to compare).
    pub per_head_attention: bool,
    /// KV caches in f16 (two halves to a u32 word): half their memory. Off by default: on the
    /// H100 decode ran 4% slower at a short context and no faster at a depth of 32768, where
    /// decode attention is not bound by the bytes it reads (benches/results/
    /// h100-2026-12-06-run33). Attention's sums stay f32 either way.
    pub f16_kv_cache: bool,
    /// Q6_K super-blocks stored on the device 212 bytes apart instead of the file's 210 (two
    /// bytes of padding after each), so that every field of a block sits on a whole word and
    /// the Q6_K kernels read each word with one load instead of two: 1% more Q6_K bytes, decode
    /// 3% faster on the H100 (benches/results/h100-2026-12-07-run40). Not with MSL kernels,
    /// which read the file's layout.
    pub q6_k_aligned: bool,
    /// How much device memory the prefill GEMM on cooperative matrices may spend keeping its
    /// weights' f16 copies from their first GEMM on, instead of decoding the weights from their
    /// blocks again in every prefill. A copy is about two bytes per weight element: all of a
    /// 27B's take 49 GB. Weights past the budget are decoded in every prefill as without
    /// copies. When the device cannot allocate a copy, no more are kept; when it cannot
    /// allocate anything else while copies are kept, every copy is let go and the allocation
    /// tried again, so that copies never cost an op its memory.
    pub f16_weight_copies: WeightCopies,
    /// Op classes (as the profile names them, e.g. "matmul q6_K") whose dispatches are not
    /// recorded: a diagnostic that prices a class by its absence; the results are wrong.
    pub left_out: Vec<String>,
}

impl Default for GpuOptions {
    fn default() -> GpuOptions {
        GpuOptions {
            memory_limit: None,
            integer_gemv: true,
            cooperative_matrix: true,
            cooperative_delta_rule: false,
            chunked_delta_rule: false,
            cooperative_attention: true,
            all_shader_checks: false,
            subgroups: true,
            per_head_attention: false,
            f16_kv_cache: false,
            q6_k_aligned: true,
            f16_weight_copies: WeightCopies::Auto,
            left_out: Vec::new(),
        }
    }
}

/// The budget of [`GpuOptions::f16_weight_copies`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightCopies {
    /// At most this many bytes of copies (0: none).
    Bytes(u64),
    /// Copies while this process's use of the GPU's memory, with the copy, stays within
    /// [`AUTO_COPIES_SHARE`] of what the driver says it may use (and of the memory limit, where
    /// one is set); none where the driver does not say (off Vulkan).
    Auto,
}

/// The share of the device's memory budget that automatic f16 weight copies may fill up to,
/// in percent: the rest is left for activations, KV caches and other programs. On an H200 all of
/// the 27B's 49 GB of copies fit within it (run 46); on a 24 GB card with that model, a few GB do.
pub const AUTO_COPIES_SHARE: u64 = 80;
