//! Hugging Face tensor names, shapes and values → GGUF `qwen35` tensors, as llama.cpp's converter
//! maps them (QWEN35.md §7.3–§7.4): the name map, the shape each name must have under the config,
//! the value transforms (V heads grouped → tiled, `+1` on the (1 + w) norms, `ssm_a = −exp(A_log)`,
//! the conv kernel squeezed) and the stored type under each `--outtype`.

use super::checkpoint::{SourceDtype, SourceTensor};
use super::config::TextConfig;
use super::ConvertError;
use crate::quant::GgmlType;

/// `--outtype`: the type of every tensor that is not kept in F32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutType {
    F32,
    F16,
    Bf16,
    Q8_0,
}

impl OutType {
    pub const ALL: [OutType; 4] = [OutType::F32, OutType::F16, OutType::Bf16, OutType::Q8_0];

    pub fn name(self) -> &'static str {
        match self {
            OutType::F32 => "f32",
            OutType::F16 => "f16",
            OutType::Bf16 => "bf16",
            OutType::Q8_0 => "q8_0",
        }
    }

    pub fn from_name(name: &str) -> Option<OutType> {
        OutType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// `general.file_type` (llama.cpp `LLAMA_FTYPE_*`).
    pub fn file_type(self) -> u32 {
        match self {
            OutType::F32 => 0,
            OutType::F16 => 1,
            OutType::Bf16 => 32,
            OutType::Q8_0 => 7,
        }
    }

    fn ggml_type(self) -> GgmlType {
        match self {
            OutType::F32 => GgmlType::F32,
            OutType::F16 => GgmlType::F16,
            OutType::Bf16 => GgmlType::BF16,
            OutType::Q8_0 => GgmlType::Q8_0,
        }
    }
}

/// A value transform, applied in the checkpoint's precision (f16 stays f16, as in torch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transform {
    None,
    PlusOne,
    NegExp,
}

/// Which part of a tensor is indexed by value head, and so reordered grouped → tiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VHeads {
    None,
    /// Rows from `from_row` on, heads of `head_dim` rows.
    Rows {
        from_row: usize,
        head_dim: usize,
    },
    /// Columns, heads of `head_dim` columns.
    Columns {
        head_dim: usize,
    },
}

/// One tensor to write: where it comes from and what is done to it.
#[derive(Clone, Debug)]
pub struct PlannedTensor {
    pub source: SourceTensor,
    pub name: String,
    /// ggml `ne`: the GGUF shape, innermost first.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    transform: Transform,
    v_heads: VHeads,
}

/// The HF name as llama.cpp's tensor filter renames it: the language model lifted out of a
/// multimodal checkpoint, the MTP block moved to layer `n_layer + i`. None: not converted
/// (the vision tower; the MTP block under `--no-mtp`).
fn renamed(name: &str, n_layer: usize, keep_mtp: bool) -> Option<String> {
    let name = name.replacen("language_model.", "", 1);
    let name = name
        .strip_prefix("model.mtp.")
        .map_or(name.clone(), |rest| format!("mtp.{rest}"));
    if is_vision(&name) {
        return None;
    }
    let Some(rest) = name.strip_prefix("mtp.") else {
        return Some(name);
    };
    if !keep_mtp {
        return None;
    }
    let parts: Vec<&str> = rest.splitn(3, '.').collect();
    if parts.len() == 3 && parts[0] == "layers" && parts[1].chars().all(|c| c.is_ascii_digit()) {
        let index: usize = parts[1].parse().ok()?;
        return Some(format!("model.layers.{}.{}", n_layer + index, parts[2]));
    }
    let renamed = match parts.as_slice() {
        ["fc", suffix] => format!("eh_proj.{suffix}"),
        ["pre_fc_norm_embedding", suffix] => format!("enorm.{suffix}"),
        ["pre_fc_norm_hidden", suffix] => format!("hnorm.{suffix}"),
        ["norm", suffix] => format!("shared_head.norm.{suffix}"),
        _ => return Some(name),
    };
    Some(format!("model.layers.{n_layer}.{renamed}"))
}

/// The multimodal parts llama.cpp's text converter skips.
fn is_vision(name: &str) -> bool {
    name.starts_with("mlp")
        || ["visual.", "vision.", "vision_", "patch_embed", "merger."]
            .iter()
            .any(|part| name.contains(part))
}

