//! The CPU engine against HF transformers (float32) on the tiny fixture (tests/fixtures/README.md):
//! teacher-forced logits at every prompt position, through both the prefill and the decode path,
//! and the 32 greedy tokens.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind};
use qwen35::npy;
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    prompt_ids: Vec<u32>,
    variants: std::collections::HashMap<String, Variant>,
}

#[derive(Deserialize)]
struct Variant {
    gguf: String,
    logits: String,
    greedy_ids: Vec<u32>,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn golden() -> Golden {
    let text = std::fs::read_to_string(fixtures().join("golden.json")).expect("golden.json");
    serde_json::from_str(&text).expect("golden.json parses")
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
}

/// Per-position agreement of engine logits with HF's.
struct Agreement {
    min_cosine: f64,
    max_abs: f32,
    top1_mismatches: Vec<usize>,
}

fn compare(engine: &[Vec<f32>], hf: &[Vec<f32>]) -> Agreement {
    assert_eq!(engine.len(), hf.len());
    let mut a = Agreement {
        min_cosine: 1.0,
        max_abs: 0.0,
        top1_mismatches: Vec::new(),
    };
    for (pos, (e, h)) in engine.iter().zip(hf).enumerate() {
        a.min_cosine = a.min_cosine.min(cosine(e, h));
        let abs = e.iter().zip(h).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        a.max_abs = a.max_abs.max(abs);
        if argmax(e) != argmax(h) {
            a.top1_mismatches.push(pos);
        }
    }
    a
}

/// Checks one variant: both logit paths against HF at cosine ≥ `min_cosine` at every position,
/// identical top-1 everywhere and the identical greedy continuation. The goldens are computed
/// from the weights each file really holds, so quantized files must agree as closely as F32;
/// the looser cosine bound for them only leaves room for activation-quantizing kernels.
fn check_variant(name: &str, min_cosine: f64) {
    let golden = golden();
    let variant = &golden.variants[name];
    let file = GgufFile::open(fixtures().join(&variant.gguf)).expect("fixture GGUF opens");
    let mut engine = load_engine(Arc::new(file), BackendKind::Cpu, 2, 128).expect("loads");
    let vocab = engine.config().vocab;

    let (shape, values) = npy::read_f32(&fixtures().join(&variant.logits)).expect("logits");
    let prompt = &golden.prompt_ids;
    assert_eq!(shape, [prompt.len(), vocab]);
    let hf: Vec<Vec<f32>> = values.chunks(vocab).map(<[f32]>::to_vec).collect();

    // Prefill path: the whole prompt at once.
    let prefill: Vec<Vec<f32>> = engine
        .eval(prompt, true)
        .unwrap()
        .chunks(vocab)
        .map(<[f32]>::to_vec)
        .collect();
    // Decode path: one token at a time, then greedy continuation.
    engine.reset();
    let mut decode = Vec::new();
    for &token in prompt {
        decode.push(engine.eval(&[token], false).unwrap());
    }
    let mut greedy = Vec::new();
    let mut logits = decode.last().cloned().unwrap();
    for _ in 0..variant.greedy_ids.len() {
        let next = argmax(&logits) as u32;
        greedy.push(next);
        logits = engine.eval(&[next], false).unwrap();
    }

    for (path, logits) in [("prefill", &prefill), ("decode", &decode)] {
        let a = compare(logits, &hf);
        println!(
            "{name} {path}: min cosine {:.12} (1 − cos = {:.2e}), max |Δ| {:.3e}, top-1 mismatches at {:?}",
            a.min_cosine,
            1.0 - a.min_cosine,
            a.max_abs,
            a.top1_mismatches
        );
        assert!(
            a.min_cosine >= min_cosine,
            "{name} {path}: min cosine {} < {min_cosine}",
            a.min_cosine
        );
        assert!(a.top1_mismatches.is_empty(), "{name} {path}: top-1 differs");
    }
    let first_diff = greedy
        .iter()
        .zip(&variant.greedy_ids)
        .position(|(a, b)| a != b);
    println!("{name} greedy: first difference from HF at {first_diff:?}");
    assert_eq!(greedy, variant.greedy_ids, "{name}: greedy tokens differ");
}

#[test]
fn f32_matches_hf_logits_and_greedy_tokens() {
    check_variant("f32", 0.999999);
}

#[test]
fn q8_0_matches_hf_logits_and_greedy_tokens() {
    check_variant("q8_0", 0.9999);
}

#[test]
fn q4_k_matches_hf_logits_and_greedy_tokens() {
    check_variant("q4_k", 0.9999);
}
