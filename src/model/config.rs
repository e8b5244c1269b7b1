//! Hyper-parameters and layer schedule of a `qwen35` GGUF (QWEN35.md §1, §7.2).

use super::ModelError;
use crate::gguf::{GgufError, GgufFile, MetaArray, MetaValue};

pub const ARCH: &str = "qwen35";

/// Bound on every size read from the file, so that products of two sizes can never overflow
/// (2^24 is far above any real dimension, head count or trained context).
const MAX_SIZE: u32 = 1 << 24;

/// What mixes tokens in a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// Gated full attention with a KV cache (§4).
    FullAttention,
    /// Gated DeltaNet linear attention with conv and recurrent state (§5).
    DeltaNet,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Kind of each main-stack layer (MTP blocks excluded).
    pub layers: Vec<LayerKind>,
    pub n_embd: usize,
    pub n_ff: usize,
    pub vocab: usize,
    /// Context length the model was trained for.
    pub train_context: usize,
    pub rms_eps: f32,

    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub rope_dims: usize,
    pub rope_base: f32,

    pub conv_kernel: usize,
    /// Hk: query/key heads of the DeltaNet layers.
    pub ssm_k_heads: usize,
    /// Hv: value heads (and recurrent states) of the DeltaNet layers.
    pub ssm_v_heads: usize,
    /// Dk.
    pub ssm_k_dim: usize,
    /// Dv.
    pub ssm_v_dim: usize,
}

impl Config {
    pub fn n_layers(&self) -> usize {
        self.layers.len()
    }

    /// Hk·Dk: width of the q and of the k stream.
    pub fn ssm_key_width(&self) -> usize {
        self.ssm_k_heads * self.ssm_k_dim
    }

    /// Hv·Dv: width of the v stream and of z.
    pub fn ssm_value_width(&self) -> usize {
        self.ssm_v_heads * self.ssm_v_dim
    }

    /// Channels through the causal conv: q | k | v.
    pub fn conv_channels(&self) -> usize {
        2 * self.ssm_key_width() + self.ssm_value_width()
    }

    pub fn from_gguf(file: &GgufFile) -> Result<Config, ModelError> {
        let arch = file.get_str("general.architecture")?;
        if arch != ARCH {
            return Err(ModelError::WrongArch {
                found: arch.to_string(),
            });
        }
        let keys = Keys { file };
        let block_count = keys.positive("block_count")?;
        let nextn = keys.optional_u32("nextn_predict_layers")?.unwrap_or(0) as usize;
        if nextn >= block_count {
            return Err(invalid(
                "nextn_predict_layers",
                format!("{nextn} MTP layers leave no main layers of {block_count} blocks"),
            ));
        }
        let layers = layer_schedule(&keys, block_count, block_count - nextn)?;

        let n_head = keys.positive("attention.head_count")?;
        let n_kv_head = keys.positive("attention.head_count_kv")?;
        if !n_head.is_multiple_of(n_kv_head) {
            return Err(invalid(
                "attention.head_count_kv",
                format!("{n_kv_head} kv heads do not divide {n_head} heads"),
            ));
        }
        let head_dim = keys.positive("attention.key_length")?;
        let value_length = keys.positive("attention.value_length")?;
        if value_length != head_dim {
            return Err(invalid(
                "attention.value_length",
                format!("{value_length} differs from key_length {head_dim}"),
            ));
        }
        let rope_dims = keys.positive("rope.dimension_count")?;
        if rope_dims > head_dim || !rope_dims.is_multiple_of(2) {
            return Err(invalid(
                "rope.dimension_count",
                format!("{rope_dims} must be even and at most key_length {head_dim}"),
            ));
        }

        let ssm_k_heads = keys.positive("ssm.group_count")?;
        let ssm_v_heads = keys.positive("ssm.time_step_rank")?;
        if !ssm_v_heads.is_multiple_of(ssm_k_heads) {
            return Err(invalid(
                "ssm.time_step_rank",
                format!("{ssm_v_heads} value heads are not a multiple of {ssm_k_heads} key heads"),
            ));
        }
        let inner = keys.positive("ssm.inner_size")?;
        if !inner.is_multiple_of(ssm_v_heads) {
            return Err(invalid(
                "ssm.inner_size",
                format!("{inner} is not a multiple of {ssm_v_heads} value heads"),
            ));
        }

        let vocab = file
            .tensor("token_embd.weight")
            .and_then(|t| t.dims.get(1).copied())
            .ok_or_else(|| ModelError::MissingTensor {
                name: "token_embd.weight".into(),
            })? as usize;

        Ok(Config {
            layers,
            n_embd: keys.positive("embedding_length")?,
            n_ff: keys.positive("feed_forward_length")?,
            vocab,
            train_context: keys.positive("context_length")?,
            rms_eps: keys.positive_f32("attention.layer_norm_rms_epsilon")?,
            n_head,
            n_kv_head,
            head_dim,
            rope_dims,
            rope_base: keys.positive_f32("rope.freq_base")?,
            conv_kernel: keys.positive("ssm.conv_kernel")?,
            ssm_k_heads,
            ssm_v_heads,
            ssm_k_dim: keys.positive("ssm.state_size")?,
            ssm_v_dim: inner / ssm_v_heads,
        })
    }
}

