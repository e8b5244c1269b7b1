//! The model shapes `qwen35 synth` can write: the dense Qwen3.5 / Qwen3.6 sizes, with the
//! hyper-parameters of their Hugging Face configs, and a tiny one for smoke tests.

/// A model size whose tensor names, shapes and metadata a synthetic file reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    Qwen36_27B,
    Qwen35_9B,
    Qwen35_4B,
    Qwen35_2B,
    Qwen35_0_8B,
    /// The shape of the bundled test fixture (`tests/fixtures/golden.json` "config").
    Tiny,
}

/// Hyper-parameters of one model (QWEN35.md §1; GGUF keys of §7.2).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    pub n_layer: u64,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub rotary_dims: u64,
    pub rope_sections: [i32; 4],
    pub rope_theta: f32,
    pub rms_eps: f32,
    pub conv_kernel: u64,
    /// Gated DeltaNet key (= query) heads, `ssm.group_count`.
    pub ssm_k_heads: u64,
    /// Gated DeltaNet value heads, `ssm.time_step_rank`.
    pub ssm_v_heads: u64,
    pub ssm_k_dim: u64,
    pub ssm_v_dim: u64,
    pub full_attention_interval: u64,
    pub context_length: u64,
    /// Rows of `token_embd`/`output` without `--vocab-from`; None means the size of the built-in
    /// vocabulary itself.
    pub vocab_size: Option<u64>,
    /// No `output.weight`: the logits use `token_embd`.
    pub tied_embeddings: bool,
}

impl ModelShape {
    /// Full attention at layers `interval-1, 2·interval-1, …` (QWEN35.md §1), Gated DeltaNet elsewhere.
    pub fn is_full_attention(&self, layer: u64) -> bool {
        (layer + 1).is_multiple_of(self.full_attention_interval)
    }

    /// Width of the GDN conv / `attn_qkv` output: q and k of every key head, v of every value head.
    pub fn ssm_conv_dim(&self) -> u64 {
        2 * self.ssm_k_heads * self.ssm_k_dim + self.ssm_v_heads * self.ssm_v_dim
    }

    pub fn ssm_inner(&self) -> u64 {
        self.ssm_v_heads * self.ssm_v_dim
    }
}

const REAL_VOCAB: u64 = 248_320;

/// What every released dense size shares (HF `text_config` / GGUF dumps): head_dim 256 with a
/// quarter rotated, θ = 1e7, mRoPE [11,11,10], eps 1e-6, conv 4, 128-wide GDN heads, 256k context.
const fn released(
    n_layer: u64,
    n_embd: u64,
    n_ff: u64,
    heads: (u64, u64),
    ssm_heads: (u64, u64),
    tied_embeddings: bool,
) -> ModelShape {
    ModelShape {
        n_layer,
        n_embd,
        n_ff,
        n_head: heads.0,
        n_head_kv: heads.1,
        head_dim: 256,
        rotary_dims: 64,
        rope_sections: [11, 11, 10, 0],
        rope_theta: 1e7,
        rms_eps: 1e-6,
        conv_kernel: 4,
        ssm_k_heads: ssm_heads.0,
        ssm_v_heads: ssm_heads.1,
        ssm_k_dim: 128,
        ssm_v_dim: 128,
        full_attention_interval: 4,
        context_length: 262_144,
        vocab_size: Some(REAL_VOCAB),
        tied_embeddings,
    }
}

impl Preset {
    pub const ALL: [Preset; 6] = [
        Preset::Qwen36_27B,
        Preset::Qwen35_9B,
        Preset::Qwen35_4B,
        Preset::Qwen35_2B,
        Preset::Qwen35_0_8B,
        Preset::Tiny,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Qwen36_27B => "qwen3.6-27b",
            Preset::Qwen35_9B => "qwen3.5-9b",
            Preset::Qwen35_4B => "qwen3.5-4b",
            Preset::Qwen35_2B => "qwen3.5-2b",
            Preset::Qwen35_0_8B => "qwen3.5-0.8b",
            Preset::Tiny => "tiny",
        }
    }

    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn shape(self) -> ModelShape {
        match self {
            Preset::Qwen36_27B => released(64, 5120, 17408, (24, 4), (16, 48), false),
            Preset::Qwen35_9B => released(32, 4096, 12288, (16, 4), (16, 32), false),
            Preset::Qwen35_4B => released(32, 2560, 9216, (16, 4), (16, 32), true),
            Preset::Qwen35_2B => released(24, 2048, 6144, (8, 2), (16, 16), true),
            Preset::Qwen35_0_8B => released(24, 1024, 3584, (8, 2), (16, 16), true),
            Preset::Tiny => ModelShape {
                n_layer: 4,
                n_embd: 256,
                n_ff: 512,
                n_head: 4,
                n_head_kv: 2,
                head_dim: 64,
                rotary_dims: 16,
                rope_sections: [3, 3, 2, 0],
                rope_theta: 1e7,
                rms_eps: 1e-6,
                conv_kernel: 4,
                ssm_k_heads: 4,
                ssm_v_heads: 8,
                ssm_k_dim: 32,
                ssm_v_dim: 32,
                full_attention_interval: 4,
                context_length: 4096,
                vocab_size: None,
                tied_embeddings: false,
            },
        }
    }

    /// Where the numbers come from and which of them are not confirmed.
    pub fn source(self) -> &'static str {
        match self {
            Preset::Qwen36_27B => {
                "docs/QWEN35.md §1 (HF configuration_qwen3_5.py + Qwen3.6-27B GGUF dumps in llama.cpp \
                 PR #22673); layers/hidden/FFN/heads/untied also in THUDM/slime \
                 scripts/models/qwen3.5-27B.sh. Confirmed."
            }
            Preset::Qwen35_9B => {
                "GGUF metadata dumps of Qwen3.5-9B Q4_K_M files (llama.cpp loader logs quoted in \
                 public repos): 32 layers, 4096/12288, 16/4 heads, GDN 16 key / 32 value heads \
                 (inner 4096). Untied: derived from the dump's tensor count (427 = with \
                 output.weight); the HF config.json itself was not read."
            }
            Preset::Qwen35_4B => {
                "THUDM/slime PR #1721 (32 layers, 2560/9216, 16/4 heads, head 256, checked there \
                 against HF config.json) and one third-party test copy of the HF text_config (GDN \
                 16 key / 32 value heads, tie_word_embeddings=true). GDN heads and tying rest on \
                 that single copy: not independently confirmed."
            }
            Preset::Qwen35_2B => {
                "GGUF metadata dump of unsloth Qwen3.5-2B (24 layers, 2048/6144, 8/2 heads, GDN \
                 16/16, inner 2048). Tied: derived from the dump's tensor count (320 = no \
                 output.weight); the HF config.json itself was not read."
            }
            Preset::Qwen35_0_8B => {
                "Copies of the HF Qwen/Qwen3.5-0.8B config.json in public test code (24 layers, \
                 1024/3584, 8/2 heads, GDN 16/16, tie_word_embeddings=true) agreeing with a GGUF \
                 dump (320 tensors) and THUDM/slime scripts/models/qwen3.5-0.8B.sh. Confirmed."
            }
            Preset::Tiny => {
                "The test fixture's config (tests/fixtures/golden.json): 4 layers, 256/512, 4/2 \
                 heads of 64, GDN 4 key / 8 value heads of 32; vocabulary = the built-in one."
            }
        }
    }
}
