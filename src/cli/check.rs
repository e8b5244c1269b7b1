//! `qwen35 check`: the cross-platform correctness run. On the bundled fixtures (the tiny random
//! model's three variants, and the default model when its golden is there) the CPU reference is
//! held to HF transformers' golden logits; every other backend is held to the CPU.
//!
//! The exit status means what the table says: any FAIL row, or a run that checked nothing, exits
//! non-zero. A backend with no device on this machine is a SKIP only when nobody asked for it: a
//! backend named in `--backend` must run, and so must wgpu (and Metal on macOS) under
//! `QWEN35_REQUIRE_GPU=1`. A device that exists and then fails (out of memory, a kernel that does
//! not build, a lost device) is always a FAIL.

use super::{at_least_one, cpu_threads, open_gguf, parse_backend, parse_token_ids, GpuArgs};
use anyhow::Context;
use clap::Args;
use qwen35::backend::BackendOptions;
use qwen35::compare::{compare_logits, Agreement};
use qwen35::model::{load_engine_with, BackendKind, Engine, ModelError};
use qwen35::npy;
use qwen35::sample::argmax;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Args)]
pub struct CheckArgs {
    /// A GGUF model to check the backends on against the CPU (default: the bundled fixtures,
    /// against HF goldens).
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// Prompt token ids to use with --model: a file of ids separated by whitespace or commas (as
    /// `eval --tokens` takes), or the ids themselves, e.g. "1,2,3" (default: ids 1..=24).
    #[arg(long, value_name = "FILE|IDS")]
    tokens: Option<String>,
    /// Where the bundled fixtures are (default: tests/fixtures of the source tree).
    #[arg(long)]
    fixtures: Option<PathBuf>,
    /// Backends to check (default: cpu, wgpu, metal; those without a device here are skipped).
    /// A backend named here must run: no device for it is a failure.
    #[arg(long, value_delimiter = ',', value_parser = parse_backend)]
    backend: Option<Vec<BackendKind>>,
    /// Tokens to generate greedily and compare.
    #[arg(long, default_value_t = 32)]
    greedy: usize,
    /// Threads of the CPU backends (default: all cores).
    #[arg(long, allow_negative_numbers = true, value_parser = at_least_one)]
    threads: Option<usize>,
    #[command(flatten)]
    gpu: GpuArgs,
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

/// tests/fixtures/default-model.json, as written by scripts/default_model/goldens.py: the
/// bundled default model's golden, checked when the file is there.
#[derive(Deserialize)]
struct DefaultModelGolden {
    weights: String,
    prompt_ids: Vec<u32>,
    #[serde(flatten)]
    golden: GoldenVariant,
}

/// The fixtures' file of the default model's golden.
const DEFAULT_MODEL_GOLDEN: &str = "default-model.json";

/// One model held to its HF golden: a variant of the tiny fixture, or the default model.
struct Fixture {
    /// What the rows call it.
    name: String,
    /// Its weight type, which picks the bounds.
    weights: String,
    prompt_ids: Vec<u32>,
    golden: GoldenVariant,
}

/// What a row must show to pass. Besides these, top-1 must be identical at every position and
/// every greedy token identical.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bounds {
    min_cosine: f64,
    max_abs_diff: f32,
}

/// The weights of a file `--model` names: a mix of types, held to the loosest fixture bounds.
const MODEL_FILE: &str = "model file";

