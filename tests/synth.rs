//! `qwen35::synth`: tensor plans against the stock llama-quantize rule, and written files read
//! back through the GGUF reader.

use qwen35::gguf::{GgufFile, MetaValue};
use qwen35::model::{load_engine, BackendKind};
use qwen35::quant::{dequantize, GgmlType};
use qwen35::synth::{
    plan, use_more_bits, write_synthetic, Init, PlannedTensor, Preset, Quant, SynthOptions,
};
use qwen35::tokenizer::Tokenizer;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A file path in the temp dir, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> TempFile {
        let dir = std::env::temp_dir();
        TempFile(dir.join(format!("qwen35-synth-{}-{name}", std::process::id())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn write(
    preset: Preset,
    quant: Quant,
    seed: u64,
    vocab_from: Option<Arc<GgufFile>>,
) -> (TempFile, GgufFile) {
    let path = TempFile::new(&format!("{}-{}-{seed}.gguf", preset.name(), quant.name()));
    let opts = SynthOptions {
        preset,
        quant,
        seed,
        vocab_from,
    };
    let mut last = (0, 0);
    let summary = write_synthetic(&opts, &path.0, |written, total| last = (written, total))
        .expect("synthetic file written");
    let file = GgufFile::open(&path.0).expect("synthetic file readable");
    assert_eq!(summary.bytes, file.file_size());
    assert_eq!(
        last,
        (file.file_size(), file.file_size()),
        "progress ends at the total"
    );
    (path, file)
}

fn type_counts(tensors: &[PlannedTensor]) -> HashMap<GgmlType, usize> {
    let mut counts = HashMap::new();
    for t in tensors {
        *counts.entry(t.ggml_type).or_insert(0) += 1;
    }
    counts
}

fn count(tensors: &[PlannedTensor], ty: GgmlType) -> usize {
    tensors.iter().filter(|t| t.ggml_type == ty).count()
}

fn layer_of(name: &str) -> Option<u64> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

#[test]
fn qwen36_27b_q4_k_m_plan_has_the_stock_type_counts() {
    let tensors = plan(Preset::Qwen36_27B, Quant::Q4KM);
    assert_eq!(tensors.len(), 851);
    assert_eq!(count(&tensors, GgmlType::Q6_K), 65);
    assert_eq!(count(&tensors, GgmlType::Q4_K), 433);
    assert_eq!(count(&tensors, GgmlType::F32), 353);
    let by_name = |name: &str| tensors.iter().find(|t| t.name == name).expect(name);
    assert_eq!(by_name("token_embd.weight").dims, vec![5120, 248320]);
    assert_eq!(by_name("token_embd.weight").ggml_type, GgmlType::Q4_K);
    assert_eq!(by_name("output.weight").ggml_type, GgmlType::Q6_K);
    assert_eq!(by_name("blk.0.attn_qkv.weight").dims, vec![5120, 10240]);
    assert_eq!(by_name("blk.3.attn_q.weight").dims, vec![5120, 12288]);
    assert_eq!(by_name("blk.3.attn_v.weight").dims, vec![5120, 1024]);
    assert_eq!(by_name("blk.0.ssm_conv1d.weight").dims, vec![4, 10240]);
    assert_eq!(by_name("blk.0.ssm_out.weight").dims, vec![6144, 5120]);
    assert_eq!(by_name("blk.0.ssm_beta.weight").dims, vec![5120, 48]);
    assert_eq!(by_name("blk.63.ffn_down.weight").dims, vec![17408, 5120]);
    // Layer 8 is no "more bits" layer, layer 10 is: for both counters.
    for (name, ty) in [
        ("blk.8.attn_qkv.weight", GgmlType::Q4_K),
        ("blk.10.attn_qkv.weight", GgmlType::Q6_K),
        ("blk.11.attn_v.weight", GgmlType::Q4_K),
        ("blk.8.ffn_down.weight", GgmlType::Q4_K),
        ("blk.10.ffn_down.weight", GgmlType::Q6_K),
    ] {
        assert_eq!(by_name(name).ggml_type, ty, "{name}");
    }
}

#[test]
fn released_presets_have_their_tensor_counts_and_tying() {
    // 14 tensors per Gated DeltaNet layer, 11 per attention layer, + embeddings and output norm.
    for (preset, n_tensors, tied) in [
        (Preset::Qwen35_9B, 427, false),
        (Preset::Qwen35_4B, 426, true),
        (Preset::Qwen35_2B, 320, true),
        (Preset::Qwen35_0_8B, 320, true),
    ] {
        let tensors = plan(preset, Quant::Q4KM);
        assert_eq!(tensors.len(), n_tensors, "{}", preset.name());
        let output = tensors.iter().any(|t| t.name == "output.weight");
        assert_eq!(output, !tied, "{}", preset.name());
        // Every row is whole Q4_K blocks, so no tensor falls back to another type.
        for t in &tensors {
            assert!(
                matches!(t.ggml_type, GgmlType::F32 | GgmlType::Q4_K | GgmlType::Q6_K),
                "{} {:?}",
                t.name,
                t.ggml_type
            );
        }
        // A tied table makes the logits, so it gets the output's Q6_K.
        let embd = tensors
            .iter()
            .find(|t| t.name == "token_embd.weight")
            .unwrap();
        let expected = if tied { GgmlType::Q6_K } else { GgmlType::Q4_K };
        assert_eq!(embd.ggml_type, expected, "{}", preset.name());
    }
}

#[test]
fn q8_0_and_f16_plans_encode_every_matrix_alike() {
    for (quant, ty) in [(Quant::Q8_0, GgmlType::Q8_0), (Quant::F16, GgmlType::F16)] {
        let tensors = plan(Preset::Qwen36_27B, quant);
        let counts = type_counts(&tensors);
        assert_eq!(counts.get(&ty), Some(&498), "{}", quant.name());
        assert_eq!(counts.get(&GgmlType::F32), Some(&353), "{}", quant.name());
        assert_eq!(counts.len(), 2, "{}", quant.name());
    }
}

/// The rule, checked tensor by tensor against a file read back.
fn check_types(file: &GgufFile, quant: Quant, n_layer: u64) {
    let n_attn_v_like = file
        .tensors()
        .iter()
        .filter(|t| t.name.contains("attn_v.") || t.name.contains("attn_qkv."))
        .count() as u64;
    assert_eq!(n_attn_v_like, n_layer);
    for t in file.tensors() {
        let matrix = t.dims.len() == 2 && !t.name.contains("ssm_conv1d");
        let expected = match quant {
            _ if !matrix => GgmlType::F32,
            Quant::F16 => GgmlType::F16,
            Quant::Q8_0 => GgmlType::Q8_0,
            Quant::Q6K => GgmlType::Q6_K,
            _ if t.name == "output.weight" => GgmlType::Q6_K,
            Quant::Q4KM | Quant::Q5KM => {
                let more_bits_kind = t.name.contains("attn_v.")
                    || t.name.contains("attn_qkv.")
                    || t.name.contains("ffn_down");
                match layer_of(&t.name) {
                    Some(layer) if more_bits_kind && use_more_bits(layer, n_layer) => {
                        GgmlType::Q6_K
                    }
                    _ if quant == Quant::Q5KM => GgmlType::Q5_K,
                    _ => GgmlType::Q4_K,
                }
            }
            // Q4_K_S: the first four attn_v-like tensors (one a layer) and the ffn_down of the
            // first eighth of the layers get Q5_K.
            Quant::Q4KS => {
                let attn_v_like = t.name.contains("attn_v.") || t.name.contains("attn_qkv.");
                match layer_of(&t.name) {
                    Some(layer) if attn_v_like && layer < 4 => GgmlType::Q5_K,
                    Some(layer) if t.name.contains("ffn_down") && layer < n_layer / 8 => {
                        GgmlType::Q5_K
                    }
                    _ => GgmlType::Q4_K,
                }
            }
        };
        assert_eq!(t.ggml_type, expected, "{} in {}", t.name, quant.name());
    }
}

#[test]
fn tiny_files_in_every_quant_read_back_as_planned() {
    for quant in Quant::ALL {
        let (_path, file) = write(Preset::Tiny, quant, 7, None);
        let planned = plan(Preset::Tiny, quant);
        let read: Vec<(&str, &[u64], GgmlType)> = file
            .tensors()
            .iter()
            .map(|t| (t.name.as_str(), t.dims.as_slice(), t.ggml_type))
            .collect();
        let expected: Vec<(&str, &[u64], GgmlType)> = planned
            .iter()
            .map(|t| (t.name.as_str(), t.dims.as_slice(), t.ggml_type))
            .collect();
        assert_eq!(read, expected, "{}", quant.name());
        assert_eq!(file.tensors().len(), 3 * 14 + 11 + 3);
        check_types(&file, quant, 4);
        assert_eq!(file.get_str("general.architecture").unwrap(), "qwen35");
        assert_eq!(
            file.get_u32("general.file_type").unwrap(),
            quant.file_type()
        );
        assert_eq!(file.get_u32("qwen35.block_count").unwrap(), 4);
        assert_eq!(file.get_u32("qwen35.ssm.time_step_rank").unwrap(), 8);
        assert_eq!(file.get_u32("qwen35.ssm.inner_size").unwrap(), 256);
        assert_eq!(file.get_u32("qwen35.rope.dimension_count").unwrap(), 16);
        assert_eq!(
            file.get_i32_array("qwen35.rope.dimension_sections")
                .unwrap(),
            vec![3, 3, 2, 0]
        );
        assert!(file.get("qwen35.nextn_predict_layers").is_none());
    }
}

fn values(file: &GgufFile, name: &str) -> Vec<f32> {
    let info = file.tensor(name).expect(name);
    dequantize(
        info.ggml_type,
        file.tensor_data(info),
        info.n_elements as usize,
    )
    .expect(name)
}

fn mean_and_std(x: &[f32]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[test]
fn tiny_values_are_finite_and_well_scaled() {
    let (_path, file) = write(Preset::Tiny, Quant::Q4KM, 1, None);
    let planned = plan(Preset::Tiny, Quant::Q4KM);
    for t in &planned {
        let x = values(&file, &t.name);
        assert!(
            x.iter().all(|v| v.is_finite()),
            "{} has non-finite values",
            t.name
        );
        let (mean, std) = mean_and_std(&x);
        match t.init {
            Init::NearOne => {
                assert!(
                    (mean - 1.0).abs() < 0.05 && std < 0.2,
                    "{}: {mean} ± {std}",
                    t.name
                )
            }
            Init::NegativeDecay => assert!(x.iter().all(|&v| v < 0.0), "{}: {x:?}", t.name),
            Init::DtBias => assert!(mean < 0.0, "{}: mean {mean}", t.name),
            Init::Normal { std: planned_std } => {
                let planned_std = planned_std as f64;
                assert!(mean.abs() < 0.2 * planned_std, "{}: mean {mean}", t.name);
                let ratio = std / planned_std;
                assert!(
                    (0.8..1.25).contains(&ratio),
                    "{}: std {std} vs {planned_std}",
                    t.name
                );
            }
        }
    }
}

#[test]
fn same_seed_same_file_other_seed_other_weights() {
    let (a, _) = write(Preset::Tiny, Quant::Q8_0, 3, None);
    let b = TempFile::new("tiny-again.gguf");
    let opts = SynthOptions {
        preset: Preset::Tiny,
        quant: Quant::Q8_0,
        seed: 3,
        vocab_from: None,
    };
    write_synthetic(&opts, &b.0, |_, _| {}).unwrap();
    assert_eq!(std::fs::read(&a.0).unwrap(), std::fs::read(&b.0).unwrap());
    let (_c, other) = write(Preset::Tiny, Quant::Q8_0, 4, None);
    let (_d, same) = write(Preset::Tiny, Quant::Q8_0, 3, None);
    assert_ne!(
        values(&other, "blk.0.ffn_up.weight"),
        values(&same, "blk.0.ffn_up.weight")
    );
}

#[test]
fn builtin_vocabulary_makes_a_working_tokenizer() {
    let (_path, file) = write(Preset::Tiny, Quant::Q8_0, 0, None);
    let tokenizer = Tokenizer::from_gguf(&file).expect("tokenizer of the built-in vocabulary");
    let n_vocab = file.get_str_array("tokenizer.ggml.tokens").unwrap().len() as u64;
    assert_eq!(
        file.tensor("token_embd.weight").unwrap().dims,
        vec![256, n_vocab]
    );
    assert_eq!(tokenizer.vocab_size() as u64, n_vocab);
    let ids = tokenizer.encode("<|im_start|>hi", true).unwrap();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(tokenizer.decode(&ids), "<|im_start|>hi");
    let special = tokenizer.special_ids();
    assert!(special.im_end.is_some() && special.think.is_some());
}

#[test]
fn vocab_from_copies_the_tokenizer_and_its_size() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-f32.gguf");
    let source = Arc::new(GgufFile::open(&fixture).unwrap());
    let (_path, file) = write(Preset::Tiny, Quant::Q4KM, 0, Some(Arc::clone(&source)));
    let tokenizer_entries = |f: &GgufFile| -> Vec<(String, MetaValue)> {
        f.metadata()
            .filter(|(k, _)| k.starts_with("tokenizer."))
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    };
    let copied = tokenizer_entries(&file);
    assert!(copied.iter().any(|(k, _)| k == "tokenizer.ggml.merges"));
    assert_eq!(copied, tokenizer_entries(&source));
    let n_vocab = source.get_str_array("tokenizer.ggml.tokens").unwrap().len() as u64;
    assert_eq!(
        file.tensor("token_embd.weight").unwrap().dims,
        vec![256, n_vocab]
    );
    assert_eq!(
        file.tensor("output.weight").unwrap().dims,
        vec![256, n_vocab]
    );
}

/// Loads `file` on the CPU engine and checks the logits of two tokens: finite, spread out, and
/// no single token taking all the probability.
fn check_logits(file: GgufFile, what: &str) {
    let n_vocab = file.get_str_array("tokenizer.ggml.tokens").unwrap().len();
    let mut engine = load_engine(Arc::new(file), BackendKind::Cpu, 0, 64)
        .unwrap_or_else(|e| panic!("{what} loads: {e}"));
    let logits = engine.eval(&[1, 104], true).expect("eval");
    assert_eq!(logits.len(), 2 * n_vocab, "{what}");
    assert!(
        logits.iter().all(|x| x.is_finite()),
        "{what}: non-finite logits"
    );
    for position in logits.chunks(n_vocab) {
        let (_, std) = mean_and_std(position);
        assert!((0.3..100.0).contains(&std), "{what}: logit std {std}");
        let max = position.iter().copied().fold(f32::MIN, f32::max);
        let partition: f64 = position.iter().map(|&x| ((x - max) as f64).exp()).sum();
        let top_probability = 1.0 / partition;
        assert!(
            top_probability < 0.99,
            "{what}: top-1 probability {top_probability}"
        );
        eprintln!("{what}: logit std {std:.2}, top-1 probability {top_probability:.3}");
    }
}

#[test]
fn tiny_files_run_on_the_engine() {
    for quant in Quant::ALL {
        let (_path, file) = write(Preset::Tiny, quant, 11, None);
        check_logits(file, &format!("tiny {}", quant.name()));
    }
}

#[test]
fn qwen35_0_8b_q4_k_m_runs_on_the_engine() {
    let started = std::time::Instant::now();
    let (_path, file) = write(Preset::Qwen35_0_8B, Quant::Q4KM, 0, None);
    let written = started.elapsed();
    check_logits(file, "qwen3.5-0.8b q4_k_m");
    eprintln!(
        "0.8b: written in {written:?}, total {:?}",
        started.elapsed()
    );
}
