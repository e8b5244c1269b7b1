//! The tensor list of a model and the ggml type of each tensor under stock `llama-quantize`.
//!
//! Type rule (llama.cpp `src/llama-quant.cpp`: `tensor_allows_quantization`,
//! `llama_tensor_get_type_impl`, `tensor_type_fallback`; QWEN35.md §7.3):
//! - Only tensors with 2+ dims whose name ends in "weight" are quantized; `*_norm.weight` and
//!   `ssm_conv1d` are not. Everything else keeps the converter's F32 (1-D, norms, conv, `ssm_a`,
//!   `ssm_dt.bias`).
//! - `output.weight`, and `token_embd.weight` when there is no `output.weight` (tied), become Q6_K
//!   unless the file type is Q8_0 (then Q8_0), or Q8_0 when the row width is not whole blocks.
//! - Q4_K_M: attn_v and attn_qkv share one "attn_v-like" counter (n = how many such tensors),
//!   ffn_down has its own (n = block_count); both become Q6_K when
//!   `use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2`. (Older llama.cpp gave
//!   attn_qkv Q5_K instead and counted only attn_v; released Q4_K_M files made by such builds
//!   show that: e.g. Qwen3.5-9B with 24 Q5_K tensors.)
//! - Q5_K_M: Q4_K_M's rule over a Q5_K base. Q4_K_S: the first four attn_v-like tensors and the
//!   ffn_down of the first eighth of layers become Q5_K. Q6_K and Q8_0: the base type throughout.
//!   (ffn_down's n is the number of ffn_down tensors: the block count, MTP layers included.)
//! - F16: every quantizable tensor is F16; no rule, no fallback.
//! - Width fallback, when `ne0` is not a multiple of the chosen type's block: Q4_K → Q5_0,
//!   Q6_K → Q8_0 (Q5_K → Q5_1 in llama.cpp, which has no quantizer here: such a Q5_K
//!   tensor is refused by `qwen35 quantize`), then F16 if still not whole 32-element blocks (llama.cpp refuses a Q8_0 row
//!   that is not whole blocks; here it becomes F16 too). Every released size has widths that
//!   are multiples of 256, so no preset reaches the fallback.

use super::preset::{ModelShape, Preset};
use crate::quant::GgmlType;

/// The file types `qwen35 synth` writes (llama.cpp `llama_ftype` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quant {
    Q4KM,
    Q4KS,
    Q5KM,
    Q6K,
    Q8_0,
    F16,
}

impl Quant {
    pub const ALL: [Quant; 6] = [
        Quant::Q4KM,
        Quant::Q4KS,
        Quant::Q5KM,
        Quant::Q6K,
        Quant::Q8_0,
        Quant::F16,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Quant::Q4KM => "q4_k_m",
            Quant::Q4KS => "q4_k_s",
            Quant::Q5KM => "q5_k_m",
            Quant::Q6K => "q6_k",
            Quant::Q8_0 => "q8_0",
            Quant::F16 => "f16",
        }
    }

    pub fn from_name(name: &str) -> Option<Quant> {
        Quant::ALL.into_iter().find(|q| q.name() == name)
    }

    /// `general.file_type` (llama.cpp `LLAMA_FTYPE_MOSTLY_*`).
    pub fn file_type(self) -> u32 {
        match self {
            Quant::Q4KM => 15,
            Quant::Q4KS => 14,
            Quant::Q5KM => 17,
            Quant::Q6K => 18,
            Quant::Q8_0 => 7,
            Quant::F16 => 1,
        }
    }

    /// The type of a quantizable tensor before the per-tensor rules.
    fn default_type(self) -> GgmlType {
        match self {
            Quant::Q4KM | Quant::Q4KS => GgmlType::Q4_K,
            Quant::Q5KM => GgmlType::Q5_K,
            Quant::Q6K => GgmlType::Q6_K,
            Quant::Q8_0 => GgmlType::Q8_0,
            Quant::F16 => GgmlType::F16,
        }
    }
}

/// How a tensor's random values are drawn (see `weights.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// N(0, std²) entries.
    Normal { std: f32 },
    /// Norm weights with the +1 folded in (and `ssm_norm`, whose plain weight starts at 1).
    NearOne,
    /// `ssm_a = −exp(A_log)`: negative decay rates.
    NegativeDecay,
    /// `ssm_dt.bias`.
    DtBias,
}

/// One tensor of the file: name, ggml `ne` dims, type, and how its values are drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedTensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    pub init: Init,
}

