//! A backend's decode against the CPU reference on the bundled fixtures: the logits at every
//! prompt position (the backend fed one token at a time, so every step is a decode step), then
//! greedy tokens with the logits of each step.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use qwen35::compare::compare_logits;
use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind, Engine};
use qwen35::sample::argmax;

pub struct Fixture {
    pub variant: String,
    pub file: Arc<GgufFile>,
    pub prompt: Vec<u32>,
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every variant in tests/fixtures/golden.json.
pub fn fixtures() -> Vec<Fixture> {
    #[derive(serde::Deserialize)]
    struct Golden {
        prompt_ids: Vec<u32>,
        variants: BTreeMap<String, Variant>,
    }
    #[derive(serde::Deserialize)]
    struct Variant {
        gguf: String,
    }
    let text = std::fs::read_to_string(fixture_dir().join("golden.json")).expect("golden.json");
    let golden: Golden = serde_json::from_str(&text).expect("golden.json parses");
    golden
        .variants
        .into_iter()
        .map(|(variant, v)| Fixture {
            file: Arc::new(GgufFile::open(fixture_dir().join(&v.gguf)).expect("fixture opens")),
            variant,
            prompt: golden.prompt_ids.clone(),
        })
        .collect()
}

/// What one engine produced on a fixture.
pub struct Run {
    /// `[prompt, vocab]`: the logits after each prompt token.
    pub prompt_logits: Vec<f32>,
    pub greedy: Vec<u32>,
    /// `[greedy, vocab]`: the logits each greedy token was picked from.
    pub greedy_logits: Vec<f32>,
}

/// Runs the prompt (all at once, or one token per eval) and then `greedy` greedy tokens.
pub fn run(engine: &mut dyn Engine, prompt: &[u32], greedy: usize, one_at_a_time: bool) -> Run {
    engine.reset();
    let prompt_logits = if one_at_a_time {
        prompt
            .iter()
            .flat_map(|&t| engine.eval(&[t], false).expect("eval"))
            .collect()
    } else {
        engine.eval(prompt, true).expect("eval")
    };
    let vocab = engine.config().vocab;
    let mut last = prompt_logits[prompt_logits.len() - vocab..].to_vec();
    let mut tokens = Vec::with_capacity(greedy);
    let mut greedy_logits = Vec::with_capacity(greedy * vocab);
    while tokens.len() < greedy {
        let next = argmax(&last);
        tokens.push(next);
        greedy_logits.extend_from_slice(&last);
        if tokens.len() < greedy {
            last = engine.eval(&[next], false).expect("eval");
        }
    }
    Run {
        prompt_logits,
        greedy: tokens,
        greedy_logits,
    }
}

/// The CPU reference on a fixture: the prompt in one prefill, then the greedy tokens.
pub fn reference(fixture: &Fixture, greedy: usize) -> Run {
    let mut cpu = load_engine(fixture.file.clone(), BackendKind::Cpu, 1, 256).expect("cpu");
    run(cpu.as_mut(), &fixture.prompt, greedy, false)
}

/// Cosine ≥ `min_cosine` and the same top-1 at every prompt position and greedy step, and the
/// same greedy tokens.
pub fn assert_agrees(what: &str, ours: &Run, reference: &Run, vocab: usize, min_cosine: f64) {
    assert_eq!(ours.greedy, reference.greedy, "{what}: greedy tokens");
    for (part, a, b) in [
        ("prompt", &ours.prompt_logits, &reference.prompt_logits),
        ("greedy", &ours.greedy_logits, &reference.greedy_logits),
    ] {
        let agreement = compare_logits(a, b, vocab);
        assert!(
            agreement.min_cosine >= min_cosine,
            "{what} {part}: min cosine {} < {min_cosine}",
            agreement.min_cosine
        );
        assert_eq!(
            agreement.top1_matches,
            agreement.positions.len(),
            "{what} {part}: top-1 differs"
        );
        eprintln!(
            "{what} {part}: {} positions, min cosine {:.10}, max |Δ| {:.3e}",
            agreement.positions.len(),
            agreement.min_cosine,
            agreement.max_abs_diff
        );
    }
}
