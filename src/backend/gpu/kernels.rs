//! The WGSL kernels: which files compose each one, and their pipelines, built once at startup.
//!
//! WGSL has no includes, so a kernel is the concatenation of small files from `wgsl/`: shared
//! preludes (grid indexing, workgroup reductions, byte access), a weight-format decoder where
//! the kernel reads weights, and the kernel's own file with its entry point `main`.

use std::collections::HashMap;

use crate::quant::GgmlType;

use super::kernel_build::{source_file, validated_pipeline, SourceFile};
use super::{GpuError, Storage};

macro_rules! wgsl {
    ($name:literal) => {
        source_file!("wgsl", $name, ".wgsl")
    };
}

const GRID: SourceFile = wgsl!("lib/grid");
const REDUCE: SourceFile = wgsl!("lib/workgroup_reduce");
const HALF: SourceFile = wgsl!("lib/half");
const BYTES: SourceFile = wgsl!("lib/bytes");
const WORDS: SourceFile = wgsl!("lib/words");

/// Weight rows per part of the fast GEMV kernels (WGSL `ROWS` of reduce_rows_*.wgsl). With
/// parts of 32 invocations this was the fastest Q4_K and Q6_K GEMV of a sweep over 32–256
/// invocations and 1–8 rows on the H200 (benches/results).
pub const GEMV_ROWS: usize = 2;
/// Parts per workgroup of the fast GEMV kernels, each with rows of its own: a part is a
/// subgroup where the device's subgroups have one fixed size, else a run of
/// [`GEMV_SHARED_PART`] invocations summing through workgroup memory (WGSL `PART`, defined
/// ahead of the files). Four parts of 32 decoded faster on the H200 than workgroups of one
/// (benches/results/): one-part workgroups cap the resident warps at half of what it holds, as
/// it keeps at most 32 workgroups on an SM.
pub const GEMV_PARTS: usize = 4;
/// Invocations per part of the fast GEMVs without subgroups of a fixed size.
pub const GEMV_SHARED_PART: usize = 32;
/// Weight rows per workgroup of the fast GEMV kernels.
pub const GEMV_WORKGROUP_ROWS: usize = GEMV_ROWS * GEMV_PARTS;
/// Invocations per workgroup of the kernels that do not set their own (WGSL `WG`).
pub const DEFAULT_WG: usize = 64;
/// Invocations per workgroup of the delta-rule scan ([`Kernel::DeltaRuleScan`]): 16 state
/// columns, so that the 27B's 48 value heads are 384 workgroups.
pub const DELTA_RULE_SCAN_WG: usize = 128;
/// Invocations that share a state column in the delta-rule scan (WGSL `LANES`): the device's
/// subgroup size must be a multiple of it.
pub const DELTA_RULE_SCAN_LANES: usize = 8;
/// Largest k_dim the delta-rule scan holds (WGSL `LANES · KEYS`), the Qwen3.5 models' own.
pub const DELTA_RULE_SCAN_MAX_K_DIM: usize = 128;
/// Invocations per workgroup of decode attention ([`Kernel::AttentionDecode`]), one cache row
/// each at a time: 256 cached rows are one round of key loads.
pub const ATTENTION_DECODE_WG: usize = 256;

const KQUANT_SCALES: SourceFile = wgsl!("lib/kquant_scales");
const QUANTIZE_QUAD: SourceFile = wgsl!("lib/quantize_quad");
const SMALL_INTS: SourceFile = wgsl!("lib/small_ints");
const Q4_K_SPAN_FACTORS: SourceFile = wgsl!("lib/q4_k_span_factors");
const Q6_K_SPAN: SourceFile = wgsl!("lib/q6_k_span");
const NIBBLES: SourceFile = wgsl!("lib/nibbles");
const GEMV_ROWS_DOT: SourceFile = wgsl!("lib/gemv_rows_dot");
const SOFTPLUS: SourceFile = wgsl!("lib/softplus");
const ROPE_ANGLE: SourceFile = wgsl!("lib/rope_angle");
const DELTA_RULE_CHUNKED_IO: SourceFile = wgsl!("lib/delta_rule_chunked_io");
const DELTA_RULE_OPERANDS: SourceFile = wgsl!("lib/delta_rule_operands");
const DECODE_KV_ROWS: SourceFile = wgsl!("lib/decode_kv_rows");

/// The KV cache access of the attention kernels on a cache stored as `storage`.
fn kv_cache(storage: Storage) -> SourceFile {
    match storage {
        Storage::F32 => wgsl!("lib/kv_cache_f32"),
        Storage::F16 => wgsl!("lib/kv_cache_f16"),
    }
}

/// The square blocks the kernels on cooperative matrices multiply (WGSL `BLOCK`, with the
/// aliases `BlockA`, `BlockB` and `BlockC` for its f16 operands and f32 accumulator), and the
/// subgroup size they are laid out for (WGSL `SUBGROUP_SIZE`). Each kernel keeps its tiles
/// whatever the block and takes as many subgroups as cover them, so its workgroup grows with
/// the subgroup and shrinks with the block's area: subgroups of BLOCK²/8 invocations keep the
/// workgroups the size they were designed at (256 invocations for the GEMM and attention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CooperativeShape {
    pub block: usize,
    pub subgroup: usize,
}

