//! `qwen35 convert`: a Hugging Face Qwen3.5 / Qwen3.6 checkpoint (config.json, safetensors shards,
//! tokenizer.json, tokenizer_config.json) → the GGUF llama.cpp's `convert_hf_to_gguf.py` (b11434)
//! writes for it: the same metadata in the same order, the same tensors in the same order with the
//! same types and bytes.
//!
//! Streaming: the shards are mapped, and one tensor at a time is read, transformed, encoded and
//! written, so memory is bounded by the largest tensor. The output is written to a temporary file
//! beside the target and renamed into place only when complete: a failure leaves nothing behind.

mod checkpoint;
mod config;
mod output;
mod quantize;
mod tensors;
mod vocab;

pub use output::{OutputError, PartialFile};
pub use quantize::{quantize, QuantizeOptions, QuantizeSummary};
pub use tensors::OutType;

use crate::gguf::{GgufError, GgufWriter, MetaValue};
use crate::quant::QuantError;
use checkpoint::Checkpoint;
use config::TextConfig;
use rayon::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {problem}")]
    BadJson { path: PathBuf, problem: String },
    #[error("{path}: architecture {architecture:?} is not a Qwen3.5 text model (expected Qwen3_5ForCausalLM or Qwen3_5ForConditionalGeneration)")]
    Architecture { path: PathBuf, architecture: String },
    #[error("{path}: bad safetensors file: {problem}")]
    Safetensors { path: PathBuf, problem: String },
    #[error("{path}: tensor {tensor:?} has dtype {dtype}; only F32, F16 and BF16 are supported")]
    UnsupportedDtype {
        path: PathBuf,
        tensor: String,
        dtype: String,
    },
    #[error("{index} lists shard {shard:?}, which is missing")]
    MissingShard { index: PathBuf, shard: String },
    #[error("{dir}: no model*.safetensors files (and no model.safetensors.index.json)")]
    NoShards { dir: PathBuf },
    #[error("{path}: tensor {tensor:?} is not part of a Qwen3.5 text model (no GGUF name for it)")]
    UnknownTensor { path: PathBuf, tensor: String },
    #[error("{path}: tensor {tensor:?} has shape {found:?}, but {config} implies {expected:?}")]
    Shape {
        path: PathBuf,
        tensor: String,
        found: Vec<usize>,
        expected: Vec<usize>,
        config: PathBuf,
    },
    #[error("the checkpoint has no tensor for {tensor:?}, which the model of {config} needs")]
    MissingTensor { tensor: String, config: PathBuf },
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("{path}: {source}")]
    Input {
        path: PathBuf,
        #[source]
        source: GgufError,
    },
    #[error("{path}: not a qwen35 GGUF (general.architecture is not \"qwen35\")")]
    NotQwen35 { path: PathBuf },
    #[error("tensor {tensor}: it is already {from}; quantize from an F32, F16 or BF16 file")]
    Requantize { tensor: String, from: String },
    #[error("starting the worker threads: {0}")]
    Threads(String),
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("encoding tensor {tensor}: {source}")]
    Quant {
        tensor: String,
        #[source]
        source: QuantError,
    },
}

/// What to convert.
#[derive(Clone, Debug)]
pub struct ConvertOptions {
    pub out_type: OutType,
    /// Drop the MTP (next-token prediction) layers.
    pub no_mtp: bool,
    /// Replace an existing output file.
    pub force: bool,
}

/// What was written.
#[derive(Clone, Debug)]
pub struct ConvertSummary {
    pub architecture: String,
    pub n_tensors: usize,
    pub n_params: u64,
    pub n_mtp_layers: usize,
    pub skipped_vision: usize,
    pub bytes: u64,
}

