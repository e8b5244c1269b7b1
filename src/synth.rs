//! Synthetic `qwen35` GGUF files: the real tensor names, shapes, metadata and stock
//! `llama-quantize` tensor types of a Qwen3.5 / Qwen3.6 size, filled with random but well-scaled
//! weights, for testing and benchmarking without downloading a checkpoint.
//!
//! [`plan`] lists a model's tensors with their types without writing anything;
//! [`write_synthetic`] streams a whole file, generating tensor data in parallel while the
//! previous batch is written, so the speed is the disk's.

mod plan;
mod preset;
mod vocab;
mod weights;

pub use plan::{
    plan, plan_for, use_more_bits, width_fallback, Init, PlannedTensor, Quant, TypeRule,
};
pub use preset::{ModelShape, Preset};

use crate::gguf::{GgufError, GgufFile, GgufWriter, MetaArray, MetaValue};
use crate::quant::QuantError;
use rayon::prelude::*;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Instant;
use weights::{ChunkPool, PoolKey, Rng};

/// What to write.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub preset: Preset,
    pub quant: Quant,
    pub seed: u64,
    /// A GGUF whose `tokenizer.*` metadata (and so vocabulary size) the file takes.
    pub vocab_from: Option<Arc<GgufFile>>,
}

/// What was written.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthSummary {
    pub n_tensors: usize,
    /// Tensor count per type, by type name (e.g. "q4_K").
    pub type_counts: BTreeMap<String, usize>,
    pub n_vocab: u64,
    pub bytes: u64,
    pub seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("creating {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the --vocab-from file has no usable vocabulary: {0}")]
    VocabSource(#[source] GgufError),
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("encoding tensor {tensor}: {source}")]
    Quant {
        tensor: String,
        #[source]
        source: QuantError,
    },
    #[error("the generator thread stopped without finishing")]
    GeneratorStopped,
}

/// Bytes of tensor data generated per work item: large enough to amortise the bookkeeping,
/// small enough that a batch for every core stays in cache-friendly memory.
const SLAB_BYTES: u64 = 4 << 20;
/// Work items generated in parallel before they are handed to the writer.
const SLABS_PER_BATCH: usize = 32;