impl CooperativeShape {
    /// NVIDIA's tensor cores through Vulkan: 16×16×16 f16 → f32, subgroups of 32.
    pub const TENSOR_CORES: CooperativeShape = CooperativeShape {
        block: 16,
        subgroup: 32,
    };
    /// Mesa's lavapipe (26.2 on): 8×8×8 f16 → f32, subgroups of 8 (256-bit vectors), so that
    /// the very kernels run on a CPU in CI.
    pub const LAVAPIPE: CooperativeShape = CooperativeShape {
        block: 8,
        subgroup: 8,
    };

    /// The shapes the kernels take, largest blocks first.
    pub const ALL: [CooperativeShape; 2] = [Self::TENSOR_CORES, Self::LAVAPIPE];

    /// The WGSL constants and aliases of this shape.
    pub fn wgsl(self) -> String {
        let (b, s) = (self.block, self.subgroup);
        format!(
            "const BLOCK: u32 = {b}u;\nconst SUBGROUP_SIZE: u32 = {s}u;\n\
             alias BlockA = coop_mat{b}x{b}<f16, A>;\nalias BlockB = coop_mat{b}x{b}<f16, B>;\n\
             alias BlockC = coop_mat{b}x{b}<f32, C>;\n"
        )
    }
}

/// A weight storage format with a GPU decoder: the file's blocks, bound as they are.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q5_0,
    Q4_K,
    Q5_K,
    Q6_K,
}

impl WeightFormat {
    pub const ALL: [WeightFormat; 9] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::BF16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
        WeightFormat::Q5_0,
        WeightFormat::Q4_K,
        WeightFormat::Q5_K,
        WeightFormat::Q6_K,
    ];

    pub fn from_ggml(ty: GgmlType) -> Option<WeightFormat> {
        Some(match ty {
            GgmlType::F32 => WeightFormat::F32,
            GgmlType::F16 => WeightFormat::F16,
            GgmlType::BF16 => WeightFormat::BF16,
            GgmlType::Q8_0 => WeightFormat::Q8_0,
            GgmlType::Q4_0 => WeightFormat::Q4_0,
            GgmlType::Q5_0 => WeightFormat::Q5_0,
            GgmlType::Q4_K => WeightFormat::Q4_K,
            GgmlType::Q5_K => WeightFormat::Q5_K,
            GgmlType::Q6_K => WeightFormat::Q6_K,
            _ => return None,
        })
    }

    pub fn ggml_type(self) -> GgmlType {
        match self {
            WeightFormat::F32 => GgmlType::F32,
            WeightFormat::F16 => GgmlType::F16,
            WeightFormat::BF16 => GgmlType::BF16,
            WeightFormat::Q8_0 => GgmlType::Q8_0,
            WeightFormat::Q4_0 => GgmlType::Q4_0,
            WeightFormat::Q5_0 => GgmlType::Q5_0,
            WeightFormat::Q4_K => GgmlType::Q4_K,
            WeightFormat::Q5_K => GgmlType::Q5_K,
            WeightFormat::Q6_K => GgmlType::Q6_K,
        }
    }

    /// Elements one `unit_values` call of the decoder yields (its WGSL `UNIT`).
    pub fn unit_elems(self) -> usize {
        match self {
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16 => 1,
            _ => 32,
        }
    }

    /// The decoder and the preludes it needs, in order.
    fn decoder(self) -> Vec<SourceFile> {
        match self {
            WeightFormat::F32 => vec![HALF, BYTES, wgsl!("lib/dequant_f32")],
            WeightFormat::F16 => vec![HALF, BYTES, wgsl!("lib/dequant_f16")],
            WeightFormat::BF16 => vec![HALF, BYTES, wgsl!("lib/dequant_bf16")],
            WeightFormat::Q8_0 => vec![HALF, BYTES, wgsl!("lib/dequant_q8_0")],
            WeightFormat::Q4_0 => vec![HALF, BYTES, wgsl!("lib/dequant_q4_0")],
            WeightFormat::Q5_0 => vec![HALF, BYTES, wgsl!("lib/dequant_q5_0")],
            WeightFormat::Q4_K => vec![HALF, BYTES, KQUANT_SCALES, wgsl!("lib/dequant_q4_k")],
            WeightFormat::Q5_K => vec![HALF, BYTES, KQUANT_SCALES, wgsl!("lib/dequant_q5_k")],
            WeightFormat::Q6_K => vec![HALF, BYTES, wgsl!("lib/dequant_q6_k")],
        }
    }

    /// Elements each invocation of its f16 scratch decoder ([`Kernel::HalfWeights`]) writes:
    /// Q4_K's and Q6_K's read whole 16-byte pieces of a super-block, the others a unit.
    pub fn half_weights_span(self) -> usize {
        match self {
            WeightFormat::Q4_K => 32,
            WeightFormat::Q6_K => 64,
            _ => self.unit_elems().max(2),
        }
    }

    /// The f16 scratch decoder and the preludes it needs, in order.
    fn half_weights(self) -> Vec<SourceFile> {
        match self {
            WeightFormat::Q4_K => vec![
                SMALL_INTS,
                Q4_K_SPAN_FACTORS,
                NIBBLES,
                wgsl!("kernels/half_weights_q4_k"),
            ],
            WeightFormat::Q6_K => vec![
                WORDS,
                SMALL_INTS,
                Q6_K_SPAN,
                NIBBLES,
                wgsl!("kernels/half_weights_q6_k"),
            ],
            _ => {
                let mut files = self.decoder();
                files.push(wgsl!("kernels/half_weights"));
                files
            }
        }
    }

    /// Columns per span of this format's fast GEMV (WGSL `SPAN`), if it has one; it then takes
    /// `cols / span` spans per row.
    pub fn gemv_span(self) -> Option<usize> {
        match self {
            WeightFormat::Q8_0 | WeightFormat::Q4_K | WeightFormat::Q6_K => Some(32),
            _ => None,
        }
    }

    /// The span reader of the fast GEMV and the preludes it needs, in order.
    fn gemv_spans(self) -> Vec<SourceFile> {
        match self {
            WeightFormat::Q8_0 => vec![WORDS, wgsl!("lib/gemv_q8_0")],
            WeightFormat::Q4_K => vec![
                SMALL_INTS,
                Q4_K_SPAN_FACTORS,
                NIBBLES,
                wgsl!("lib/gemv_q4_k"),
            ],
            WeightFormat::Q6_K => vec![
                WORDS,
                SMALL_INTS,
                Q6_K_SPAN,
                NIBBLES,
                wgsl!("lib/gemv_q6_k"),
            ],
            _ => Vec::new(),
        }
    }

    /// Whether this format has a span reader against quantized activations
    /// (quantize_quad.wgsl), its weights dotted as integers.
    pub fn has_integer_gemv(self) -> bool {
        !self.integer_gemv_spans().is_empty()
    }

    /// Whether its integer span reader reads the weight through `weight(i)`, so that one
    /// dispatch can multiply several weights ([`Kernel::GemvSeveral`]).
    pub fn has_several_gemv(self) -> bool {
        self == WeightFormat::Q4_K
    }

    /// The span reader against quantized activations and the preludes it needs, in order.
    fn integer_gemv_spans(self) -> Vec<SourceFile> {
        match self {
            WeightFormat::Q4_K => vec![SMALL_INTS, Q4_K_SPAN_FACTORS, wgsl!("lib/gemv_q4_k_int")],
            WeightFormat::Q6_K => vec![WORDS, SMALL_INTS, Q6_K_SPAN, wgsl!("lib/gemv_q6_k_int")],
            _ => Vec::new(),
        }
    }
}