pub fn is_vision_tensor(name: &str) -> bool {
    is_vision(&name.replacen("language_model.", "", 1))
}

/// The GGUF name, HF shape, transform and V-head layout of one (renamed) HF tensor.
struct Mapped {
    name: String,
    hf_shape: Vec<usize>,
    transform: Transform,
    v_heads: VHeads,
}

fn map(name: &str, c: &TextConfig, block_count: usize) -> Option<Mapped> {
    let plain = |gguf: &str, shape: Vec<usize>| Mapped {
        name: gguf.to_string(),
        hf_shape: shape,
        transform: Transform::None,
        v_heads: VHeads::None,
    };
    let norm = |gguf: String, len: usize| Mapped {
        name: gguf,
        hf_shape: vec![len],
        transform: Transform::PlusOne,
        v_heads: VHeads::None,
    };
    let d = c.n_embd;
    match name {
        "lm_head.weight" => return Some(plain("output.weight", vec![c.n_vocab, d])),
        "model.embed_tokens.weight" => return Some(plain("token_embd.weight", vec![c.n_vocab, d])),
        "model.norm.weight" => return Some(norm("output_norm.weight".into(), d)),
        _ => {}
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    if layer >= block_count {
        return None;
    }
    let blk = |s: &str| format!("blk.{layer}.{s}");
    let with = |gguf: &str, shape: Vec<usize>, transform, v_heads| Mapped {
        name: blk(gguf),
        hf_shape: shape,
        transform,
        v_heads,
    };
    let q_dim = c.n_head * c.head_dim;
    let kv_dim = c.n_head_kv * c.head_dim;
    let qk_channels = 2 * c.ssm_k_heads * c.ssm_k_dim;
    let conv_dim = qk_channels + c.ssm_inner();
    let v = c.ssm_v_dim;
    let mtp = layer >= c.n_layer;
    let recurrent = !mtp && c.is_recurrent(layer);
    let none = Transform::None;
    let mapped = match suffix {
        "input_layernorm.weight" => norm(blk("attn_norm.weight"), d),
        "post_attention_layernorm.weight" => norm(blk("post_attention_norm.weight"), d),
        "mlp.gate_proj.weight" => with("ffn_gate.weight", vec![c.n_ff, d], none, VHeads::None),
        "mlp.up_proj.weight" => with("ffn_up.weight", vec![c.n_ff, d], none, VHeads::None),
        "mlp.down_proj.weight" => with("ffn_down.weight", vec![d, c.n_ff], none, VHeads::None),
        "self_attn.q_proj.weight" if !recurrent => {
            with("attn_q.weight", vec![2 * q_dim, d], none, VHeads::None)
        }
        "self_attn.k_proj.weight" if !recurrent => {
            with("attn_k.weight", vec![kv_dim, d], none, VHeads::None)
        }
        "self_attn.v_proj.weight" if !recurrent => {
            with("attn_v.weight", vec![kv_dim, d], none, VHeads::None)
        }
        "self_attn.o_proj.weight" if !recurrent => {
            with("attn_output.weight", vec![d, q_dim], none, VHeads::None)
        }
        "self_attn.q_norm.weight" if !recurrent => norm(blk("attn_q_norm.weight"), c.head_dim),
        "self_attn.k_norm.weight" if !recurrent => norm(blk("attn_k_norm.weight"), c.head_dim),
        "linear_attn.in_proj_qkv.weight" if recurrent => with(
            "attn_qkv.weight",
            vec![conv_dim, d],
            none,
            VHeads::Rows {
                from_row: qk_channels,
                head_dim: v,
            },
        ),
        "linear_attn.in_proj_z.weight" if recurrent => with(
            "attn_gate.weight",
            vec![c.ssm_inner(), d],
            none,
            VHeads::Rows {
                from_row: 0,
                head_dim: v,
            },
        ),
        "linear_attn.in_proj_b.weight" if recurrent => with(
            "ssm_beta.weight",
            vec![c.ssm_v_heads, d],
            none,
            VHeads::Rows {
                from_row: 0,
                head_dim: 1,
            },
        ),
        "linear_attn.in_proj_a.weight" if recurrent => with(
            "ssm_alpha.weight",
            vec![c.ssm_v_heads, d],
            none,
            VHeads::Rows {
                from_row: 0,
                head_dim: 1,
            },
        ),
        "linear_attn.conv1d.weight" if recurrent => with(
            "ssm_conv1d.weight",
            vec![conv_dim, 1, c.conv_kernel],
            none,
            VHeads::Rows {
                from_row: qk_channels,
                head_dim: v,
            },
        ),
        "linear_attn.dt_bias" if recurrent => with(
            "ssm_dt.bias",
            vec![c.ssm_v_heads],
            none,
            VHeads::Rows {
                from_row: 0,
                head_dim: 1,
            },
        ),
        "linear_attn.A_log" if recurrent => with(
            "ssm_a",
            vec![c.ssm_v_heads],
            Transform::NegExp,
            VHeads::Rows {
                from_row: 0,
                head_dim: 1,
            },
        ),
        // The gated norm's weight is used as is (no 1 + w).
        "linear_attn.norm.weight" if recurrent => {
            with("ssm_norm.weight", vec![v], none, VHeads::None)
        }
        "linear_attn.out_proj.weight" if recurrent => with(
            "ssm_out.weight",
            vec![d, c.ssm_inner()],
            none,
            VHeads::Columns { head_dim: v },
        ),
        "eh_proj.weight" if mtp => with("nextn.eh_proj.weight", vec![d, 2 * d], none, VHeads::None),
        "enorm.weight" if mtp => norm(blk("nextn.enorm.weight"), d),
        "hnorm.weight" if mtp => norm(blk("nextn.hnorm.weight"), d),
        "shared_head.norm.weight" if mtp => norm(blk("nextn.shared_head_norm.weight"), d),
        _ => return None,
    };
    Some(mapped)
}

/// Every tensor the checkpoint's text model converts to, in the converter's order; checks names
/// and shapes against the config and that nothing a layer needs is missing.
pub fn plan(
    tensors: &[SourceTensor],
    config: &TextConfig,
    keep_mtp: bool,
    out_type: OutType,
    shard_path: impl Fn(&SourceTensor) -> std::path::PathBuf,
) -> Result<Vec<PlannedTensor>, ConvertError> {
    let n_mtp = if keep_mtp {
        mtp_layers(tensors, config)
    } else {
        0
    };
    let block_count = config.n_layer + n_mtp;
    let mut planned = Vec::new();
    for source in tensors {
        let Some(name) = renamed(&source.name, config.n_layer, keep_mtp) else {
            continue;
        };
        let mapped =
            map(&name, config, block_count).ok_or_else(|| ConvertError::UnknownTensor {
                path: shard_path(source),
                tensor: source.name.clone(),
            })?;
        if source.shape != mapped.hf_shape {
            return Err(ConvertError::Shape {
                path: shard_path(source),
                tensor: source.name.clone(),
                found: source.shape.clone(),
                expected: mapped.hf_shape,
                config: config.path.clone(),
            });
        }
        // The conv kernel is squeezed from [C, 1, K] to [C, K]; GGUF dims are reversed.
        let dims: Vec<u64> = mapped
            .hf_shape
            .iter()
            .rev()
            .filter(|&&n| !(mapped.name.ends_with("ssm_conv1d.weight") && n == 1))
            .map(|&n| n as u64)
            .collect();
        let ggml_type = stored_type(&mapped.name, &dims, out_type);
        planned.push(PlannedTensor {
            source: source.clone(),
            name: mapped.name,
            dims,
            ggml_type,
            transform: mapped.transform,
            v_heads: mapped.v_heads,
        });
    }
    check_complete(&planned, config, block_count)?;
    Ok(planned)
}

/// MTP layers the checkpoint holds: `mtp_num_hidden_layers`, or as many as its `mtp.layers.*`.
fn mtp_layers(tensors: &[SourceTensor], config: &TextConfig) -> usize {
    if config.n_mtp > 0 {
        return config.n_mtp;
    }
    tensors
        .iter()
        .filter_map(|t| {
            let name = t.name.strip_prefix("model.").unwrap_or(&t.name);
            let index = name.strip_prefix("mtp.layers.")?.split('.').next()?;
            index.parse::<usize>().ok().map(|i| i + 1)
        })
        .max()
        .unwrap_or(0)
}

/// The converter's type rule: 1-D tensors, norms, the conv kernel and tensors not named
/// `*.weight` stay F32; the rest take the out type (Q8_0 rows that are not whole blocks: F16).
fn stored_type(name: &str, dims: &[u64], out_type: OutType) -> GgmlType {
    if dims.len() <= 1
        || name.ends_with("_norm.weight")
        || name.ends_with("ssm_conv1d.weight")
        || !name.ends_with(".weight")
    {
        return GgmlType::F32;
    }
    let ty = out_type.ggml_type();
    if ty == GgmlType::Q8_0 && !dims[0].is_multiple_of(32) {
        return GgmlType::F16;
    }
    ty
}

fn check_complete(
    planned: &[PlannedTensor],
    config: &TextConfig,
    block_count: usize,
) -> Result<(), ConvertError> {
    let have: std::collections::HashSet<&str> = planned.iter().map(|t| t.name.as_str()).collect();
    let mut needed: Vec<String> = vec!["token_embd.weight".into(), "output_norm.weight".into()];
    if !config.tied_embeddings {
        needed.push("output.weight".into());
    }
    for layer in 0..block_count {
        let mut suffixes = vec![
            "attn_norm.weight",
            "post_attention_norm.weight",
            "ffn_gate.weight",
            "ffn_up.weight",
            "ffn_down.weight",
        ];
        if layer < config.n_layer && config.is_recurrent(layer) {
            suffixes.extend([
                "attn_qkv.weight",
                "attn_gate.weight",
                "ssm_beta.weight",
                "ssm_alpha.weight",
                "ssm_conv1d.weight",
                "ssm_dt.bias",
                "ssm_a",
                "ssm_norm.weight",
                "ssm_out.weight",
            ]);
        } else {
            suffixes.extend([
                "attn_q.weight",
                "attn_k.weight",
                "attn_v.weight",
                "attn_output.weight",
                "attn_q_norm.weight",
                "attn_k_norm.weight",
            ]);
        }
        if layer >= config.n_layer {
            suffixes.extend([
                "nextn.eh_proj.weight",
                "nextn.enorm.weight",
                "nextn.hnorm.weight",
                "nextn.shared_head_norm.weight",
            ]);
        }
        needed.extend(suffixes.iter().map(|s| format!("blk.{layer}.{s}")));
    }
    match needed
        .into_iter()
        .find(|name| !have.contains(name.as_str()))
    {
        Some(missing) => Err(ConvertError::MissingTensor {
            tensor: missing,
            config: config.path.clone(),
        }),
        None => Ok(()),
    }
}

impl PlannedTensor {
    /// The tensor's values in GGUF layout, transformed.
    pub fn values(&self, raw: Vec<f32>, config: &TextConfig) -> Vec<f32> {
        let mut values = match self.v_heads {
            VHeads::None => raw,
            VHeads::Rows { from_row, head_dim } => {
                let row_len = self.source.n_elements() / self.source.shape[0];
                let start = from_row * row_len;
                let mut out = raw[..start].to_vec();
                out.extend(grouped_to_tiled(&raw[start..], config, head_dim * row_len));
                out
            }
            VHeads::Columns { head_dim } => raw
                .chunks_exact(self.source.shape[1])
                .flat_map(|row| grouped_to_tiled(row, config, head_dim))
                .collect(),
        };
        let f16_precision = self.source.dtype == SourceDtype::F16;
        let round = |x: f32| {
            if f16_precision {
                half::f16::from_f32(x).to_f32()
            } else {
                x
            }
        };
        match self.transform {
            Transform::None => {}
            Transform::PlusOne => values.iter_mut().for_each(|x| *x = round(*x + 1.0)),
            // exp in f64 rounded once to f32: the correctly rounded value torch's exp gives.
            Transform::NegExp => values
                .iter_mut()
                .for_each(|x| *x = round(-((f64::from(*x)).exp() as f32))),
        }
        values
    }
}

/// Value heads from grouped order (head g·r + j belongs to key head g) to tiled order (GGUF head
/// j·Hk + g), each head `head_len` consecutive values.
fn grouped_to_tiled(x: &[f32], config: &TextConfig, head_len: usize) -> Vec<f32> {
    let key_heads = config.ssm_k_heads;
    let per_key = config.ssm_v_heads / key_heads;
    let mut out = Vec::with_capacity(x.len());
    for j in 0..per_key {
        for g in 0..key_heads {
            let head = g * per_key + j;
            out.extend_from_slice(&x[head * head_len..(head + 1) * head_len]);
        }
    }
    out
}
