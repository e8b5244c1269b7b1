//! `qwen35 check`: the cross-platform correctness run. On the bundled fixture the CPU reference
//! is held to HF transformers' golden logits; every other backend is held to the CPU.

use super::{open_gguf, parse_backend};
use anyhow::Context;
use clap::Args;
use qwen35::compare::{compare_logits, Agreement};
use qwen35::model::{load_engine, BackendKind, Engine};
use qwen35::npy;
use qwen35::sample::argmax;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct CheckArgs {
    /// A GGUF model to check the backends on (default: the bundled fixtures, against HF goldens).
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// Prompt token ids to use with --model (default: the fixture prompt's length of ids 1..).
    #[arg(long)]
    tokens: Option<String>,
    /// Where the bundled fixtures are (default: tests/fixtures of the source tree).
    #[arg(long)]
    fixtures: Option<PathBuf>,
    /// Backends to check (default: all).
    #[arg(long, value_delimiter = ',', value_parser = parse_backend)]
    backend: Option<Vec<BackendKind>>,
    /// Tokens to generate greedily and compare.
    #[arg(long, default_value_t = 32)]
    greedy: usize,
    #[arg(long)]
    threads: Option<usize>,
}

/// tests/fixtures/golden.json, as written by scripts/make_fixture.py.
#[derive(Deserialize)]
struct Golden {
    prompt_ids: Vec<u32>,
    variants: BTreeMap<String, GoldenVariant>,
}

#[derive(Deserialize)]
struct GoldenVariant {
    gguf: String,
    logits: String,
    greedy_ids: Vec<u32>,
}

/// Pass thresholds: float weights must match the reference to float precision; quantized
/// weights are compared with HF run on the same dequantized weights, which leaves only
/// summation-order differences but over a wider dynamic range.
fn min_cosine_for(variant: &str) -> f64 {
    if variant == "f32" {
        0.999_999
    } else {
        0.9999
    }
}

const BACKEND_MIN_COSINE: f64 = 0.99999;

pub fn run(args: CheckArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let backends = args
        .backend
        .clone()
        .unwrap_or_else(|| vec![BackendKind::Cpu, BackendKind::Wgpu, BackendKind::Metal]);
    let mut table = Table::default();
    match &args.model {
        None => check_fixtures(&args, &backends, threads, &mut table)?,
        Some(path) => {
            let prompt = match &args.tokens {
                Some(text) => super::parse_token_ids(text)?,
                None => (1..=24).collect(),
            };
            check_model(path, &prompt, &backends, args.greedy, threads, &mut table)?
        }
    }
    table.print();
    anyhow::ensure!(table.all_passed(), "check failed");
    Ok(())
}

fn fixture_dir(args: &CheckArgs) -> PathBuf {
    args.fixtures.clone().unwrap_or_else(|| {
        let in_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        if in_tree.exists() {
            in_tree
        } else {
            PathBuf::from("tests/fixtures")
        }
    })
}