/// Every compute kernel the backend dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    Gemv(WeightFormat),
    /// The fast GEMV of a format with a span reader, its input silu(gate) ⊙ up.
    GemvSwiglu(WeightFormat),
    /// The GEMV of a format with an integer span reader, its input quantized by
    /// [`Kernel::QuantizeActivations`].
    GemvQuantized(WeightFormat),
    /// [`Kernel::GemvQuantized`] of up to four weights of one width on one token, in one
    /// dispatch.
    GemvSeveral(WeightFormat),
    /// Rows of x (or silu(gate) ⊙ up) as 14-bit integers per run of 32, for
    /// [`Kernel::GemvQuantized`].
    QuantizeActivations,
    /// Tiled matmul for many rows of x (prefill).
    Gemm(WeightFormat),
    /// Weight rows decoded into an f16 scratch matrix for [`Kernel::GemmCoop`].
    HalfWeights(WeightFormat),
    /// x as an f16 scratch matrix for [`Kernel::GemmCoop`].
    HalfActivations,
    /// Matmul for many rows of x on cooperative matrices (tensor cores), over f16 scratch.
    GemmCoop,
    Embed(WeightFormat),
    Add,
    Swiglu,
    SigmoidMul,
    SliceCols,
    CopyRows,
    RmsNorm,
    /// [`Kernel::RmsNorm`] whose output is also quantized as [`Kernel::QuantizeActivations`]
    /// leaves it.
    RmsNormQuantized,
    L2Norm,
    Rope,
    QkNormRope,
    /// Attention over a KV cache stored as the [`Storage`] given, as are the other kernels that
    /// read or write a cache.
    Attention(Storage),
    /// Attention of one query row, each kv head's cache rows read once for its GQA group's
    /// query heads: one dispatch, or splits of the cache merged by [`Kernel::AttentionCombine`].
    AttentionDecode(Storage),
    /// Attention of one query row by query head and block of cache rows
    /// ([`super::GpuOptions::per_head_attention`]), merged by [`Kernel::AttentionCombine`].
    AttentionBlocks(Storage),
    AttentionCombine,
    /// Attention for many query rows at once (prefill), by blocks of query tokens.
    AttentionPrefill(Storage),
    /// Rows of q, k or v as f16 for [`Kernel::AttentionPrefillCoop`] (k and v also into the
    /// cache).
    AttentionPrefillHalves(Storage),
    /// [`Kernel::AttentionPrefill`] on cooperative matrices (tensor cores), over f16 copies.
    AttentionPrefillCoop,
    Conv1dSilu,
    ConvQkvNorm,
    Argmax,
    /// Sampling's repeat penalty, in place on the logits.
    RepeatPenalty,
    /// Sampling's first pass: the k best logits of each chunk.
    TopKChunks,
    /// Sampling's second pass: the k best candidates and the choice among them.
    TopKDraw,
    DeltaNetGates,
    DeltaRule,
    /// The key-side factors of every chunk of the chunked delta rule.
    DeltaRuleChunkFactors,
    /// The chunked delta rule over the factors, carrying the state.
    DeltaRuleChunked,
    /// [`Kernel::DeltaRuleChunked`] with its products on cooperative matrices (tensor cores).
    DeltaRuleChunkedCoop,
    /// The delta rule over many tokens in one pass, each state column a scan across lanes of
    /// a subgroup (built only where subgroups have a size it divides).
    DeltaRuleScan,
}