/// Converts the checkpoint in `dir` to `out`; `progress(done, total, tensor)` is called after each
/// tensor with data bytes written so far.
pub fn convert(
    dir: &Path,
    out: &Path,
    opts: &ConvertOptions,
    mut progress: impl FnMut(u64, u64, &str),
) -> Result<ConvertSummary, ConvertError> {
    let output = PartialFile::create(out, opts.force)?;
    let config = TextConfig::read(dir)?;
    let checkpoint = Checkpoint::open(dir)?;
    let keep_mtp = !opts.no_mtp;
    let planned = tensors::plan(
        checkpoint.tensors(),
        &config,
        keep_mtp,
        opts.out_type,
        |t| checkpoint.shard_path(t).to_path_buf(),
    )?;
    let block_count = planned
        .iter()
        .filter_map(|t| {
            t.name
                .strip_prefix("blk.")?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .map(|layer| layer + 1)
        .max()
        .unwrap_or(0)
        .max(config.n_layer);
    let n_params: u64 = planned.iter().map(|t| t.dims.iter().product::<u64>()).sum();

    let mut layout = GgufWriter::new();
    for (key, value) in general_metadata(dir, n_params)?
        .into_iter()
        .chain(config.model_metadata(block_count, opts.out_type.file_type())?)
        .chain([(
            "general.quantization_version".to_string(),
            MetaValue::U32(2),
        )])
        .chain(vocab::tokenizer_metadata(dir, &config)?)
    {
        layout.add_kv(&key, value)?;
    }
    let mut total = 0;
    for tensor in &planned {
        layout.add_tensor(&tensor.name, &tensor.dims, tensor.ggml_type)?;
        // add_tensor has checked the row is whole blocks.
        let row = crate::quant::row_bytes(tensor.ggml_type, tensor.dims[0]).unwrap_or(0);
        total += row * tensor.dims[1..].iter().product::<u64>();
    }
    let mut data = layout.write_header(output.writer()?)?;
    let mut done = 0;
    progress(done, total, "");
    for tensor in &planned {
        let values = tensor.values(checkpoint.to_f32(&tensor.source), &config);
        let bytes = encode(tensor, &values)?;
        data.write_tensor(&tensor.name, &bytes)?;
        done += bytes.len() as u64;
        progress(done, total, &tensor.name);
    }
    let bytes = output.finish(data.finish()?)?;

    let skipped_vision = checkpoint
        .tensors()
        .iter()
        .filter(|t| tensors::is_vision_tensor(&t.name))
        .count();
    Ok(ConvertSummary {
        architecture: config.architecture.clone(),
        n_tensors: planned.len(),
        n_params,
        n_mtp_layers: block_count - config.n_layer,
        skipped_vision,
        bytes,
    })
}

/// Rows encoded in parallel; a row is whole blocks of the tensor's type.
fn encode(tensor: &tensors::PlannedTensor, values: &[f32]) -> Result<Vec<u8>, ConvertError> {
    let row_len = tensor.dims[0] as usize;
    let rows: Vec<Result<Vec<u8>, QuantError>> = values
        .par_chunks(row_len.max(1) * 64)
        .map(|chunk| {
            let mut out = Vec::new();
            for row in chunk.chunks(row_len) {
                crate::quant::quantize_row(tensor.ggml_type, row, &mut out)?;
            }
            Ok(out)
        })
        .collect();
    let mut bytes = Vec::new();
    for row in rows {
        bytes.extend(row.map_err(|source| ConvertError::Quant {
            tensor: tensor.name.clone(),
            source,
        })?);
    }
    Ok(bytes)
}

/// `general.*`: architecture, type, the sampling defaults of generation_config.json, the name
/// (the directory's, title-cased as gguf-py does) and the size label.
fn general_metadata(dir: &Path, n_params: u64) -> Result<Vec<(String, MetaValue)>, ConvertError> {
    let mut out = vec![
        (
            "general.architecture".to_string(),
            MetaValue::Str("qwen35".into()),
        ),
        ("general.type".to_string(), MetaValue::Str("model".into())),
    ];
    let generation = dir.join("generation_config.json");
    if generation.is_file() {
        let json = config::read_json(&generation)?;
        out.extend(sampling_metadata(&json));
    }
    let dir_name = std::fs::canonicalize(dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    out.push((
        "general.name".into(),
        MetaValue::Str(id_to_title(&dir_name)),
    ));
    out.push((
        "general.size_label".into(),
        MetaValue::Str(size_label(n_params)),
    ));
    Ok(out)
}

/// gguf-py's `general.sampling.*` keys from generation_config.json, in its order.
fn sampling_metadata(json: &Value) -> Vec<(String, MetaValue)> {
    let int = |v: &Value| v.as_i64().map(|v| MetaValue::I32(v as i32));
    let float = |v: &Value| v.as_f64().map(|v| MetaValue::F32(v as f32));
    type Field<'a> = (
        &'a str,
        &'a [&'a str],
        &'a dyn Fn(&Value) -> Option<MetaValue>,
    );
    let fields: [Field; 12] = [
        ("sequence", &["sequence"], &|v| {
            v.as_str().map(|s| MetaValue::Str(s.into()))
        }),
        ("top_k", &["top_k"], &int),
        ("top_p", &["top_p"], &float),
        ("min_p", &["min_p"], &float),
        ("xtc_probability", &["xtc_probability"], &float),
        ("xtc_threshold", &["xtc_threshold"], &float),
        ("temp", &["temperature"], &float),
        ("penalty_last_n", &["penalty_last_n"], &int),
        (
            "penalty_repeat",
            &["penalty_repeat", "repetition_penalty"],
            &float,
        ),
        ("mirostat", &["mirostat"], &int),
        ("mirostat_tau", &["mirostat_tau"], &float),
        ("mirostat_eta", &["mirostat_eta"], &float),
    ];
    fields
        .iter()
        .filter_map(|(key, sources, convert)| {
            let value = sources.iter().find_map(|s| json.get(*s))?;
            Some((format!("general.sampling.{key}"), convert(value)?))
        })
        .collect()
}

/// gguf-py's `Metadata.id_to_title`: words split at '-' and whitespace, all-lowercase words
/// title-cased unless they are versions or start with a digit.
fn id_to_title(id: &str) -> String {
    id.trim()
        .replace('-', " ")
        .split_whitespace()
        .map(|word| {
            let has_cased = word.chars().any(|c| c.is_lowercase() || c.is_uppercase());
            let lower = has_cased && !word.chars().any(|c| c.is_uppercase());
            let starts_with_digit = word.starts_with(|c: char| c.is_ascii_digit());
            let version = word.strip_prefix('v').is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .split('.')
                        .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
            });
            if lower && !starts_with_digit && !version {
                title_case(word)
            } else {
                word.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Python's `str.title()`: a cased letter after an uncased character is upper-cased, the rest
/// lower-cased.
fn title_case(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut after_cased = false;
    for c in word.chars() {
        let cased = c.is_lowercase() || c.is_uppercase();
        if cased && !after_cased {
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
        after_cased = cased;
    }
    out
}

/// gguf-py's `model_weight_count_rounded_notation(n, min_digits=2)`.
fn size_label(n_params: u64) -> String {
    let n = n_params as f64;
    let (scaled, suffix) = if n > 1e12 {
        (n * 1e-12, "T")
    } else if n > 1e9 {
        (n * 1e-9, "B")
    } else if n > 1e6 {
        (n * 1e-6, "M")
    } else {
        (n * 1e-3, "K")
    };
    let integer_digits = format!("{}", scaled.round_ties_even() as u64);
    let significant = integer_digits.trim_start_matches('0').len();
    let decimals = 2usize.saturating_sub(significant);
    format!("{scaled:.decimals$}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_title_cased_like_gguf_py() {
        assert_eq!(id_to_title("hf"), "Hf");
        assert_eq!(id_to_title("Qwen3.5-0.8B"), "Qwen3.5 0.8B");
        assert_eq!(id_to_title("my-fine_tune-v1.2"), "My Fine_Tune v1.2");
    }

    #[test]
    fn size_labels_follow_gguf_py() {
        assert_eq!(size_label(2_826_000), "2.8M");
        assert_eq!(size_label(852_000_000), "852M");
        assert_eq!(size_label(27_300_000_000), "27B");
        assert_eq!(size_label(4_660_000_000), "4.7B");
    }
}