/// Every tensor of `preset` in file order, typed for `quant`, with the preset's own vocabulary
/// size (the real one, or the built-in vocabulary's for `tiny`).
pub fn plan(preset: Preset, quant: Quant) -> Vec<PlannedTensor> {
    let shape = preset.shape();
    let n_vocab = super::vocab::builtin_size(&shape);
    plan_for(&shape, quant, n_vocab)
}

/// Every tensor of a model of `shape` with `n_vocab` token rows, in file order.
pub fn plan_for(shape: &ModelShape, quant: Quant, n_vocab: u64) -> Vec<PlannedTensor> {
    let mut tensors = layout(shape, n_vocab);
    assign_types(&mut tensors, quant);
    tensors
}

/// Names, shapes and initialisation of every tensor (QWEN35.md §7.3), types still unset (F32).
fn layout(s: &ModelShape, n_vocab: u64) -> Vec<PlannedTensor> {
    let d = s.n_embd;
    let logit_std = 3.0 / (d as f32).sqrt();
    // Scaling the residual-branch outputs by 1/sqrt(2·layers) keeps the residual stream's size
    // independent of depth.
    let branch_out = 1.0 / ((2 * s.n_layer) as f32).sqrt();
    let matrix = |fan_in: u64| Init::Normal {
        std: 1.0 / (fan_in as f32).sqrt(),
    };
    let residual_out = |fan_in: u64| Init::Normal {
        std: branch_out / (fan_in as f32).sqrt(),
    };
    let mut out = Vec::new();
    let mut push = |name: String, dims: &[u64], init: Init| {
        out.push(PlannedTensor {
            name,
            dims: dims.to_vec(),
            ggml_type: GgmlType::F32,
            init,
        })
    };
    // A tied table also makes the logits, so it gets the output scale; else unit embeddings.
    let embd_std = if s.tied_embeddings { logit_std } else { 1.0 };
    push(
        "token_embd.weight".into(),
        &[d, n_vocab],
        Init::Normal { std: embd_std },
    );
    for layer in 0..s.n_layer {
        let t = |suffix: &str| format!("blk.{layer}.{suffix}");
        push(t("attn_norm.weight"), &[d], Init::NearOne);
        if s.is_full_attention(layer) {
            let q_dim = s.n_head * s.head_dim;
            let kv_dim = s.n_head_kv * s.head_dim;
            // Query and gate interleaved per head, hence twice the query width.
            push(t("attn_q.weight"), &[d, 2 * q_dim], matrix(d));
            push(t("attn_k.weight"), &[d, kv_dim], matrix(d));
            push(t("attn_v.weight"), &[d, kv_dim], matrix(d));
            push(t("attn_q_norm.weight"), &[s.head_dim], Init::NearOne);
            push(t("attn_k_norm.weight"), &[s.head_dim], Init::NearOne);
            push(t("attn_output.weight"), &[q_dim, d], residual_out(q_dim));
        } else {
            let inner = s.ssm_inner();
            push(t("attn_qkv.weight"), &[d, s.ssm_conv_dim()], matrix(d));
            push(t("attn_gate.weight"), &[d, inner], matrix(d));
            push(
                t("ssm_conv1d.weight"),
                &[s.conv_kernel, s.ssm_conv_dim()],
                matrix(s.conv_kernel),
            );
            push(t("ssm_dt.bias"), &[s.ssm_v_heads], Init::DtBias);
            push(t("ssm_a"), &[s.ssm_v_heads], Init::NegativeDecay);
            push(t("ssm_beta.weight"), &[d, s.ssm_v_heads], matrix(d));
            push(t("ssm_alpha.weight"), &[d, s.ssm_v_heads], matrix(d));
            push(t("ssm_norm.weight"), &[s.ssm_v_dim], Init::NearOne);
            push(t("ssm_out.weight"), &[inner, d], residual_out(inner));
        }
        push(t("post_attention_norm.weight"), &[d], Init::NearOne);
        push(t("ffn_gate.weight"), &[d, s.n_ff], matrix(d));
        push(t("ffn_up.weight"), &[d, s.n_ff], matrix(d));
        push(t("ffn_down.weight"), &[s.n_ff, d], residual_out(s.n_ff));
    }
    push("output_norm.weight".into(), &[d], Init::NearOne);
    if !s.tied_embeddings {
        push(
            "output.weight".into(),
            &[d, n_vocab],
            Init::Normal { std: logit_std },
        );
    }
    out
}

/// Sets every tensor's type by the stock rule, in file (= layer) order.
fn assign_types(tensors: &mut [PlannedTensor], quant: Quant) {
    let mut rule = TypeRule::new(quant, tensors.iter().map(|t| t.name.as_str()));
    for tensor in tensors.iter_mut() {
        if let Some(ty) = rule.next(&tensor.name, &tensor.dims) {
            tensor.ggml_type = ty;
        }
    }
}