impl Kernel {
    pub fn all() -> Vec<Kernel> {
        let mut all: Vec<Kernel> = WeightFormat::ALL.iter().map(|&f| Kernel::Gemv(f)).collect();
        all.extend(
            WeightFormat::ALL
                .iter()
                .filter(|f| f.gemv_span().is_some())
                .map(|&f| Kernel::GemvSwiglu(f)),
        );
        all.extend(
            WeightFormat::ALL
                .iter()
                .filter(|f| f.has_integer_gemv())
                .map(|&f| Kernel::GemvQuantized(f)),
        );
        all.extend(
            WeightFormat::ALL
                .iter()
                .filter(|f| f.has_several_gemv())
                .map(|&f| Kernel::GemvSeveral(f)),
        );
        all.extend(WeightFormat::ALL.iter().map(|&f| Kernel::Gemm(f)));
        all.extend(WeightFormat::ALL.iter().map(|&f| Kernel::HalfWeights(f)));
        all.extend(WeightFormat::ALL.iter().map(|&f| Kernel::Embed(f)));
        for storage in [Storage::F32, Storage::F16] {
            all.extend([
                Kernel::Attention(storage),
                Kernel::AttentionDecode(storage),
                Kernel::AttentionBlocks(storage),
                Kernel::AttentionPrefill(storage),
                Kernel::AttentionPrefillHalves(storage),
            ]);
        }
        all.extend([
            Kernel::HalfActivations,
            Kernel::GemmCoop,
            Kernel::QuantizeActivations,
            Kernel::Add,
            Kernel::Swiglu,
            Kernel::SigmoidMul,
            Kernel::SliceCols,
            Kernel::CopyRows,
            Kernel::RmsNorm,
            Kernel::RmsNormQuantized,
            Kernel::L2Norm,
            Kernel::Rope,
            Kernel::QkNormRope,
            Kernel::AttentionCombine,
            Kernel::AttentionPrefillCoop,
            Kernel::Conv1dSilu,
            Kernel::ConvQkvNorm,
            Kernel::Argmax,
            Kernel::RepeatPenalty,
            Kernel::TopKChunks,
            Kernel::TopKDraw,
            Kernel::DeltaNetGates,
            Kernel::DeltaRule,
            Kernel::DeltaRuleChunkFactors,
            Kernel::DeltaRuleChunked,
            Kernel::DeltaRuleChunkedCoop,
            Kernel::DeltaRuleScan,
        ]);
        all
    }

    pub fn name(self) -> String {
        match self {
            Kernel::Gemv(f) => format!("gemv_{f:?}").to_lowercase(),
            Kernel::GemvSwiglu(f) => format!("gemv_swiglu_{f:?}").to_lowercase(),
            Kernel::GemvQuantized(f) => format!("gemv_quantized_{f:?}").to_lowercase(),
            Kernel::GemvSeveral(f) => format!("gemv_several_{f:?}").to_lowercase(),
            Kernel::Gemm(f) => format!("gemm_{f:?}").to_lowercase(),
            Kernel::HalfWeights(f) => format!("half_weights_{f:?}").to_lowercase(),
            Kernel::Embed(f) => format!("embed_{f:?}").to_lowercase(),
            other => format!("{other:?}"),
        }
    }

    /// The op class the profile counts this kernel in, e.g. "matmul q4_K".
    pub fn class(self) -> String {
        match self {
            Kernel::Gemv(f)
            | Kernel::GemvSwiglu(f)
            | Kernel::GemvQuantized(f)
            | Kernel::GemvSeveral(f) => format!("matmul {}", f.ggml_type().name()),
            Kernel::QuantizeActivations => "quantize x".into(),
            Kernel::Gemm(f) => format!("gemm {}", f.ggml_type().name()),
            Kernel::HalfWeights(f) => format!("gemm-coop f16 {}", f.ggml_type().name()),
            Kernel::HalfActivations => "gemm-coop f16 x".into(),
            Kernel::GemmCoop => "gemm-coop".into(),
            Kernel::Embed(f) => format!("embed {}", f.ggml_type().name()),
            Kernel::Add => "add".into(),
            Kernel::Swiglu => "swiglu".into(),
            Kernel::SigmoidMul => "sigmoid_mul".into(),
            Kernel::SliceCols => "slice_cols".into(),
            Kernel::CopyRows => "copy_rows".into(),
            Kernel::RmsNorm | Kernel::RmsNormQuantized => "rms_norm".into(),
            Kernel::L2Norm => "l2_norm".into(),
            Kernel::Rope => "rope".into(),
            Kernel::QkNormRope => "qk_norm_rope".into(),
            Kernel::Attention(_)
            | Kernel::AttentionDecode(_)
            | Kernel::AttentionBlocks(_)
            | Kernel::AttentionCombine => "attention".into(),
            Kernel::AttentionPrefill(_) | Kernel::AttentionPrefillCoop => {
                "attention prefill".into()
            }
            Kernel::AttentionPrefillHalves(_) => "attention prefill f16 qkv".into(),
            Kernel::Conv1dSilu => "conv1d_silu".into(),
            Kernel::ConvQkvNorm => "conv_qkv_norm".into(),
            // Greedy decoding's token choice.
            Kernel::Argmax | Kernel::RepeatPenalty | Kernel::TopKChunks | Kernel::TopKDraw => {
                "sampling".into()
            }
            Kernel::DeltaNetGates => "delta_net_gates".into(),
            Kernel::DeltaRule => "delta_rule".into(),
            Kernel::DeltaRuleChunkFactors => "delta_rule chunk factors".into(),
            Kernel::DeltaRuleChunked | Kernel::DeltaRuleChunkedCoop => "delta_rule chunked".into(),
            Kernel::DeltaRuleScan => "delta_rule scan".into(),
        }
    }

