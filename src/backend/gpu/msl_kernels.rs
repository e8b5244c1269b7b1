//! The MSL kernels: which files of `msl/` compose each one, its entry point, its threadgroup size
//! and how it uses its buffers. Metal has no includes in a source handed over at run time, so a
//! kernel is the concatenation of shared preludes (weight blocks, reductions) and its own file,
//! with `#line` markers so that compiler messages name the right file and line.

use super::kernel_build::{source_file, SourceFile};
use super::Storage;
use crate::quant::GgmlType;

macro_rules! msl {
    ($name:literal) => {
        source_file!("msl", $name, ".metal")
    };
}

const QUANT_BLOCKS: SourceFile = msl!("quant_blocks");
const GEMV_COMMON: SourceFile = msl!("gemv_common");
const THREADGROUP_REDUCE: SourceFile = msl!("threadgroup_reduce");
const CAUSAL_CONV: SourceFile = msl!("causal_conv");
const SOFTPLUS: SourceFile = msl!("softplus");
const ROPE_ANGLE: SourceFile = msl!("rope_angle");

/// Threads per threadgroup of the elementwise and per-channel kernels.
const ELEMENTWISE_THREADS: u32 = 256;

/// How a kernel uses one of its buffers (wgpu's bind group layout needs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

use Access::{Read, ReadWrite};

/// A weight format with MSL kernels: its blocks as the file stores them.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MslFormat {
    F32,
    F16,
    Q8_0,
    Q5_0,
    Q4_K,
    Q5_K,
    Q6_K,
}

impl MslFormat {
    pub const ALL: [MslFormat; 7] = [
        MslFormat::F32,
        MslFormat::F16,
        MslFormat::Q8_0,
        MslFormat::Q5_0,
        MslFormat::Q4_K,
        MslFormat::Q5_K,
        MslFormat::Q6_K,
    ];

    pub fn from_ggml(ty: GgmlType) -> Option<MslFormat> {
        MslFormat::ALL.into_iter().find(|f| f.ggml_type() == ty)
    }

    pub fn ggml_type(self) -> GgmlType {
        match self {
            MslFormat::F32 => GgmlType::F32,
            MslFormat::F16 => GgmlType::F16,
            MslFormat::Q8_0 => GgmlType::Q8_0,
            MslFormat::Q5_0 => GgmlType::Q5_0,
            MslFormat::Q4_K => GgmlType::Q4_K,
            MslFormat::Q5_K => GgmlType::Q5_K,
            MslFormat::Q6_K => GgmlType::Q6_K,
        }
    }

    /// The lower-case name the MSL block types and files use, e.g. "q4_k".
    pub fn suffix(self) -> String {
        format!("{self:?}").to_lowercase()
    }

    /// Weight rows one threadgroup of this format's GEMV computes: its SIMD-groups times the
    /// rows per SIMD-group of its kernel file (`Q4_K_ROWS`, …).
    pub fn gemv_rows_per_threadgroup(self) -> usize {
        let simd_groups = MslKernel::Gemv(self).threads_per_threadgroup() as usize / 32;
        let rows_per_simd_group = match self {
            MslFormat::Q5_K => 1,
            MslFormat::Q4_K | MslFormat::Q6_K | MslFormat::Q8_0 => 2,
            MslFormat::F32 | MslFormat::F16 | MslFormat::Q5_0 => 4,
        };
        simd_groups * rows_per_simd_group
    }
}

/// Every MSL kernel the Metal backend dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MslKernel {
    Gemv(MslFormat),
    /// The GEMV of silu(gate) ⊙ up, computed as the activations are loaded.
    GemvSwiglu(MslFormat),
    /// The GEMV of rms_norm(x) ⊙ weight, Σx² gathered from the GEMV's own loads of x.
    GemvNormed(MslFormat),
    Embed(MslFormat),
    RmsNorm,
    L2Norm,
    Add,
    Swiglu,
    SigmoidMul,
    SliceCols,
    CopyRows,
    Rope,
    QkNormRope,
    /// Decode attention's first pass over a KV cache stored as the [`Storage`] given.
    AttentionBlocks(Storage),
    AttentionCombine,
    Conv1dSilu,
    ConvQkvNorm,
    DeltaNetGates,
    DeltaRule,
    Argmax,
}

