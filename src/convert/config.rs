//! config.json of a Qwen3.5 / Qwen3.6 checkpoint: the text model's hyper-parameters, read the way
//! llama.cpp's converter reads them (a `text_config` is lifted over the top level; a missing
//! `layer_types` is derived as transformers derives it), and the `qwen35.*` metadata they give.

use super::ConvertError;
use crate::gguf::{MetaArray, MetaValue};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The checkpoint classes whose text model converts to GGUF arch `qwen35`.
pub const TEXT_ARCHITECTURE: &str = "Qwen3_5ForCausalLM";
pub const MULTIMODAL_ARCHITECTURE: &str = "Qwen3_5ForConditionalGeneration";

pub fn read_json(path: &Path) -> Result<Value, ConvertError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConvertError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ConvertError::BadJson {
        path: path.to_path_buf(),
        problem: e.to_string(),
    })
}

/// The text model's hyper-parameters.
#[derive(Clone, Debug)]
pub struct TextConfig {
    pub path: PathBuf,
    pub architecture: String,
    /// Merged parameters (top level overlaid by `text_config`).
    params: Map<String, Value>,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_vocab: usize,
    pub conv_kernel: usize,
    pub ssm_k_heads: usize,
    pub ssm_k_dim: usize,
    pub ssm_v_heads: usize,
    pub ssm_v_dim: usize,
    pub recurrent: Vec<bool>,
    pub full_attention_interval: usize,
    pub n_mtp: usize,
    pub tied_embeddings: bool,
    rope: Map<String, Value>,
}

impl TextConfig {
    pub fn read(dir: &Path) -> Result<TextConfig, ConvertError> {
        let path = dir.join("config.json");
        let json = read_json(&path)?;
        let top = json.as_object().ok_or_else(|| ConvertError::BadJson {
            path: path.clone(),
            problem: "not a JSON object".into(),
        })?;
        let architecture = top
            .get("architectures")
            .and_then(|a| a.get(0))
            .and_then(|a| a.as_str())
            .unwrap_or("(none)")
            .to_string();
        if architecture != TEXT_ARCHITECTURE && architecture != MULTIMODAL_ARCHITECTURE {
            return Err(ConvertError::Architecture { path, architecture });
        }
        let mut params = top.clone();
        if let Some(Value::Object(text)) = top.get("text_config") {
            params.extend(text.clone());
        }
        let mut config = TextConfig {
            path,
            architecture,
            params,
            n_layer: 0,
            n_embd: 0,
            n_ff: 0,
            n_head: 0,
            n_head_kv: 0,
            head_dim: 0,
            n_vocab: 0,
            conv_kernel: 0,
            ssm_k_heads: 0,
            ssm_k_dim: 0,
            ssm_v_heads: 0,
            ssm_v_dim: 0,
            recurrent: Vec::new(),
            full_attention_interval: 0,
            n_mtp: 0,
            tied_embeddings: false,
            rope: Map::new(),
        };
        config.n_layer = config.usize_of("num_hidden_layers")?;
        config.n_embd = config.usize_of("hidden_size")?;
        config.n_ff = config.usize_of("intermediate_size")?;
        config.n_head = config.usize_of("num_attention_heads")?;
        config.n_head_kv = config.usize_of("num_key_value_heads")?;
        config.head_dim = config.usize_or("head_dim", config.n_embd / config.n_head)?;
        config.n_vocab = config.usize_of("vocab_size")?;
        config.conv_kernel = config.usize_of("linear_conv_kernel_dim")?;
        config.ssm_k_heads = config.usize_of("linear_num_key_heads")?;
        config.ssm_k_dim = config.usize_of("linear_key_head_dim")?;
        config.ssm_v_heads = config.usize_of("linear_num_value_heads")?;
        config.ssm_v_dim = config.usize_of("linear_value_head_dim")?;
        config.full_attention_interval = config.usize_or("full_attention_interval", 4)?;
        // 0 (no MTP block) is a valid count here.
        config.n_mtp = match config.params.get("mtp_num_hidden_layers") {
            Some(Value::Number(n)) if n.as_u64() == Some(0) => 0,
            _ => config.usize_or("mtp_num_hidden_layers", 0)?,
        };
        config.tied_embeddings = config
            .params
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        config.recurrent = config.layer_kinds()?;
        config.rope = config.rope_parameters();
        if config.ssm_k_heads == 0 || !config.ssm_v_heads.is_multiple_of(config.ssm_k_heads) {
            return Err(config.bad(format!(
                "linear_num_value_heads {} is not a multiple of linear_num_key_heads {}",
                config.ssm_v_heads, config.ssm_k_heads
            )));
        }
        Ok(config)
    }

    fn bad(&self, problem: String) -> ConvertError {
        ConvertError::BadJson {
            path: self.path.clone(),
            problem,
        }
    }

    fn usize_of(&self, key: &str) -> Result<usize, ConvertError> {
        match self.params.get(key) {
            None => Err(self.bad(format!("missing {key:?}"))),
            Some(value) => value
                .as_u64()
                .and_then(|v| usize::try_from(v).ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| self.bad(format!("{key:?} is {value}, not a positive integer"))),
        }
    }

    /// A positive integer, or `default` when the key is absent.
    fn usize_or(&self, key: &str, default: usize) -> Result<usize, ConvertError> {
        match self.params.get(key) {
            Some(_) => self.usize_of(key),
            None => Ok(default),
        }
    }

