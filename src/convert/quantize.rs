//! `qwen35 quantize`: a GGUF (F32/F16/BF16 tensors, as `qwen35 convert` writes it) → the file
//! llama-quantize (b11434, no importance matrix) writes for a file type: its metadata with
//! `general.quantization_version` and `general.file_type` moved to the end (it sets both anew),
//! the tensors in its loader's order (by layer, then by name), each typed by its per-tensor rule
//! ([`TypeRule`], shared with `qwen35 synth`) and encoded by the ggml-exact quantizers.
//!
//! Streaming: one tensor at a time, its rows encoded in parallel.

use super::output::PartialFile;
use super::ConvertError;
use crate::gguf::{GgufFile, GgufWriter, MetaValue, TensorInfo};
use crate::quant::{dequantize, quantize_row, GgmlType};
use crate::synth::{Quant, TypeRule};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug)]
pub struct QuantizeOptions {
    pub quant: Quant,
    /// Worker threads for encoding (0: all cores).
    pub threads: usize,
    pub force: bool,
}

#[derive(Clone, Debug)]
pub struct QuantizeSummary {
    pub n_tensors: usize,
    pub n_quantized: usize,
    /// Tensor count per type name.
    pub type_counts: BTreeMap<String, usize>,
    pub bytes: u64,
}

const QUANTIZATION_VERSION: &str = "general.quantization_version";
const FILE_TYPE: &str = "general.file_type";

/// The layer of `blk.N.*`, or −1 (sorted first), as llama.cpp's loader orders names.
fn layer_of(name: &str) -> i64 {
    name.strip_prefix("blk.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
}

pub fn quantize(
    input: &Path,
    out: &Path,
    opts: &QuantizeOptions,
    mut progress: impl FnMut(u64, u64, &str),
) -> Result<QuantizeSummary, ConvertError> {
    let output = PartialFile::create(out, opts.force)?;
    let file = GgufFile::open(input).map_err(|source| ConvertError::Input {
        path: input.to_path_buf(),
        source,
    })?;
    if file.get("general.architecture") != Some(&MetaValue::Str("qwen35".into())) {
        return Err(ConvertError::NotQwen35 {
            path: input.to_path_buf(),
        });
    }
    let mut tensors: Vec<&TensorInfo> = file.tensors().iter().collect();
    tensors.sort_by(|a, b| (layer_of(&a.name), &a.name).cmp(&(layer_of(&b.name), &b.name)));
    let mut rule = TypeRule::new(opts.quant, tensors.iter().map(|t| t.name.as_str()));
    let types: Vec<GgmlType> = tensors
        .iter()
        .map(|t| rule.next(&t.name, &t.dims).unwrap_or(t.ggml_type))
        .collect();

    let mut layout = GgufWriter::new();
    for (key, value) in file.metadata() {
        if key != QUANTIZATION_VERSION && key != FILE_TYPE {
            layout.add_kv(key, value.clone())?;
        }
    }
    layout.add_kv(QUANTIZATION_VERSION, MetaValue::U32(2))?;
    layout.add_kv(FILE_TYPE, MetaValue::U32(opts.quant.file_type()))?;
    let mut total = 0;
    for (tensor, &ty) in tensors.iter().zip(&types) {
        layout.add_tensor(&tensor.name, &tensor.dims, ty)?;
        let row = crate::quant::row_bytes(ty, tensor.dims[0]).unwrap_or(0);
        total += row * tensor.dims[1..].iter().product::<u64>();
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .build()
        .map_err(|e| ConvertError::Threads(e.to_string()))?;
    let mut data = layout.write_header(output.writer()?)?;
    let (mut done, mut n_quantized) = (0, 0);
    progress(0, total, "");
    for (tensor, &ty) in tensors.iter().zip(&types) {
        let bytes = file.tensor_data(tensor);
        if ty == tensor.ggml_type {
            data.write_tensor(&tensor.name, bytes)?;
        } else {
            let encoded = pool.install(|| requantize(tensor, bytes, ty))?;
            data.write_tensor(&tensor.name, &encoded)?;
            n_quantized += 1;
        }
        done += crate::quant::row_bytes(ty, tensor.dims[0]).unwrap_or(0)
            * tensor.dims[1..].iter().product::<u64>();
        progress(done, total, &tensor.name);
    }
    let bytes = output.finish(data.finish()?)?;

    let mut type_counts = BTreeMap::new();
    for ty in &types {
        *type_counts.entry(ty.name()).or_insert(0) += 1;
    }
    Ok(QuantizeSummary {
        n_tensors: tensors.len(),
        n_quantized,
        type_counts,
        bytes,
    })
}

/// A float tensor's rows widened to f32 and encoded as `ty`, in parallel runs of rows.
fn requantize(tensor: &TensorInfo, bytes: &[u8], ty: GgmlType) -> Result<Vec<u8>, ConvertError> {
    if !matches!(
        tensor.ggml_type,
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16
    ) {
        return Err(ConvertError::Requantize {
            tensor: tensor.name.clone(),
            from: tensor.ggml_type.name().to_string(),
        });
    }
    let quant_error = |source| ConvertError::Quant {
        tensor: tensor.name.clone(),
        source,
    };
    let cols = tensor.dims[0] as usize;
    let in_row = tensor.row_bytes() as usize;
    const ROWS_PER_TASK: usize = 16;
    let runs: Vec<Result<Vec<u8>, crate::quant::QuantError>> = bytes
        .par_chunks(in_row * ROWS_PER_TASK)
        .map(|run| {
            let mut out = Vec::new();
            for row in run.chunks(in_row) {
                let values = dequantize(tensor.ggml_type, row, cols)?;
                quantize_row(ty, &values, &mut out)?;
            }
            Ok(out)
        })
        .collect();
    let mut encoded = Vec::new();
    for run in runs {
        encoded.extend(run.map_err(quant_error)?);
    }
    Ok(encoded)
}