/// Every row's bounds, by who is checked and the fixture's weight type (`f32`, `q8_0`, `q4_k`,
/// or [`MODEL_FILE`]). The tiny fixtures' logits reach |16|, the default model's |25|.
fn bounds(backend: BackendKind, weights: &str) -> Bounds {
    let quantized = weights != "f32";
    match backend {
        // Against HF float32 on the same dequantized weights only summation order differs
        // (measured: cosine 1 - 5e-11, max |Δ| ≤ 2.5e-5 on the tiny fixtures, 6.7e-6 on the
        // default model).
        BackendKind::Cpu => Bounds {
            min_cosine: 0.999_999,
            max_abs_diff: 1e-4,
        },
        // 14-bit activations in the quantized matmuls (measured: cosine 0.999999, max |Δ|
        // 1.4e-2 on q4_k); f32 weights take the exact path.
        BackendKind::CpuFast if quantized => Bounds {
            min_cosine: 0.9999,
            max_abs_diff: 5e-2,
        },
        BackendKind::CpuFast => Bounds {
            min_cosine: 0.999_999,
            max_abs_diff: 1e-4,
        },
        // The prefill GEMM in f16 on tensor cores, and 14-bit activations in the Q4_K/Q6_K
        // decode GEMVs (measured on the H200: cosine 0.999997, max |Δ| 3.0e-2; on lavapipe,
        // with the f32 GEMM: max |Δ| 3.0e-5).
        BackendKind::Wgpu | BackendKind::Metal => Bounds {
            min_cosine: 0.999_99,
            max_abs_diff: 5e-2,
        },
    }
}

pub fn run(args: CheckArgs) -> anyhow::Result<()> {
    let options = BackendOptions {
        threads: cpu_threads(args.threads),
        gpu: args.gpu.options(),
    };
    let policy = SkipPolicy {
        named: args.backend.is_some(),
        require_gpu: std::env::var("QWEN35_REQUIRE_GPU").as_deref() == Ok("1"),
    };
    let backends = args
        .backend
        .clone()
        .unwrap_or_else(|| vec![BackendKind::Cpu, BackendKind::Wgpu, BackendKind::Metal]);
    let checked: Vec<BackendKind> = backends
        .iter()
        .copied()
        .filter(|&b| b != BackendKind::Cpu)
        .collect();
    let mut table = Table::default();
    match &args.model {
        None => check_fixtures(&args, &checked, policy, &options, &mut table)?,
        Some(path) => {
            anyhow::ensure!(
                !checked.is_empty(),
                "with --model the CPU is the reference and nothing else was asked for: name the \
                 backends to check against it, e.g. --backend wgpu"
            );
            let prompt = match &args.tokens {
                Some(given) => read_token_ids(given)?,
                None => (1..=24).collect(),
            };
            check_model(
                path,
                &prompt,
                &checked,
                policy,
                args.greedy,
                &options,
                &mut table,
            )?
        }
    }
    table.finish()
}

/// `--tokens`: a file of ids if one is there, else the ids themselves.
fn read_token_ids(given: &str) -> anyhow::Result<Vec<u32>> {
    let ids = if Path::new(given).is_file() {
        let text = std::fs::read_to_string(given).with_context(|| format!("reading {given}"))?;
        parse_token_ids(&text).with_context(|| format!("reading {given}"))?
    } else {
        parse_token_ids(given).context("--tokens is neither a file nor a list of token ids")?
    };
    anyhow::ensure!(!ids.is_empty(), "--tokens {given}: no token ids");
    Ok(ids)
}

/// When a backend without a device here is skipped rather than failed.
#[derive(Clone, Copy)]
struct SkipPolicy {
    /// The backends were named in `--backend`.
    named: bool,
    /// `QWEN35_REQUIRE_GPU=1`: this machine's GPU backends must run.
    require_gpu: bool,
}