    /// Whether this kernel belongs to the GEMM, the attention or the delta rule on cooperative
    /// matrices, built only where the device has them, f16 and subgroups of a size a
    /// [`CooperativeShape`] takes.
    pub fn needs_cooperative_matrix(self) -> bool {
        self.is_cooperative_attention()
            || matches!(
                self,
                Kernel::GemmCoop
                    | Kernel::HalfActivations
                    | Kernel::HalfWeights(_)
                    | Kernel::DeltaRuleChunkedCoop
            )
    }

    /// Whether this kernel exists only with subgroup operations (built apart, where the device
    /// has subgroups of a size it takes).
    pub fn needs_subgroups(self) -> bool {
        self == Kernel::DeltaRuleScan
    }

    /// Whether this kernel belongs to the prefill attention on cooperative matrices (built
    /// apart from the GEMM's, so that either can be refused alone).
    pub fn is_cooperative_attention(self) -> bool {
        matches!(
            self,
            Kernel::AttentionPrefillHalves(_) | Kernel::AttentionPrefillCoop
        )
    }

    /// The files whose concatenation is this kernel, preludes first; `subgroups` where the
    /// device has subgroup operations.
    pub fn files(self, subgroups: bool) -> Vec<SourceFile> {
        let mut files = Vec::new();
        if self.has_cooperative_blocks() {
            files.push(wgsl!("lib/cooperative_matrix"));
        }
        files.push(GRID);
        match self {
            Kernel::Gemv(format) | Kernel::GemvSwiglu(format) if format.gemv_span().is_some() => {
                files.push(reduce_rows(subgroups));
                files.push(match self {
                    Kernel::GemvSwiglu(_) => wgsl!("lib/gemv_input_swiglu"),
                    _ => wgsl!("lib/gemv_input"),
                });
                files.extend(format.gemv_spans());
                files.extend([GEMV_ROWS_DOT, wgsl!("kernels/gemv_rows")]);
            }
            Kernel::GemvQuantized(format) => {
                assert!(format.has_integer_gemv(), "{format:?} has no integer GEMV");
                files.extend([reduce_rows(subgroups), wgsl!("lib/gemv_input_quantized")]);
                if format.has_several_gemv() {
                    files.push(wgsl!("lib/gemv_weight"));
                }
                files.extend(format.integer_gemv_spans());
                files.extend([GEMV_ROWS_DOT, wgsl!("kernels/gemv_rows")]);
            }
            Kernel::GemvSeveral(format) => {
                assert!(
                    format.has_several_gemv(),
                    "{format:?} has no several-weight GEMV"
                );
                files.extend([reduce_rows(subgroups), wgsl!("lib/gemv_input_quantized")]);
                files.extend(format.integer_gemv_spans());
                files.extend([GEMV_ROWS_DOT, wgsl!("kernels/gemv_several")]);
            }
            Kernel::QuantizeActivations => {
                files.extend([QUANTIZE_QUAD, wgsl!("kernels/quantize_activations")]);
            }
            Kernel::GemvSwiglu(format) => {
                unreachable!("{format:?} has no span reader, so no SwiGLU-input GEMV")
            }
            Kernel::Gemv(format) => {
                files.push(REDUCE);
                files.extend(format.decoder());
                files.push(wgsl!("kernels/gemv"));
            }
            Kernel::Gemm(format) => {
                files.extend(format.decoder());
                files.push(wgsl!("kernels/gemm"));
            }
            Kernel::HalfWeights(format) => {
                files.push(wgsl!("lib/half_scratch"));
                files.extend(format.half_weights());
            }
            Kernel::HalfActivations => files.push(wgsl!("kernels/half_activations")),
            Kernel::GemmCoop => files.push(wgsl!("kernels/gemm_coop")),
            Kernel::Embed(format) => {
                files.extend(format.decoder());
                files.push(wgsl!("kernels/embed"));
            }
            Kernel::Add => files.push(wgsl!("kernels/add")),
            Kernel::Swiglu => files.push(wgsl!("kernels/swiglu")),
            Kernel::SigmoidMul => files.push(wgsl!("kernels/sigmoid_mul")),
            Kernel::SliceCols => files.push(wgsl!("kernels/slice_cols")),
            Kernel::CopyRows => files.push(wgsl!("kernels/copy_rows")),
            Kernel::RmsNorm => files.extend([REDUCE, wgsl!("kernels/rms_norm")]),
            Kernel::RmsNormQuantized => {
                files.extend([REDUCE, QUANTIZE_QUAD, wgsl!("kernels/rms_norm_quantized")]);
            }
            Kernel::L2Norm => files.extend([REDUCE, wgsl!("kernels/l2_norm")]),
            Kernel::Rope => files.extend([ROPE_ANGLE, wgsl!("kernels/rope")]),
            Kernel::QkNormRope => files.extend([REDUCE, ROPE_ANGLE, wgsl!("kernels/qk_norm_rope")]),
            Kernel::Attention(storage) => {
                files.extend([REDUCE, kv_cache(storage), wgsl!("kernels/attention")]);
            }
            Kernel::AttentionDecode(storage) => {
                files.extend([
                    kv_cache(storage),
                    DECODE_KV_ROWS,
                    wgsl!("kernels/attention_decode"),
                ]);
            }
            Kernel::AttentionBlocks(storage) => {
                files.extend([
                    REDUCE,
                    kv_cache(storage),
                    DECODE_KV_ROWS,
                    wgsl!("kernels/attention_blocks"),
                ]);
            }
            Kernel::AttentionCombine => files.push(wgsl!("kernels/attention_combine")),
            Kernel::Conv1dSilu => files.push(wgsl!("kernels/conv1d_silu")),
            Kernel::ConvQkvNorm => files.extend([REDUCE, wgsl!("kernels/conv_qkv_norm")]),
            Kernel::Argmax => files.push(wgsl!("kernels/argmax")),
            Kernel::RepeatPenalty => files.push(wgsl!("kernels/repeat_penalty")),
            Kernel::TopKChunks => {
                files.extend([wgsl!("lib/top_k_rounds"), wgsl!("kernels/top_k_chunks")])
            }
            Kernel::TopKDraw => {
                files.extend([wgsl!("lib/top_k_rounds"), wgsl!("kernels/top_k_draw")])
            }
            Kernel::DeltaNetGates => files.extend([SOFTPLUS, wgsl!("kernels/delta_net_gates")]),
            Kernel::DeltaRule => {
                files.extend([SOFTPLUS, DELTA_RULE_OPERANDS, wgsl!("kernels/delta_rule")])
            }
            Kernel::AttentionPrefill(storage) => {
                files.extend([kv_cache(storage), wgsl!("kernels/attention_prefill")]);
            }
            Kernel::AttentionPrefillHalves(storage) => {
                files.extend([kv_cache(storage), wgsl!("kernels/attention_prefill_halves")]);
            }
            Kernel::AttentionPrefillCoop => files.push(wgsl!("kernels/attention_prefill_coop")),
            Kernel::DeltaRuleChunkFactors => files.push(wgsl!("kernels/delta_rule_chunk_factors")),
            Kernel::DeltaRuleChunked => {
                files.extend([DELTA_RULE_CHUNKED_IO, wgsl!("kernels/delta_rule_chunked")]);
            }
            Kernel::DeltaRuleChunkedCoop => {
                files.extend([
                    DELTA_RULE_CHUNKED_IO,
                    wgsl!("kernels/delta_rule_chunked_coop"),
                ]);
            }
            Kernel::DeltaRuleScan => files.extend([
                SOFTPLUS,
                DELTA_RULE_OPERANDS,
                wgsl!("kernels/delta_rule_scan"),
            ]),
        }
        files
    }