impl MslKernel {
    pub fn all() -> Vec<MslKernel> {
        let mut all: Vec<MslKernel> = MslFormat::ALL.map(MslKernel::Gemv).to_vec();
        all.extend(MslFormat::ALL.map(MslKernel::GemvSwiglu));
        all.extend(MslFormat::ALL.map(MslKernel::GemvNormed));
        all.extend(MslFormat::ALL.map(MslKernel::Embed));
        all.extend([
            MslKernel::RmsNorm,
            MslKernel::L2Norm,
            MslKernel::Add,
            MslKernel::Swiglu,
            MslKernel::SigmoidMul,
            MslKernel::SliceCols,
            MslKernel::CopyRows,
            MslKernel::Rope,
            MslKernel::QkNormRope,
            MslKernel::AttentionBlocks(Storage::F32),
            MslKernel::AttentionBlocks(Storage::F16),
            MslKernel::AttentionCombine,
            MslKernel::Conv1dSilu,
            MslKernel::ConvQkvNorm,
            MslKernel::DeltaNetGates,
            MslKernel::DeltaRule,
            MslKernel::Argmax,
        ]);
        all
    }

    /// A name for the composed program, e.g. "gemv_q4_k", "embed_q8_0", "rms_norm".
    pub fn name(self) -> String {
        match self {
            MslKernel::Gemv(f) => format!("gemv_{}", f.suffix()),
            MslKernel::GemvSwiglu(f) => format!("gemv_swiglu_{}", f.suffix()),
            MslKernel::GemvNormed(f) => format!("gemv_normed_{}", f.suffix()),
            MslKernel::Embed(f) => format!("embed_{}", f.suffix()),
            MslKernel::AttentionBlocks(s) => format!("attention_blocks_{s:?}").to_lowercase(),
            _ => self.entry().to_string(),
        }
    }