/// llama-quantize's per-tensor type choice for a file type, shared by `qwen35 synth` and
/// `qwen35 quantize`. Its counters advance with each call, so tensors must come in the order
/// llama.cpp's loader sorts them: by layer, then by name.
pub struct TypeRule {
    quant: Quant,
    tied: bool,
    n_attn_v_like: u64,
    n_ffn_down: u64,
    i_attn_v_like: u64,
    i_ffn_down: u64,
}

impl TypeRule {
    /// A rule for a model with tensors `names`.
    pub fn new<'a>(quant: Quant, names: impl Iterator<Item = &'a str> + Clone) -> TypeRule {
        TypeRule {
            quant,
            tied: !names.clone().any(|name| name == "output.weight"),
            n_attn_v_like: names.clone().filter(|name| is_attn_v_like(name)).count() as u64,
            n_ffn_down: names.filter(|name| name.contains("ffn_down")).count() as u64,
            i_attn_v_like: 0,
            i_ffn_down: 0,
        }
    }

    /// The type of the next tensor, `None` when it is not quantized (kept as it is).
    pub fn next(&mut self, name: &str, dims: &[u64]) -> Option<GgmlType> {
        if !is_quantizable(name, dims) {
            return None;
        }
        let base = self.quant.default_type();
        if self.quant == Quant::F16 {
            return Some(base);
        }
        let ne0 = dims.first().copied().unwrap_or(0);
        let is_logit_table = name == "output.weight" || (self.tied && name == "token_embd.weight");
        let chosen = if is_logit_table {
            if !ne0.is_multiple_of(base.block_elems() as u64) || base == GgmlType::Q8_0 {
                GgmlType::Q8_0
            } else {
                GgmlType::Q6_K
            }
        } else if is_attn_v_like(name) {
            let i = self.i_attn_v_like;
            self.i_attn_v_like += 1;
            match self.quant {
                Quant::Q4KM | Quant::Q5KM if use_more_bits(i, self.n_attn_v_like) => GgmlType::Q6_K,
                Quant::Q4KS if i < 4 => GgmlType::Q5_K,
                _ => base,
            }
        } else if name.contains("ffn_down") {
            let i = self.i_ffn_down;
            self.i_ffn_down += 1;
            match self.quant {
                Quant::Q4KM | Quant::Q5KM if use_more_bits(i, self.n_ffn_down) => GgmlType::Q6_K,
                Quant::Q4KS if i < self.n_ffn_down / 8 => GgmlType::Q5_K,
                _ => base,
            }
        } else {
            base
        };
        Some(width_fallback(chosen, ne0))
    }
}

fn is_attn_v_like(name: &str) -> bool {
    name.contains("attn_v.weight") || name.contains("attn_qkv.weight")
}

fn is_quantizable(name: &str, dims: &[u64]) -> bool {
    dims.len() >= 2
        && name.ends_with("weight")
        && !name.contains("_norm.weight")
        && !name.contains("ssm_conv1d")
}

/// llama.cpp's "more bits" layers: the first and last eighth, and every third in between.
pub fn use_more_bits(i: u64, n: u64) -> bool {
    let eighth = n / 8;
    // Short-circuit: the subtraction only runs once i >= n/8.
    i < eighth || i >= 7 * n / 8 || (i - eighth) % 3 == 2
}

/// The type llama-quantize falls back to when a row of `ne0` is not whole blocks of `ty`.
pub fn width_fallback(ty: GgmlType, ne0: u64) -> GgmlType {
    if ne0.is_multiple_of(ty.block_elems() as u64) {
        return ty;
    }
    let fallback = match ty {
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q6_K => GgmlType::Q8_0,
        other => other,
    };
    if ne0.is_multiple_of(fallback.block_elems() as u64) {
        fallback
    } else {
        GgmlType::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_bits_layers_of_64() {
        let layers: Vec<u64> = (0..64).filter(|&i| use_more_bits(i, 64)).collect();
        let mut expected: Vec<u64> = (0..8).collect();
        expected.extend((10..56).step_by(3));
        expected.extend(56..64);
        assert_eq!(layers, expected);
    }

    #[test]
    fn fallback_for_widths_that_are_not_whole_blocks() {
        assert_eq!(width_fallback(GgmlType::Q4_K, 5120), GgmlType::Q4_K);
        assert_eq!(width_fallback(GgmlType::Q4_K, 4 * 32 * 3), GgmlType::Q5_0);
        assert_eq!(width_fallback(GgmlType::Q6_K, 96), GgmlType::Q8_0);
        assert_eq!(width_fallback(GgmlType::Q4_K, 100), GgmlType::F16);
    }
}