    /// Whether this is a fast GEMV, whose workgroups hold [`GEMV_PARTS`] parts.
    pub fn has_gemv_parts(self) -> bool {
        match self {
            Kernel::Gemv(format) => format.gemv_span().is_some(),
            Kernel::GemvSwiglu(_) | Kernel::GemvQuantized(_) | Kernel::GemvSeveral(_) => true,
            _ => false,
        }
    }

    /// Invocations per workgroup (WGSL `WG`, defined ahead of the files). The fast GEMVs' is
    /// the size without subgroups: [`Kernel::source`] sizes them for the device.
    pub fn workgroup_size(self) -> usize {
        match self {
            _ if self.has_gemv_parts() => GEMV_PARTS * GEMV_SHARED_PART,
            // One row per workgroup (gemv.wgsl): many small workgroups keep more weight loads in
            // flight across the GPU.
            Kernel::Gemv(_) => 32,
            // One workgroup per row: wide, so that a 5120-wide row takes few rounds of loads.
            Kernel::RmsNorm => 256,
            // A 5120-wide row in ten chunks of 512 values (rms_norm_quantized.wgsl).
            Kernel::RmsNormQuantized => 128,
            // A chunk of 4096 logits is 16 a invocation (top_k_chunks.wgsl `PER`).
            Kernel::TopKChunks | Kernel::TopKDraw => 256,
            Kernel::AttentionDecode(_) => ATTENTION_DECODE_WG,
            Kernel::DeltaRuleScan => DELTA_RULE_SCAN_WG,
            _ => DEFAULT_WG,
        }
    }