    /// The kernel function's name in the source.
    pub fn entry(self) -> &'static str {
        match self {
            MslKernel::Gemv(format)
            | MslKernel::GemvSwiglu(format)
            | MslKernel::GemvNormed(format) => match format {
                MslFormat::F32 => "gemv_f32",
                MslFormat::F16 => "gemv_f16",
                MslFormat::Q8_0 => "gemv_q8_0",
                MslFormat::Q5_0 => "gemv_q5_0",
                MslFormat::Q4_K => "gemv_q4_k",
                MslFormat::Q5_K => "gemv_q5_k",
                MslFormat::Q6_K => "gemv_q6_k",
            },
            MslKernel::Embed(_) => "embed",
            MslKernel::RmsNorm => "rms_norm",
            MslKernel::L2Norm => "l2_norm",
            MslKernel::Add => "add",
            MslKernel::Swiglu => "swiglu",
            MslKernel::SigmoidMul => "sigmoid_mul",
            MslKernel::SliceCols => "slice_cols",
            MslKernel::CopyRows => "copy_rows",
            MslKernel::Rope => "rope",
            MslKernel::QkNormRope => "qk_norm_rope",
            MslKernel::AttentionBlocks(_) => "attention_blocks",
            MslKernel::AttentionCombine => "attention_combine",
            MslKernel::Conv1dSilu => "conv1d_silu",
            MslKernel::ConvQkvNorm => "conv_qkv_norm",
            MslKernel::DeltaNetGates => "delta_net_gates",
            MslKernel::DeltaRule => "delta_rule",
            MslKernel::Argmax => "argmax",
        }
    }

    /// The op class the profile counts this kernel in (as the wgpu backend names them).
    pub fn class(self) -> String {
        match self {
            MslKernel::Gemv(f) | MslKernel::GemvSwiglu(f) | MslKernel::GemvNormed(f) => {
                format!("matmul {}", f.ggml_type().name())
            }
            MslKernel::Embed(f) => format!("embed {}", f.ggml_type().name()),
            other => other.entry().to_string(),
        }
    }

    /// Threads per threadgroup, fixed when the pipeline is made (Metal's passthrough takes it
    /// with the source). The GEMVs' SIMD-groups per threadgroup follow ggml-metal's measured
    /// choices for Apple GPUs: 4 for Q8_0 (cheap decoding), 2 for the others.
    pub fn threads_per_threadgroup(self) -> u32 {
        match self {
            MslKernel::Gemv(MslFormat::Q8_0)
            | MslKernel::GemvSwiglu(MslFormat::Q8_0)
            | MslKernel::GemvNormed(MslFormat::Q8_0) => 128,
            MslKernel::Gemv(_) | MslKernel::GemvSwiglu(_) | MslKernel::GemvNormed(_) => 64,
            MslKernel::Embed(_) => 64,
            MslKernel::Argmax => 1024,
            _ => ELEMENTWISE_THREADS,
        }
    }

    /// How the kernel uses `[[buffer(1)]]`, `[[buffer(2)]]`, …; `[[buffer(0)]]` is always its
    /// parameter struct.
    pub fn buffers(self) -> &'static [Access] {
        match self {
            MslKernel::Gemv(_) | MslKernel::GemvSwiglu(_) | MslKernel::GemvNormed(_) => {
                &[Read, Read, ReadWrite, Read]
            }
            MslKernel::Embed(_) => &[Read, Read, ReadWrite],
            MslKernel::RmsNorm => &[Read, Read, Read, ReadWrite],
            MslKernel::L2Norm => &[Read, ReadWrite],
            MslKernel::Add => &[ReadWrite, Read],
            MslKernel::Swiglu | MslKernel::SigmoidMul => &[Read, Read, ReadWrite],
            MslKernel::SliceCols | MslKernel::CopyRows | MslKernel::Rope => &[Read, ReadWrite],
            MslKernel::QkNormRope => &[Read, Read, Read, Read, ReadWrite, ReadWrite],
            MslKernel::AttentionBlocks(_) => &[Read, Read, Read, ReadWrite, ReadWrite, ReadWrite],
            MslKernel::AttentionCombine => &[Read, Read, ReadWrite],
            MslKernel::Conv1dSilu => &[Read, Read, ReadWrite, ReadWrite],
            MslKernel::ConvQkvNorm => &[Read, Read, ReadWrite, ReadWrite, ReadWrite, ReadWrite],
            MslKernel::DeltaNetGates => &[Read, Read, Read, Read, ReadWrite, ReadWrite],
            MslKernel::DeltaRule => &[
                Read, Read, Read, Read, Read, ReadWrite, ReadWrite, Read, Read,
            ],
            MslKernel::Argmax => &[Read, ReadWrite],
        }
    }

    /// The files whose concatenation is this kernel, preludes first.
    pub fn files(self) -> Vec<SourceFile> {
        match self {
            MslKernel::Gemv(format) => gemv_files(msl!("gemv_input_plain"), format),
            MslKernel::GemvSwiglu(format) => gemv_files(msl!("gemv_input_swiglu"), format),
            MslKernel::GemvNormed(format) => gemv_files(msl!("gemv_input_normed"), format),
            MslKernel::Embed(_) => vec![QUANT_BLOCKS, msl!("embed")],
            MslKernel::RmsNorm => vec![THREADGROUP_REDUCE, msl!("rms_norm")],
            MslKernel::L2Norm => vec![THREADGROUP_REDUCE, msl!("l2_norm")],
            MslKernel::Add => vec![msl!("add")],
            MslKernel::Swiglu => vec![msl!("swiglu")],
            MslKernel::SigmoidMul => vec![msl!("sigmoid_mul")],
            MslKernel::SliceCols => vec![msl!("slice_cols")],
            MslKernel::CopyRows => vec![msl!("copy_rows")],
            MslKernel::Rope => vec![ROPE_ANGLE, msl!("rope")],
            MslKernel::QkNormRope => vec![THREADGROUP_REDUCE, ROPE_ANGLE, msl!("qk_norm_rope")],
            MslKernel::AttentionBlocks(storage) => vec![
                match storage {
                    Storage::F32 => msl!("kv_cache_f32"),
                    Storage::F16 => msl!("kv_cache_f16"),
                },
                msl!("attention_blocks"),
            ],
            MslKernel::AttentionCombine => vec![msl!("attention_combine")],
            MslKernel::Conv1dSilu => vec![CAUSAL_CONV, msl!("conv1d_silu")],
            MslKernel::ConvQkvNorm => vec![THREADGROUP_REDUCE, CAUSAL_CONV, msl!("conv_qkv_norm")],
            MslKernel::DeltaNetGates => vec![SOFTPLUS, msl!("delta_net_gates")],
            MslKernel::DeltaRule => vec![SOFTPLUS, msl!("delta_rule")],
            MslKernel::Argmax => vec![msl!("argmax")],
        }
    }

    /// The composed source. The embedding kernel is written against `WeightBlock`, which is
    /// named here, after the block definitions.
    pub fn source(self) -> String {
        let mut source = String::new();
        for file in self.files() {
            if let (MslKernel::Embed(format), "embed.metal") = (self, file.name) {
                source.push_str(&format!("typedef block_{} WeightBlock;\n", format.suffix()));
            }
            source.push_str(&format!("#line 1 \"{}\"\n{}\n", file.name, file.source));
        }
        source
    }
}

/// A GEMV: the shared GEMV code, then the file defining its input (`GemvInput`), then the format's
/// kernel.
fn gemv_files(input: SourceFile, format: MslFormat) -> Vec<SourceFile> {
    vec![QUANT_BLOCKS, GEMV_COMMON, input, gemv_file(format)]
}

fn gemv_file(format: MslFormat) -> SourceFile {
    match format {
        MslFormat::F32 => msl!("gemv_f32"),
        MslFormat::F16 => msl!("gemv_f16"),
        MslFormat::Q8_0 => msl!("gemv_q8_0"),
        MslFormat::Q5_0 => msl!("gemv_q5_0"),
        MslFormat::Q4_K => msl!("gemv_q4_k"),
        MslFormat::Q5_K => msl!("gemv_q5_k"),
        MslFormat::Q6_K => msl!("gemv_q6_k"),
    }
}