fn invalid(key: &str, reason: String) -> ModelError {
    ModelError::InvalidConfig {
        key: format!("{ARCH}.{key}"),
        reason,
    }
}

/// Reads `qwen35.`-prefixed keys.
struct Keys<'f> {
    file: &'f GgufFile,
}

impl Keys<'_> {
    fn full(key: &str) -> String {
        format!("{ARCH}.{key}")
    }

    fn positive(&self, key: &str) -> Result<usize, ModelError> {
        match self.file.get_u32(&Self::full(key))? {
            0 => Err(invalid(key, "must not be 0".into())),
            v if v > MAX_SIZE => Err(invalid(key, format!("{v} is implausibly large"))),
            v => Ok(v as usize),
        }
    }

    fn positive_f32(&self, key: &str) -> Result<f32, ModelError> {
        let v = self.file.get_f32(&Self::full(key))?;
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(invalid(key, format!("{v} must be finite and positive")))
        }
    }

    fn optional_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        self.file.get_u32_opt(&Self::full(key))
    }
}

/// Layer kinds of the `n_main` main layers: from `attention.recurrent_layers` (one flag per block,
/// true = DeltaNet) when present, else every `full_attention_interval`-th layer is attention.
fn layer_schedule(
    keys: &Keys,
    block_count: usize,
    n_main: usize,
) -> Result<Vec<LayerKind>, ModelError> {
    let kind = |recurrent: bool| {
        if recurrent {
            LayerKind::DeltaNet
        } else {
            LayerKind::FullAttention
        }
    };
    let flags_key = "attention.recurrent_layers";
    if let Some(flags) = recurrent_flags(keys.file, &Keys::full(flags_key))? {
        if flags.len() != block_count && flags.len() != n_main {
            return Err(invalid(
                flags_key,
                format!(
                    "{} entries for {block_count} blocks ({n_main} main layers)",
                    flags.len()
                ),
            ));
        }
        return Ok(flags[..n_main].iter().map(|&r| kind(r)).collect());
    }
    let interval = keys.optional_u32("full_attention_interval")?.unwrap_or(4) as usize;
    if interval == 0 {
        return Err(invalid("full_attention_interval", "must not be 0".into()));
    }
    Ok((0..n_main).map(|i| kind((i + 1) % interval != 0)).collect())
}

/// A per-layer flag array (bools, or integers with non-zero = true); None when the key is absent.
fn recurrent_flags(file: &GgufFile, key: &str) -> Result<Option<Vec<bool>>, ModelError> {
    fn nonzero<T: Copy + Default + PartialEq>(v: &[T]) -> Vec<bool> {
        v.iter().map(|&x| x != T::default()).collect()
    }
    let array = match file.get(key) {
        None => return Ok(None),
        Some(MetaValue::Array(array)) => array,
        Some(other) => {
            return Err(ModelError::InvalidConfig {
                key: key.into(),
                reason: format!("is a {}, expected an array", other.value_type().name()),
            })
        }
    };
    let flags = match array {
        MetaArray::Bool(v) => v.clone(),
        MetaArray::U8(v) => nonzero(v),
        MetaArray::I8(v) => nonzero(v),
        MetaArray::U16(v) => nonzero(v),
        MetaArray::I16(v) => nonzero(v),
        MetaArray::U32(v) => nonzero(v),
        MetaArray::I32(v) => nonzero(v),
        MetaArray::U64(v) => nonzero(v),
        MetaArray::I64(v) => nonzero(v),
        _ => {
            return Err(ModelError::InvalidConfig {
                key: key.into(),
                reason: "expected an array of bools or integers".into(),
            })
        }
    };
    Ok(Some(flags))
}