    /// Whether this kernel multiplies cooperative-matrix blocks (and takes a
    /// [`CooperativeShape`]'s constants).
    pub fn has_cooperative_blocks(self) -> bool {
        matches!(
            self,
            Kernel::GemmCoop | Kernel::DeltaRuleChunkedCoop | Kernel::AttentionPrefillCoop
        )
    }

    /// The kernel's WGSL, specialized by `constants`.
    pub fn source(self, constants: SourceConstants) -> String {
        let mut source = String::new();
        for f in self.files(constants.subgroups) {
            source += &format!("// ---- {} ----\n{}\n", f.name, f.source);
        }
        // WGSL directives (`enable …;`) must come first, so the constants go after them.
        let body_start = source
            .lines()
            .take_while(|l| l.starts_with("//") || l.starts_with("enable ") || l.is_empty())
            .map(|l| l.len() + 1)
            .sum::<usize>();
        let (wg, part) = if self.has_gemv_parts() {
            (
                GEMV_PARTS * constants.gemv_part,
                format!("const PART: u32 = {}u;\n", constants.gemv_part),
            )
        } else {
            (self.workgroup_size(), String::new())
        };
        let blocks = if self.has_cooperative_blocks() {
            constants.cooperative.wgsl()
        } else {
            String::new()
        };
        source.insert_str(
            body_start,
            &format!(
                "{part}const WG: u32 = {wg}u;\nconst Q6_K_BLOCK_BYTES: u32 = {}u;\n{blocks}",
                constants.q6_k_block_bytes
            ),
        );
        source
    }
}

/// What a kernel's WGSL is specialized for ([`Kernel::source`]): subgroup operations or not,
/// the invocations of a fast GEMV's part, the bytes from one Q6_K super-block to the next in
/// weight buffers, and the block shape of the kernels on cooperative matrices.
#[derive(Clone, Copy, Debug)]
pub struct SourceConstants {
    pub subgroups: bool,
    pub gemv_part: usize,
    pub q6_k_block_bytes: usize,
    pub cooperative: CooperativeShape,
}

/// Bytes from one Q6_K super-block to the next in a weight buffer: the file's (210), or with
/// [`super::GpuOptions::q6_k_aligned`] padded to whole words.
pub fn q6_k_block_bytes(aligned: bool) -> usize {
    let file = GgmlType::Q6_K.block_bytes();
    if aligned {
        file.next_multiple_of(4)
    } else {
        file
    }
}

/// The per-row workgroup sums of the span GEMVs.
fn reduce_rows(subgroups: bool) -> SourceFile {
    if subgroups {
        wgsl!("lib/reduce_rows_subgroup")
    } else {
        wgsl!("lib/reduce_rows_shared")
    }
}

/// A kernel's composed WGSL, for validation without a GPU.
#[derive(Clone, Debug)]
pub struct KernelSource {
    pub name: String,
    pub files: Vec<&'static str>,
    pub source: String,
    /// Whether it uses subgroup operations (built only where the device has them).
    pub subgroups: bool,
    /// Whether it belongs to the GEMM on cooperative matrices (built only where the device has
    /// them, with f16).
    pub cooperative_matrix: bool,
}

/// Every kernel's composed source, in each variant (with and without subgroup operations, and
/// at each block shape of the kernels on cooperative matrices).
pub fn kernel_sources() -> Vec<KernelSource> {
    let constants = |subgroups: bool, cooperative: CooperativeShape| SourceConstants {
        subgroups,
        gemv_part: GEMV_SHARED_PART,
        q6_k_block_bytes: q6_k_block_bytes(false),
        cooperative,
    };
    let default = CooperativeShape::TENSOR_CORES;
    let mut sources = Vec::new();
    for kernel in Kernel::all() {
        let files = |subgroups: bool| kernel.files(subgroups).iter().map(|f| f.name).collect();
        if kernel.has_cooperative_blocks() {
            for shape in CooperativeShape::ALL {
                sources.push(KernelSource {
                    name: format!("{} ({b}×{b} blocks)", kernel.name(), b = shape.block),
                    files: files(true),
                    source: kernel.source(constants(true, shape)),
                    subgroups: true,
                    cooperative_matrix: true,
                });
            }
            continue;
        }
        if kernel.needs_cooperative_matrix() || kernel.needs_subgroups() {
            sources.push(KernelSource {
                name: kernel.name(),
                files: files(true),
                source: kernel.source(constants(true, default)),
                subgroups: true,
                cooperative_matrix: kernel.needs_cooperative_matrix(),
            });
            continue;
        }
        let plain: Vec<_> = files(false);
        let with_subgroups: Vec<_> = files(true);
        if with_subgroups != plain {
            sources.push(KernelSource {
                name: format!("{}+subgroups", kernel.name()),
                files: with_subgroups,
                source: kernel.source(constants(true, default)),
                subgroups: true,
                cooperative_matrix: false,
            });
        }
        sources.push(KernelSource {
            name: kernel.name(),
            files: plain,
            source: kernel.source(constants(false, default)),
            subgroups: false,
            cooperative_matrix: false,
        });
    }
    sources
}

/// The runtime checks naga adds to the kernels: buffer bounds always; loop bounding and guarded
/// integer division only with `all` ([`super::GpuOptions::all_shader_checks`]).
fn shader_checks(all: bool) -> wgpu::ShaderRuntimeChecks {
    let mut checks = wgpu::ShaderRuntimeChecks::checked();
    if !all {
        checks.force_loop_bounding = false;
        checks.int_div_checks = false;
    }
    checks
}