/// Writes the synthetic model of `opts` to `out`, calling `progress(bytes written, total bytes)`
/// after each slab of data.
pub fn write_synthetic(
    opts: &SynthOptions,
    out: &Path,
    mut progress: impl FnMut(u64, u64),
) -> Result<SynthSummary, SynthError> {
    let started = Instant::now();
    let shape = opts.preset.shape();
    let vocabulary = match &opts.vocab_from {
        Some(file) => vocab::copied_from(file)?,
        None => vocab::builtin(&shape),
    };
    let tensors = plan_for(&shape, opts.quant, vocabulary.n_tokens);

    let mut layout = GgufWriter::new();
    for (key, value) in model_metadata(opts, &shape)
        .into_iter()
        .chain(vocabulary.entries)
    {
        layout.add_kv(&key, value)?;
    }
    let mut data_bytes = 0u64;
    for tensor in &tensors {
        layout.add_tensor(&tensor.name, &tensor.dims, tensor.ggml_type)?;
        data_bytes += tensor_bytes(tensor).next_multiple_of(layout.alignment());
    }

    let file = std::fs::File::create(out).map_err(|source| SynthError::Create {
        path: out.to_path_buf(),
        source,
    })?;
    let written = Rc::new(Cell::new(0));
    let counted = CountingWriter {
        inner: BufWriter::with_capacity(8 << 20, file),
        count: Rc::clone(&written),
    };
    let mut data = layout.write_header(counted)?;
    let total = data_bytes + written.get();
    progress(written.get(), total);

    let pools = build_pools(&tensors, opts.seed)?;
    let slabs = slabs(&tensors);
    std::thread::scope(|scope| -> Result<(), SynthError> {
        // Generation runs ahead by one batch while this thread writes the previous one.
        let (sender, receiver) = sync_channel::<Result<Vec<Vec<u8>>, SynthError>>(1);
        let (tensors, pools, slabs) = (&tensors, &pools, &slabs);
        scope.spawn(move || {
            for batch in slabs.chunks(SLABS_PER_BATCH) {
                let generated = batch
                    .par_iter()
                    .map(|slab| slab.generate(tensors, pools, opts.seed))
                    .collect::<Result<Vec<_>, _>>();
                let failed = generated.is_err();
                if sender.send(generated).is_err() || failed {
                    return;
                }
            }
        });
        for _ in 0..slabs.len().div_ceil(SLABS_PER_BATCH) {
            let batch = receiver
                .recv()
                .map_err(|_| SynthError::GeneratorStopped)??;
            for bytes in batch {
                data.write_data(&bytes)?;
                progress(written.get(), total);
            }
        }
        Ok(())
    })?;
    data.finish()?;

    let mut type_counts = BTreeMap::new();
    for tensor in &tensors {
        *type_counts.entry(tensor.ggml_type.name()).or_insert(0) += 1;
    }
    Ok(SynthSummary {
        n_tensors: tensors.len(),
        type_counts,
        n_vocab: vocabulary.n_tokens,
        bytes: written.get(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `general.*` and `qwen35.*` entries (QWEN35.md §7.2). No `nextn_predict_layers`: no MTP block.
fn model_metadata(opts: &SynthOptions, s: &ModelShape) -> Vec<(String, MetaValue)> {
    let u32_of = |v: u64| MetaValue::U32(u32::try_from(v).unwrap_or(u32::MAX));
    let arch = |key: &str| format!("qwen35.{key}");
    vec![
        (
            "general.architecture".into(),
            MetaValue::Str("qwen35".into()),
        ),
        (
            "general.name".into(),
            MetaValue::Str(format!("synthetic {}", opts.preset.name())),
        ),
        (
            "general.file_type".into(),
            MetaValue::U32(opts.quant.file_type()),
        ),
        ("general.quantization_version".into(), MetaValue::U32(2)),
        (arch("block_count"), u32_of(s.n_layer)),
        (arch("context_length"), u32_of(s.context_length)),
        (arch("embedding_length"), u32_of(s.n_embd)),
        (arch("feed_forward_length"), u32_of(s.n_ff)),
        (arch("attention.head_count"), u32_of(s.n_head)),
        (arch("attention.head_count_kv"), u32_of(s.n_head_kv)),
        (
            arch("rope.dimension_sections"),
            MetaValue::Array(MetaArray::I32(s.rope_sections.to_vec())),
        ),
        (arch("rope.freq_base"), MetaValue::F32(s.rope_theta)),
        (
            arch("attention.layer_norm_rms_epsilon"),
            MetaValue::F32(s.rms_eps),
        ),
        (arch("attention.key_length"), u32_of(s.head_dim)),
        (arch("attention.value_length"), u32_of(s.head_dim)),
        (arch("ssm.conv_kernel"), u32_of(s.conv_kernel)),
        (arch("ssm.state_size"), u32_of(s.ssm_k_dim)),
        (arch("ssm.group_count"), u32_of(s.ssm_k_heads)),
        (arch("ssm.time_step_rank"), u32_of(s.ssm_v_heads)),
        (arch("ssm.inner_size"), u32_of(s.ssm_inner())),
        (
            arch("full_attention_interval"),
            u32_of(s.full_attention_interval),
        ),
        (arch("rope.dimension_count"), u32_of(s.rotary_dims)),
    ]
}

fn tensor_bytes(tensor: &PlannedTensor) -> u64 {
    let rows: u64 = tensor.dims.iter().skip(1).product();
    let ne0 = tensor.dims.first().copied().unwrap_or(1);
    rows * ne0 / tensor.ggml_type.block_elems() as u64 * tensor.ggml_type.block_bytes() as u64
}

/// One pool per (type, scale) that the plan tiles from, encoded in parallel.
fn build_pools(
    tensors: &[PlannedTensor],
    seed: u64,
) -> Result<HashMap<PoolKey, ChunkPool>, SynthError> {
    let mut keys: Vec<(PoolKey, &str)> = Vec::new();
    for tensor in tensors {
        if let Some(key) = weights::pool_key(tensor) {
            if !keys.iter().any(|(k, _)| *k == key) {
                keys.push((key, &tensor.name));
            }
        }
    }
    keys.into_par_iter()
        .map(|(key, name)| {
            ChunkPool::new(key, seed)
                .map(|pool| (key, pool))
                .map_err(|source| SynthError::Quant {
                    tensor: name.to_string(),
                    source,
                })
        })
        .collect()
}

/// A run of whole rows of one tensor, generated as one unit.
struct Slab {
    tensor: usize,
    rows: std::ops::Range<u64>,
}

impl Slab {
    fn generate(
        &self,
        tensors: &[PlannedTensor],
        pools: &HashMap<PoolKey, ChunkPool>,
        seed: u64,
    ) -> Result<Vec<u8>, SynthError> {
        let tensor = &tensors[self.tensor];
        // Seeded by position, so the file does not depend on the thread count.
        let mut rng = Rng::derive(
            Rng::derive(seed, self.tensor as u64).next_u64(),
            self.rows.start,
        );
        let mut out = Vec::with_capacity(SLAB_BYTES as usize + 4096);
        weights::generate_rows(tensor, self.rows.clone(), pools, &mut rng, &mut out).map_err(
            |source| SynthError::Quant {
                tensor: tensor.name.clone(),
                source,
            },
        )?;
        Ok(out)
    }
}

fn slabs(tensors: &[PlannedTensor]) -> Vec<Slab> {
    let mut out = Vec::new();
    for (index, tensor) in tensors.iter().enumerate() {
        let rows: u64 = tensor.dims.iter().skip(1).product();
        let row_bytes = (tensor_bytes(tensor) / rows.max(1)).max(1);
        let per_slab = (SLAB_BYTES / row_bytes).max(1);
        let mut start = 0;
        while start < rows {
            let end = (start + per_slab).min(rows);
            out.push(Slab {
                tensor: index,
                rows: start..end,
            });
            start = end;
        }
    }
    out
}

/// Counts what passes through, so progress can be reported in file bytes.
struct CountingWriter<W: Write> {
    inner: W,
    count: Rc<Cell<u64>>,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