    /// `layer_types` as given, or as transformers fills it in: every `full_attention_interval`-th
    /// layer full attention.
    fn layer_kinds(&self) -> Result<Vec<bool>, ConvertError> {
        let Some(kinds) = self.params.get("layer_types") else {
            return Ok((0..self.n_layer)
                .map(|i| (i + 1) % self.full_attention_interval != 0)
                .collect());
        };
        let kinds = kinds
            .as_array()
            .ok_or_else(|| self.bad("\"layer_types\" is not a list".into()))?;
        if kinds.len() != self.n_layer {
            return Err(self.bad(format!(
                "layer_types has {} entries, expected num_hidden_layers ({})",
                kinds.len(),
                self.n_layer
            )));
        }
        kinds
            .iter()
            .map(|kind| match kind.as_str() {
                Some("linear_attention") => Ok(true),
                Some("full_attention") => Ok(false),
                _ => Err(self.bad(format!("unknown layer type {kind}"))),
            })
            .collect()
    }

    /// `rope_parameters` (or `rope_scaling`), completed from the top-level keys llama.cpp also
    /// looks at.
    fn rope_parameters(&self) -> Map<String, Value> {
        let mut rope = match self
            .params
            .get("rope_parameters")
            .or_else(|| self.params.get("rope_scaling"))
        {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        for key in ["rope_theta", "partial_rotary_factor"] {
            if !rope.contains_key(key) {
                if let Some(value) = self.params.get(key) {
                    rope.insert(key.into(), value.clone());
                }
            }
        }
        rope
    }

    pub fn is_recurrent(&self, layer: usize) -> bool {
        self.recurrent.get(layer).copied().unwrap_or(false)
    }

    fn partial_rotary_factor(&self) -> f64 {
        self.rope
            .get("partial_rotary_factor")
            .and_then(Value::as_f64)
            .unwrap_or(0.25)
    }

    pub fn ssm_inner(&self) -> usize {
        self.ssm_v_heads * self.ssm_v_dim
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.params.get(key)
    }

    /// The `qwen35.*` entries and `general.file_type`, in the converter's order.
    /// `block_count` counts the MTP layers that are kept.
    pub fn model_metadata(
        &self,
        block_count: usize,
        file_type: u32,
    ) -> Result<Vec<(String, MetaValue)>, ConvertError> {
        let arch = |key: &str| format!("qwen35.{key}");
        let u32_of = |v: usize| MetaValue::U32(v as u32);
        let mut out = vec![
            (arch("block_count"), u32_of(block_count)),
            (
                arch("context_length"),
                u32_of(self.usize_of("max_position_embeddings")?),
            ),
            (arch("embedding_length"), u32_of(self.n_embd)),
            (arch("feed_forward_length"), u32_of(self.n_ff)),
            (arch("attention.head_count"), u32_of(self.n_head)),
            (arch("attention.head_count_kv"), u32_of(self.n_head_kv)),
        ];
        if let Some(sections) = self.rope.get("mrope_section") {
            out.push((arch("rope.dimension_sections"), self.sections(sections)?));
        }
        if let Some(theta) = self.rope.get("rope_theta") {
            let theta = theta
                .as_f64()
                .ok_or_else(|| self.bad(format!("rope_theta is {theta}, not a number")))?;
            out.push((arch("rope.freq_base"), MetaValue::F32(theta as f32)));
        }
        if let Some(eps) = self.params.get("rms_norm_eps") {
            let eps = eps
                .as_f64()
                .ok_or_else(|| self.bad(format!("rms_norm_eps is {eps}, not a number")))?;
            out.push((
                arch("attention.layer_norm_rms_epsilon"),
                MetaValue::F32(eps as f32),
            ));
        }
        if self.params.contains_key("head_dim") {
            out.push((arch("attention.key_length"), u32_of(self.head_dim)));
            out.push((arch("attention.value_length"), u32_of(self.head_dim)));
        }
        out.push(("general.file_type".into(), MetaValue::U32(file_type)));
        if block_count > self.n_layer {
            out.push((
                arch("nextn_predict_layers"),
                u32_of(block_count - self.n_layer),
            ));
        }
        out.push((arch("ssm.conv_kernel"), u32_of(self.conv_kernel)));
        out.push((arch("ssm.state_size"), u32_of(self.ssm_k_dim)));
        out.push((arch("ssm.group_count"), u32_of(self.ssm_k_heads)));
        out.push((arch("ssm.time_step_rank"), u32_of(self.ssm_v_heads)));
        out.push((arch("ssm.inner_size"), u32_of(self.ssm_inner())));
        // transformers always fills `layer_types` in, so the converter always writes this.
        let mut recurrent = self.recurrent.clone();
        recurrent.resize(block_count, false);
        out.push((
            arch("attention.recurrent_layers"),
            MetaValue::Array(MetaArray::Bool(recurrent)),
        ));
        out.push((
            arch("full_attention_interval"),
            u32_of(self.full_attention_interval),
        ));
        let rotary = (self.head_dim as f64 * self.partial_rotary_factor()) as usize;
        out.push((arch("rope.dimension_count"), u32_of(rotary)));
        if !self.rope.contains_key("mrope_section") {
            out.push((
                arch("rope.dimension_sections"),
                MetaValue::Array(MetaArray::I32(vec![11, 11, 10, 0])),
            ));
        }
        Ok(out)
    }

    /// mRoPE sections padded with zeros to four.
    fn sections(&self, sections: &Value) -> Result<MetaValue, ConvertError> {
        let bad = || {
            self.bad(format!(
                "mrope_section is {sections}, not a list of integers"
            ))
        };
        let mut values = sections
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|v| {
                v.as_i64()
                    .and_then(|v| i32::try_from(v).ok())
                    .ok_or_else(bad)
            })
            .collect::<Result<Vec<i32>, _>>()?;
        values.resize(values.len().max(4), 0);
        values.truncate(4);
        Ok(MetaValue::Array(MetaArray::I32(values)))
    }
}