/// The compute pipelines of every kernel.
pub struct Pipelines {
    by_kernel: HashMap<Kernel, wgpu::ComputePipeline>,
    /// Invocations per part of the fast GEMVs where the device's subgroups have one fixed size
    /// (and a workgroup of [`GEMV_PARTS`] subgroups is allowed): the parts are then its
    /// subgroups.
    gemv_subgroup: Option<usize>,
    /// Every runtime check in the kernels ([`shader_checks`]).
    all_shader_checks: bool,
    /// Bytes from one Q6_K super-block to the next in weight buffers (WGSL `Q6_K_BLOCK_BYTES`).
    q6_k_block_bytes: usize,
    /// The block shape of the kernels on cooperative matrices, where the device has them.
    cooperative: Option<CooperativeShape>,
}

impl Pipelines {
    /// Every kernel's pipeline except those on cooperative matrices (see
    /// [`Pipelines::add_cooperative`]).
    pub fn build(
        device: &wgpu::Device,
        adapter: &wgpu::AdapterInfo,
        options: &super::GpuOptions,
        cooperative: Option<CooperativeShape>,
    ) -> Result<Pipelines, GpuError> {
        let size = adapter.subgroup_min_size as usize;
        let fixed_size = device.features().contains(wgpu::Features::SUBGROUP)
            && size > 0
            && adapter.subgroup_max_size as usize == size
            && GEMV_PARTS * size <= device.limits().max_compute_invocations_per_workgroup as usize;
        let mut pipelines = Pipelines {
            by_kernel: HashMap::new(),
            gemv_subgroup: fixed_size.then_some(size),
            all_shader_checks: options.all_shader_checks,
            q6_k_block_bytes: q6_k_block_bytes(options.q6_k_aligned),
            cooperative,
        };
        for kernel in Kernel::all() {
            if !kernel.needs_cooperative_matrix() && !kernel.needs_subgroups() {
                pipelines.add(device, kernel)?;
            }
        }
        Ok(pipelines)
    }

    /// The pipelines of the GEMM (or with `attention` the attention) on cooperative matrices,
    /// for a device with `EXPERIMENTAL_COOPERATIVE_MATRIX`, `SHADER_F16` and `SUBGROUP` (the delta
    /// rule's is added on its own).
    pub fn add_cooperative(
        &mut self,
        device: &wgpu::Device,
        attention: bool,
    ) -> Result<(), GpuError> {
        for kernel in Kernel::all() {
            if kernel.needs_cooperative_matrix()
                && kernel != Kernel::DeltaRuleChunkedCoop
                && kernel.is_cooperative_attention() == attention
            {
                self.add(device, kernel)?;
            }
        }
        Ok(())
    }

    pub(super) fn add(&mut self, device: &wgpu::Device, kernel: Kernel) -> Result<(), GpuError> {
        let (subgroups, gemv_part) = match self.gemv_subgroup {
            _ if !kernel.has_gemv_parts() => (
                device.features().contains(wgpu::Features::SUBGROUP),
                GEMV_SHARED_PART,
            ),
            Some(size) => (true, size),
            None => (false, GEMV_SHARED_PART),
        };
        let name = kernel.name();
        let constants = SourceConstants {
            subgroups,
            gemv_part,
            q6_k_block_bytes: self.q6_k_block_bytes,
            cooperative: match self.cooperative {
                Some(shape) => shape,
                None if kernel.has_cooperative_blocks() => {
                    return Err(GpuError::Kernel {
                        kernel: name,
                        reason: "the device has no cooperative matrices".into(),
                    })
                }
                None => CooperativeShape::TENSOR_CORES,
            },
        };
        let pipeline = validated_pipeline(device, &name, "main", || {
            let descriptor = wgpu::ShaderModuleDescriptor {
                label: Some(&name),
                source: wgpu::ShaderSource::Wgsl(kernel.source(constants).into()),
            };
            let checks = shader_checks(self.all_shader_checks);
            // SAFETY: every loop in wgsl/ is bounded by its parameters, and no kernel divides by
            // a parameter the host has not checked to be non-zero; buffer bounds checks stay on.
            let module = unsafe { device.create_shader_module_trusted(descriptor, checks) };
            (module, None)
        })
        .map_err(|reason| GpuError::Kernel {
            kernel: name,
            reason,
        })?;
        self.by_kernel.insert(kernel, pipeline);
        Ok(())
    }

    /// Bytes from one Q6_K super-block to the next in weight buffers: the layout uploads write
    /// and the kernels read.
    pub fn q6_k_block_bytes(&self) -> usize {
        self.q6_k_block_bytes
    }

    /// The block shape the kernels on cooperative matrices are built for, if the device has
    /// them.
    pub fn cooperative_shape(&self) -> Option<CooperativeShape> {
        self.cooperative
    }

    pub fn get(&self, kernel: Kernel) -> Result<&wgpu::ComputePipeline, GpuError> {
        self.by_kernel.get(&kernel).ok_or_else(|| GpuError::Kernel {
            kernel: kernel.name(),
            reason: "no pipeline was built".into(),
        })
    }
}