impl SkipPolicy {
    fn may_skip(self, backend: BackendKind) -> bool {
        let required_gpu = match backend {
            BackendKind::Wgpu => true,
            // Metal devices exist only under macOS.
            BackendKind::Metal => cfg!(target_os = "macos"),
            BackendKind::Cpu | BackendKind::CpuFast => false,
        };
        !self.named && !(self.require_gpu && required_gpu)
    }
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

/// The fixtures in `dir`: the tiny model's variants from golden.json, then the default model if
/// its golden is there.
fn read_fixtures(dir: &Path) -> anyhow::Result<Vec<Fixture>> {
    let golden: Golden = read_json(&dir.join("golden.json"))?;
    let mut fixtures: Vec<Fixture> = golden
        .variants
        .into_iter()
        .map(|(variant, expected)| Fixture {
            name: variant.clone(),
            weights: variant,
            prompt_ids: golden.prompt_ids.clone(),
            golden: expected,
        })
        .collect();
    let default_path = dir.join(DEFAULT_MODEL_GOLDEN);
    if default_path.exists() {
        let default: DefaultModelGolden = read_json(&default_path)?;
        fixtures.push(Fixture {
            name: "default model".into(),
            weights: default.weights,
            prompt_ids: default.prompt_ids,
            golden: default.golden,
        });
    }
    Ok(fixtures)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn check_fixtures(
    args: &CheckArgs,
    checked: &[BackendKind],
    policy: SkipPolicy,
    options: &BackendOptions,
    table: &mut Table,
) -> anyhow::Result<()> {
    let dir = fixture_dir(args);
    let fixtures = read_fixtures(&dir)?;
    let mut weight_types: Vec<&str> = Vec::new();
    for fixture in &fixtures {
        if !weight_types.contains(&fixture.weights.as_str()) {
            weight_types.push(&fixture.weights);
        }
    }
    let mut subjects = vec![BackendKind::Cpu];
    subjects.extend_from_slice(checked);
    table.print_header(&subjects, &weight_types);
    for fixture in &fixtures {
        let Fixture {
            name,
            weights,
            prompt_ids: prompt,
            golden: expected,
        } = fixture;
        let path = dir.join(&expected.gguf);
        let file = open_gguf(&path)?;
        let (shape, hf_logits) = npy::read_f32(&dir.join(&expected.logits))?;
        let greedy_len = expected.greedy_ids.len().min(args.greedy);
        let hf = Evaluation {
            logits: hf_logits,
            greedy: expected.greedy_ids[..greedy_len].to_vec(),
        };
        let label = format!("cpu vs HF ({name})");
        let cpu_bounds = bounds(BackendKind::Cpu, weights);
        let reference = match run_backend(&file, BackendKind::Cpu, prompt, greedy_len, options) {
            Ok(cpu) if shape != [prompt.len(), cpu.vocab] => {
                table.fail(
                    label,
                    format!(
                        "{}: shape {shape:?} does not match the prompt and vocabulary",
                        expected.logits
                    ),
                );
                None
            }
            Ok(cpu) => {
                table.compare(label, &cpu, &hf, cpu_bounds);
                Some(cpu)
            }
            Err(e) => {
                table.fail(label, format!("{e:#}"));
                None
            }
        };
        for &backend in checked {
            let label = format!("{backend} vs cpu ({name})");
            let Some(reference) = &reference else {
                table.skip(label, "the CPU reference did not run".into());
                continue;
            };
            let result = run_backend(&file, backend, prompt, greedy_len, options);
            table.judge(
                label,
                backend,
                policy,
                result,
                reference,
                bounds(backend, weights),
            );
        }
    }
    Ok(())
}

fn check_model(
    path: &Path,
    prompt: &[u32],
    checked: &[BackendKind],
    policy: SkipPolicy,
    greedy: usize,
    options: &BackendOptions,
    table: &mut Table,
) -> anyhow::Result<()> {
    let file = open_gguf(path)?;
    let reference = run_backend(&file, BackendKind::Cpu, prompt, greedy, options)
        .with_context(|| format!("the CPU reference on {}", path.display()))?;
    table.print_header(checked, &[MODEL_FILE]);
    for &backend in checked {
        let result = run_backend(&file, backend, prompt, greedy, options);
        let label = format!("{backend} vs cpu");
        table.judge(
            label,
            backend,
            policy,
            result,
            &reference,
            bounds(backend, MODEL_FILE),
        );
    }
    Ok(())
}

struct Evaluation {
    /// Logits at every prompt position.
    logits: Vec<f32>,
    /// Greedy continuation of the prompt.
    greedy: Vec<u32>,
}

struct BackendRun {
    vocab: usize,
    evaluation: Evaluation,
}

impl std::ops::Deref for BackendRun {
    type Target = Evaluation;
    fn deref(&self) -> &Evaluation {
        &self.evaluation
    }
}

/// Loads `file` on `backend` and evaluates the prompt there.
fn run_backend(
    file: &Arc<qwen35::gguf::GgufFile>,
    backend: BackendKind,
    prompt: &[u32],
    greedy: usize,
    options: &BackendOptions,
) -> Result<BackendRun, ModelError> {
    let mut engine = load_engine_with(Arc::clone(file), backend, options, 4096)?;
    let vocab = engine.config().vocab;
    if let Some(&token) = prompt.iter().find(|&&id| id as usize >= vocab) {
        return Err(ModelError::TokenOutOfRange { token, vocab });
    }
    let evaluation = evaluate(engine.as_mut(), backend, prompt, greedy)?;
    Ok(BackendRun { vocab, evaluation })
}

/// The prompt's logits at every position and a greedy continuation. The Metal backend takes
/// the prompt one token at a time, so that every row of logits comes from its MSL decode
/// kernels (its prefill runs the WGSL kernels, which the wgpu row checks).
fn evaluate(
    engine: &mut dyn Engine,
    backend: BackendKind,
    prompt: &[u32],
    greedy: usize,
) -> Result<Evaluation, ModelError> {
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

/// The bounds a comparison broke, each said with its value; none when it passes.
fn broken_bounds(
    agreement: &Agreement,
    greedy_same: usize,
    greedy_len: usize,
    bounds: Bounds,
) -> Vec<String> {
    let mut broken = Vec::new();
    // Written so that NaN breaks them.
    if !(agreement.min_cosine >= bounds.min_cosine) {
        broken.push(format!(
            "min cosine {:.10} < {}",
            agreement.min_cosine, bounds.min_cosine
        ));
    }
    if !(agreement.max_abs_diff <= bounds.max_abs_diff) {
        broken.push(format!(
            "max |Δ| {:.3e} > {:.1e}",
            agreement.max_abs_diff, bounds.max_abs_diff
        ));
    }
    if agreement.top1_matches != agreement.positions.len() {
        let first = agreement
            .positions
            .iter()
            .position(|p| p.top1 != p.reference_top1)
            .unwrap_or_default();
        broken.push(format!("top-1 differs first at position {first}"));
    }
    if greedy_same != greedy_len {
        broken.push(format!("greedy token {greedy_same} differs"));
    }
    broken
}

const WIDTH: usize = 31;

/// The table, printed a row at a time as each finishes; reasons are footnotes under it.
#[derive(Default)]
struct Table {
    passed: usize,
    failed: usize,
    skipped: usize,
    /// Distinct reasons, in order of first use; a row refers to one by number.
    notes: Vec<String>,
    /// The skipped backends and why, for the summary.
    skipped_backends: Vec<String>,
}

impl Table {
    fn print_header(&self, subjects: &[BackendKind], weight_types: &[&str]) {
        println!("bounds (and every row: top-1 identical at every position, every greedy token identical):");
        for &backend in subjects {
            let against = if backend == BackendKind::Cpu {
                "cpu vs HF".to_string()
            } else {
                format!("{backend} vs cpu")
            };
            let mut groups: Vec<(Bounds, Vec<&str>)> = Vec::new();
            for &weights in weight_types {
                let b = bounds(backend, weights);
                match groups.iter_mut().find(|(g, _)| *g == b) {
                    Some((_, types)) => types.push(weights),
                    None => groups.push((b, vec![weights])),
                }
            }
            for (b, types) in groups {
                println!(
                    "  {against:<16} {:<18} min cosine ≥ {}, max |Δ| ≤ {:.1e}",
                    types.join(", "),
                    b.min_cosine,
                    b.max_abs_diff
                );
            }
        }
        println!();
        println!(
            "{:<WIDTH$} {:>13} {:>10} {:>7} {:>7}  result",
            "run", "min cosine", "max |Δ|", "top-1", "greedy"
        );
    }

    /// Compares `run` with `reference` under `bounds` and prints the row.
    fn compare(&mut self, label: String, run: &BackendRun, reference: &Evaluation, bounds: Bounds) {
        let agreement = compare_logits(&run.logits, &reference.logits, run.vocab);
        let greedy_same = run
            .greedy
            .iter()
            .zip(&reference.greedy)
            .take_while(|(a, b)| a == b)
            .count();
        let greedy_len = reference.greedy.len();
        let broken = broken_bounds(&agreement, greedy_same, greedy_len, bounds);
        let result = if broken.is_empty() {
            self.passed += 1;
            "PASS".to_string()
        } else {
            self.failed += 1;
            format!("FAIL {}", self.note(broken.join("; ")))
        };
        self.print(format!(
            "{label:<WIDTH$} {:>13.10} {:>10.3e} {:>7} {:>7}  {result}",
            agreement.min_cosine,
            agreement.max_abs_diff,
            format!("{}/{}", agreement.top1_matches, agreement.positions.len()),
            format!("{greedy_same}/{greedy_len}"),
        ));
    }

    /// A backend's row: compared if it ran; a failure, or a skip when it has no device here
    /// and `policy` allows that.
    fn judge(
        &mut self,
        label: String,
        backend: BackendKind,
        policy: SkipPolicy,
        result: Result<BackendRun, ModelError>,
        reference: &BackendRun,
        bounds: Bounds,
    ) {
        match result {
            Ok(run) => self.compare(label, &run, reference, bounds),
            Err(ModelError::BackendUnavailable { reason, .. }) if policy.may_skip(backend) => {
                let entry = format!("{backend} has no device here {}", self.skip(label, reason));
                if !self.skipped_backends.contains(&entry) {
                    self.skipped_backends.push(entry);
                }
            }
            Err(e @ ModelError::BackendUnavailable { .. }) => {
                let why = if policy.named {
                    "--backend asked for it"
                } else {
                    "QWEN35_REQUIRE_GPU=1 requires it"
                };
                self.fail(label, format!("{e}; {why}"))
            }
            Err(e) => self.fail(label, e.to_string()),
        }
    }

    fn fail(&mut self, label: String, reason: String) {
        self.failed += 1;
        let note = self.note(reason);
        self.print(format!(
            "{label:<WIDTH$} {:>41}  FAIL {note}",
            "did not run"
        ));
    }

    /// Prints a skipped row; returns the mark of its reason.
    fn skip(&mut self, label: String, reason: String) -> String {
        self.skipped += 1;
        let note = self.note(reason);
        self.print(format!("{label:<WIDTH$} {:>41}  SKIP {note}", "not run"));
        note
    }

    /// The footnote mark of `reason`.
    fn note(&mut self, reason: String) -> String {
        let index = match self.notes.iter().position(|n| *n == reason) {
            Some(i) => i,
            None => {
                self.notes.push(reason);
                self.notes.len() - 1
            }
        };
        format!("[{}]", index + 1)
    }

    fn print(&self, line: String) {
        println!("{line}");
        std::io::stdout().flush().ok();
    }

    /// Prints the footnotes and the summary line; an error unless every checked row passed and
    /// at least one was checked.
    fn finish(self) -> anyhow::Result<()> {
        println!();
        for (i, note) in self.notes.iter().enumerate() {
            println!("[{}] {note}", i + 1);
        }
        let checked = self.passed + self.failed;
        let skipped = match (self.skipped, self.skipped_backends.is_empty()) {
            (0, _) => String::new(),
            (n, true) => format!(", {n} skipped"),
            (n, false) => format!(", {n} skipped: {}", self.skipped_backends.join(", ")),
        };
        if self.failed > 0 {
            println!(
                "FAIL {} of {checked} failed ({} passed){skipped}",
                self.failed, self.passed
            );
            anyhow::bail!("check failed");
        }
        if checked == 0 {
            println!("FAIL nothing was checked{skipped}");
            anyhow::bail!("check ran nothing");
        }
        println!("PASS {}/{checked} checked{skipped}", self.passed);
        Ok(())
    }
}
