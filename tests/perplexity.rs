//! `qwen35 perplexity` against llama.cpp's `llama-perplexity` (b11434, CPU) on the bundled fixtures
//! and the default model: the reference figures are read from llama-perplexity's raw outputs
//! committed under benches/results/perplexity-2026-12-05/ and perplexity-default-2026-12-05/, and
//! every error case exits non-zero with its reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RESULTS: &str = "benches/results/perplexity-2026-12-05";
const TEXT: &str = "tests/data/perplexity.txt";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn perplexity(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .current_dir(root())
        .arg("perplexity")
        .args(args)
        .output()
        .unwrap()
}

/// The PPL and its error from a `Final estimate: PPL = x +/- err` line, which both programs print.
fn final_ppl(output: &str) -> Option<(f64, f64)> {
    const LABEL: &str = "Final estimate: PPL = ";
    // llama-perplexity's log lines start with a timestamp.
    let line = output.lines().find(|l| l.contains(LABEL))?;
    let (ppl, error) = line[line.find(LABEL)? + LABEL.len()..].split_once(" +/- ")?;
    Some((ppl.parse().ok()?, error.trim().parse().ok()?))
}

/// One measurement: a model on a text, and the llama-perplexity output it must agree with.
struct Case {
    model: String,
    text: &'static str,
    ctx: usize,
    chunks: usize,
    /// llama-perplexity's committed output on the same tokens.
    reference: PathBuf,
}

/// A fixture at --ctx 128 --chunks 4. A quantized file is compared with llama-perplexity on its
/// weights dequantized to F32: on the quantized file itself llama.cpp's CPU matmuls also round the
/// activations to 8 bits, which moves this random model's perplexity by up to 1.1% (the README
/// there has both).
fn fixture(variant: &str) -> Case {
    let name = match variant {
        "f32" => "f32".to_string(),
        _ => format!("{variant}-dequant"),
    };
    Case {
        model: format!("tests/fixtures/tiny-{variant}.gguf"),
        text: TEXT,
        ctx: 128,
        chunks: 4,
        reference: root()
            .join(RESULTS)
            .join(format!("llama-perplexity-{name}-ctx128-chunks4.txt")),
    }
}

/// The bundled default model (Q8_0) on a committed sample of its held-out split, against
/// llama-perplexity on its weights dequantized to F32 (benches/results/perplexity-default-2026-12-05).
fn default_model() -> Case {
    Case {
        model: "models/qwen35-default-q8_0.gguf".to_string(),
        text: "tests/data/default-heldout.txt",
        ctx: 256,
        chunks: 6,
        reference: root().join(
            "benches/results/perplexity-default-2026-12-05/sample-llama-perplexity-q8_0-dequant-ctx256.txt",
        ),
    }
}

/// The reference's PPL and error.
fn reference(case: &Case) -> (f64, f64) {
    let text = std::fs::read_to_string(&case.reference).unwrap();
    final_ppl(&text).unwrap_or_else(|| panic!("no final estimate in {}", case.reference.display()))
}

/// Within this relative difference of llama-perplexity: cpu and wgpu compute in f32 as llama.cpp
/// does on F32 weights; cpu-fast rounds activations to 14 bits (1.1e-4 measured on q4_k).
fn tolerance(backend: &str) -> f64 {
    match backend {
        "cpu-fast" => 5e-4,
        _ => 1e-4,
    }
}

/// Ours on `backend`, checked against llama-perplexity's figure; not run when the backend has no
/// device here (never allowed under QWEN35_REQUIRE_GPU=1).
fn check(case: &Case, backend: &str) {
    let out = perplexity(&[
        "-m",
        &case.model,
        "-f",
        case.text,
        "--ctx",
        &case.ctx.to_string(),
        "--chunks",
        &case.chunks.to_string(),
        "--backend",
        backend,
    ]);
    let model = &case.model;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && backend == "wgpu" && stderr.contains("unavailable") {
        assert!(
            std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1"),
            "QWEN35_REQUIRE_GPU=1 but wgpu did not run: {stderr}"
        );
        eprintln!("not run: {stderr}");
        return;
    }
    assert!(out.status.success(), "{model} {backend}: {stderr}");
    let (ours, error) =
        final_ppl(&stdout).unwrap_or_else(|| panic!("no final estimate in {stdout:?}"));
    let (expected, expected_error) = reference(case);
    for (what, value, reference) in [("PPL", ours, expected), ("error", error, expected_error)] {
        let relative = (value - reference).abs() / reference;
        assert!(
            relative < tolerance(backend),
            "{model} {backend}: {what} {value} against llama-perplexity's {reference} \
             ({relative:.2e} relative)"
        );
    }
    // The running estimate after each chunk goes to stderr, the last one being the result.
    let running: Vec<&str> = stderr.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(running.len(), case.chunks, "{stderr}");
    assert!(
        running[case.chunks - 1].starts_with(&format!("[{}]{ours:.4} ", case.chunks)),
        "{stderr}"
    );
}

fn every_backend(case: Case) {
    for backend in ["cpu", "cpu-fast", "wgpu"] {
        check(&case, backend);
    }
}

#[test]
fn f32_matches_llama_perplexity_on_every_backend() {
    every_backend(fixture("f32"));
}

#[test]
fn q8_0_matches_llama_perplexity_on_every_backend() {
    every_backend(fixture("q8_0"));
}

#[test]
fn q4_k_matches_llama_perplexity_on_every_backend() {
    every_backend(fixture("q4_k"));
}

#[test]
fn default_model_matches_llama_perplexity_on_every_backend() {
    every_backend(default_model());
}

/// Each bad input exits non-zero with a message that names what is wrong.
#[test]
fn bad_inputs_are_refused_with_their_reason() {
    let short = std::env::temp_dir().join(format!("qwen35-ppl-short-{}.txt", std::process::id()));
    std::fs::write(&short, "Only a few words here.\n").unwrap();
    let model = "tests/fixtures/tiny-f32.gguf";
    let cases: [(&[&str], &str); 6] = [
        (&["-m", model, "-f", TEXT, "--ctx", "0"], "at least 1"),
        (
            &["-m", model, "-f", TEXT, "--ctx", "4"],
            "give --ctx 5 or more",
        ),
        (
            &["-m", model, "-f", TEXT, "--ctx", "8192"],
            "more than the model's trained context of 4096",
        ),
        (&["-m", model, "-f", TEXT, "--chunks", "0"], "at least 1"),
        (
            &["-m", model, "-f", "tests/data/no-such-file.txt"],
            "reading tests/data/no-such-file.txt",
        ),
        (
            &["-m", model, "-f", short.to_str().unwrap(), "--ctx", "64"],
            "fewer than one chunk of 64",
        ),
    ];
    for (args, reason) in cases {
        let out = perplexity(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    std::fs::remove_file(&short).unwrap();
}