fn check_fixtures(
    args: &CheckArgs,
    backends: &[BackendKind],
    threads: usize,
    table: &mut Table,
) -> anyhow::Result<()> {
    let dir = fixture_dir(args);
    let golden_path = dir.join("golden.json");
    let golden: Golden = serde_json::from_str(
        &std::fs::read_to_string(&golden_path)
            .with_context(|| format!("reading {}", golden_path.display()))?,
    )
    .with_context(|| format!("parsing {}", golden_path.display()))?;
    for (variant, expected) in &golden.variants {
        let path = dir.join(&expected.gguf);
        let file = open_gguf(&path)?;
        let (shape, hf_logits) = npy::read_f32(&dir.join(&expected.logits))?;
        let mut cpu = load_engine(file.clone(), BackendKind::Cpu, threads, 4096)?;
        let vocab = cpu.config().vocab;
        anyhow::ensure!(
            shape == [golden.prompt_ids.len(), vocab],
            "{}: shape {shape:?} does not match the prompt and vocabulary",
            expected.logits
        );
        let greedy_len = expected.greedy_ids.len().min(args.greedy);
        let cpu_run = evaluate(
            cpu.as_mut(),
            BackendKind::Cpu,
            &golden.prompt_ids,
            greedy_len,
        )?;
        table.push(Row::new(
            format!("cpu vs HF ({variant})"),
            compare_logits(&cpu_run.logits, &hf_logits, vocab),
            &cpu_run.greedy,
            &expected.greedy_ids[..greedy_len],
            min_cosine_for(variant),
        ));
        for &backend in backends.iter().filter(|&&b| b != BackendKind::Cpu) {
            let label = format!("{backend} vs cpu ({variant})");
            match load_engine(file.clone(), backend, threads, 4096) {
                Err(e) => table.unavailable(label, e.to_string()),
                Ok(mut engine) => {
                    let run = evaluate(engine.as_mut(), backend, &golden.prompt_ids, greedy_len)?;
                    table.push(Row::new(
                        label,
                        compare_logits(&run.logits, &cpu_run.logits, vocab),
                        &run.greedy,
                        &cpu_run.greedy,
                        BACKEND_MIN_COSINE,
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_model(
    path: &Path,
    prompt: &[u32],
    backends: &[BackendKind],
    greedy: usize,
    threads: usize,
    table: &mut Table,
) -> anyhow::Result<()> {
    let file = open_gguf(path)?;
    let mut cpu = load_engine(file.clone(), BackendKind::Cpu, threads, 4096)?;
    let vocab = cpu.config().vocab;
    if let Some(bad) = prompt.iter().find(|&&id| id as usize >= vocab) {
        anyhow::bail!("token id {bad} is outside the vocabulary ({vocab} tokens)");
    }
    let reference = evaluate(cpu.as_mut(), BackendKind::Cpu, prompt, greedy)?;
    eprintln!("cpu is the reference on {}", path.display());
    for &backend in backends.iter().filter(|&&b| b != BackendKind::Cpu) {
        let label = format!("{backend} vs cpu");
        match load_engine(file.clone(), backend, threads, 4096) {
            Err(e) => table.unavailable(label, e.to_string()),
            Ok(mut engine) => {
                let run = evaluate(engine.as_mut(), backend, prompt, greedy)?;
                table.push(Row::new(
                    label,
                    compare_logits(&run.logits, &reference.logits, vocab),
                    &run.greedy,
                    &reference.greedy,
                    BACKEND_MIN_COSINE,
                ));
            }
        }
    }
    Ok(())
}

struct Evaluation {
    /// Logits at every prompt position.
    logits: Vec<f32>,
    /// Greedy continuation of the prompt.
    greedy: Vec<u32>,
}

/// The prompt's logits at every position and a greedy continuation. The Metal backend takes
/// the prompt one token at a time, so that every row of logits comes from its MSL decode
/// kernels (its prefill runs the WGSL kernels, which the wgpu row checks).
fn evaluate(
    engine: &mut dyn Engine,
    backend: BackendKind,
    prompt: &[u32],
    greedy: usize,
) -> anyhow::Result<Evaluation> {
    engine.reset();
    let logits = if backend == BackendKind::Metal {
        let mut logits = Vec::new();
        for &token in prompt {
            logits.extend(engine.eval(&[token], false)?);
        }
        logits
    } else {
        engine.eval(prompt, true)?
    };
    let vocab = engine.config().vocab;
    let mut tokens = Vec::with_capacity(greedy);
    let mut last = logits[logits.len() - vocab..].to_vec();
    while tokens.len() < greedy {
        let next = argmax(&last);
        tokens.push(next);
        if tokens.len() < greedy {
            last = engine.eval(&[next], false)?;
        }
    }
    Ok(Evaluation {
        logits,
        greedy: tokens,
    })
}

struct Row {
    label: String,
    outcome: Result<(Agreement, usize, usize, bool), String>,
}

impl Row {
    fn new(
        label: String,
        agreement: Agreement,
        greedy: &[u32],
        expected: &[u32],
        min_cosine: f64,
    ) -> Row {
        let greedy_same = greedy
            .iter()
            .zip(expected)
            .take_while(|(a, b)| a == b)
            .count();
        let pass = agreement.min_cosine >= min_cosine
            && agreement.top1_matches == agreement.positions.len()
            && greedy_same == expected.len();
        Row {
            label,
            outcome: Ok((agreement, greedy_same, expected.len(), pass)),
        }
    }
}

#[derive(Default)]
struct Table {
    rows: Vec<Row>,
}

impl Table {
    fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    fn unavailable(&mut self, label: String, reason: String) {
        self.rows.push(Row {
            label,
            outcome: Err(reason),
        });
    }

    fn all_passed(&self) -> bool {
        self.rows
            .iter()
            .all(|r| r.outcome.as_ref().map_or(true, |o| o.3))
    }

    fn print(&self) {
        println!(
            "{:<24} {:>13} {:>10} {:>7} {:>7}  result",
            "run", "min cosine", "max |Δ|", "top-1", "greedy"
        );
        for row in &self.rows {
            match &row.outcome {
                Ok((a, greedy_same, greedy_len, pass)) => println!(
                    "{:<24} {:>13.10} {:>10.3e} {:>7} {:>7}  {}",
                    row.label,
                    a.min_cosine,
                    a.max_abs_diff,
                    format!("{}/{}", a.top1_matches, a.positions.len()),
                    format!("{greedy_same}/{greedy_len}"),
                    if *pass { "PASS" } else { "FAIL" }
                ),
                Err(reason) => println!("{:<24} not run here: {reason}", row.label),
            }
        }
    }
}
