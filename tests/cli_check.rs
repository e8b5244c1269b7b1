//! `qwen35 check` under planted failures: its exit status must say what its table says. A
//! backend that was asked for and did not run, a device that fails, and a row outside its bounds
//! each exit non-zero; a backend with no device here, not asked for, is a SKIP and not a PASS.

use qwen35::npy;
use std::borrow::BorrowMut;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn require_gpu() -> bool {
    std::env::var("QWEN35_REQUIRE_GPU").as_deref() == Ok("1")
}

/// `qwen35 check ARGS`, with none of the environment variables the tests plant.
fn check(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_qwen35"));
    command
        .arg("check")
        .args(args)
        .env_remove("QWEN35_REQUIRE_GPU")
        .env_remove("QWEN35_GPU_MEMORY_LIMIT")
        .env_remove("WGPU_BACKEND");
    command
}

/// Points the Vulkan loader at no driver: wgpu finds no adapter at all.
fn without_vulkan(command: &mut Command) -> &mut Command {
    command
        .env("VK_DRIVER_FILES", "/nonexistent")
        .env("VK_ICD_FILENAMES", "/nonexistent")
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn outcome(output: Output) -> Outcome {
    let outcome = Outcome {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        !outcome.stderr.contains("panicked"),
        "check panicked: {}",
        outcome.stderr
    );
    outcome
}

fn run(mut command: impl BorrowMut<Command>) -> Outcome {
    outcome(command.borrow_mut().output().expect("qwen35 runs"))
}

impl Outcome {
    fn assert_failed(&self, needles: &[&str]) {
        assert_eq!(self.code, Some(1), "{}\n{}", self.stdout, self.stderr);
        self.assert_says(needles);
    }

    fn assert_says(&self, needles: &[&str]) {
        for needle in needles {
            assert!(
                self.stdout.contains(needle),
                "the output does not say {needle:?}:\n{}\n{}",
                self.stdout,
                self.stderr
            );
        }
    }

    /// The summary line, the last of stdout.
    fn summary(&self) -> &str {
        self.stdout.lines().last().unwrap_or_default()
    }
}

#[test]
fn a_gpu_out_of_memory_fails_check() {
    let out = run(check(&["--backend", "wgpu", "--greedy", "4"])
        .env("QWEN35_REQUIRE_GPU", "1")
        .env("QWEN35_GPU_MEMORY_LIMIT", "1000"));
    // Without an adapter the named backend fails for that reason instead.
    let reason = if require_gpu() || !out.stdout.contains("no GPU adapter") {
        "the GPU is out of memory"
    } else {
        "no GPU adapter"
    };
    out.assert_failed(&["wgpu vs cpu (f32)", "FAIL [1]", reason]);
    assert!(
        out.summary().starts_with("FAIL 4 of 8 failed"),
        "{}",
        out.summary()
    );
}

#[test]
fn a_named_backend_without_a_driver_fails_check() {
    let out = run(without_vulkan(&mut check(&[
        "--backend",
        "wgpu",
        "--greedy",
        "4",
    ])));
    out.assert_failed(&[
        "no GPU adapter found",
        "vulkan drivers/libraries could not be loaded",
        "--backend asked for it",
    ]);
    assert!(!out.stdout.contains("SKIP"), "{}", out.stdout);
}

#[test]
fn without_a_driver_the_default_check_skips_the_gpu_and_says_so() {
    let out = run(without_vulkan(&mut check(&["--greedy", "4"])));
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    out.assert_says(&[
        "cpu vs HF (f32)",
        "cpu vs HF (default model)",
        "SKIP [1]",
        "no GPU adapter found",
    ]);
    assert!(
        out.summary()
            .starts_with("PASS 4/4 checked, 8 skipped: wgpu has no device here [1]"),
        "{}",
        out.summary()
    );
    // The reason is a footnote, not a cell of the row.
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("wgpu vs cpu (f32)"));
    assert!(!row.unwrap().contains("adapter"), "{}", out.stdout);
}

#[test]
fn without_a_driver_a_required_gpu_fails_the_default_check() {
    let out = run(without_vulkan(&mut check(&["--greedy", "4"])).env("QWEN35_REQUIRE_GPU", "1"));
    out.assert_failed(&["no GPU adapter found", "QWEN35_REQUIRE_GPU=1 requires it"]);
}

/// One logit of the HF goldens moved by 0.01: every cosine stays ≥ 0.999999 (the fixture's
/// logits have an RMS of ~4), so only the max |Δ| bound can catch it.
#[test]
fn one_wrong_logit_fails_check() {
    let dir = std::env::temp_dir().join(format!("qwen35-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (shape, mut logits) = npy::read_f32(&fixtures().join("tiny-q8_0.logits.npy")).unwrap();
    logits[17 * shape[1] + 5] += 0.01;
    npy::write_f32(&dir.join("planted.npy"), &shape, &logits).unwrap();
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("golden.json")).unwrap())
            .unwrap();
    let mut variant = golden["variants"]["q8_0"].clone();
    variant["gguf"] = fixtures().join("tiny-q8_0.gguf").to_str().unwrap().into();
    variant["logits"] = "planted.npy".into();
    let planted = serde_json::json!({
        "prompt_ids": golden["prompt_ids"],
        "variants": { "q8_0": variant },
    });
    std::fs::write(dir.join("golden.json"), planted.to_string()).unwrap();
    let out = run(check(&[
        "--backend",
        "cpu",
        "--greedy",
        "4",
        "--fixtures",
        dir.to_str().unwrap(),
    ]));
    std::fs::remove_dir_all(&dir).ok();
    out.assert_failed(&["cpu vs HF (q8_0)", "FAIL [1]", "> 1.0e-4"]);
    let row = out.stdout.lines().find(|l| l.starts_with("cpu vs HF"));
    assert!(row.unwrap().contains("34/34"), "{}", out.stdout);
    assert!(!out.stdout.contains("min cosine 0."), "{}", out.stdout);
}

/// One logit of the default model's golden moved by 0.01 (its logits reach |25|, so every cosine
/// stays ≥ 0.999999): the row naming the default model fails on max |Δ|, in a fixtures folder
/// that holds nothing else to check.
#[test]
fn one_wrong_logit_of_the_default_model_fails_check() {
    let dir = std::env::temp_dir().join(format!("qwen35-check-default-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (shape, mut logits) = npy::read_f32(&fixtures().join("default-q8_0.logits.npy")).unwrap();
    logits[40 * shape[1] + 913] += 0.01;
    npy::write_f32(&dir.join("planted.npy"), &shape, &logits).unwrap();
    let mut golden: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("default-model.json")).unwrap(),
    )
    .unwrap();
    let model = fixtures().join(golden["gguf"].as_str().unwrap());
    golden["gguf"] = model.to_str().unwrap().into();
    golden["logits"] = "planted.npy".into();
    std::fs::write(dir.join("default-model.json"), golden.to_string()).unwrap();
    let no_variants = serde_json::json!({ "prompt_ids": [], "variants": {} });
    std::fs::write(dir.join("golden.json"), no_variants.to_string()).unwrap();
    let out = run(check(&[
        "--backend",
        "cpu",
        "--greedy",
        "4",
        "--fixtures",
        dir.to_str().unwrap(),
    ]));
    std::fs::remove_dir_all(&dir).ok();
    out.assert_failed(&["cpu vs HF (default model)", "FAIL [1]", "> 1.0e-4"]);
    let row = out.stdout.lines().find(|l| l.starts_with("cpu vs HF"));
    assert!(row.unwrap().contains("51/51"), "{}", out.stdout);
    assert!(
        out.summary().starts_with("FAIL 1 of 1 failed"),
        "{}",
        out.summary()
    );
}

#[test]
fn a_model_checked_against_nothing_is_an_error() {
    let model = fixtures().join("tiny-q8_0.gguf");
    let out = run(check(&["-m", model.to_str().unwrap(), "--backend", "cpu"]));
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("the CPU is the reference"),
        "{}",
        out.stderr
    );
}

#[test]
fn tokens_come_from_a_file_or_the_flag() {
    let model = fixtures().join("tiny-q8_0.gguf");
    let ids = std::env::temp_dir().join(format!("qwen35-check-ids-{}.txt", std::process::id()));
    std::fs::write(&ids, "1 2 3\n4, 5\n").unwrap();
    for tokens in [ids.to_str().unwrap(), "1,2,3,4,5"] {
        let out = run(check(&[
            "-m",
            model.to_str().unwrap(),
            "--backend",
            "cpu-fast",
            "--greedy",
            "2",
            "--tokens",
            tokens,
        ]));
        assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
        out.assert_says(&["cpu-fast vs cpu", "5/5", "PASS 1/1 checked"]);
    }
    std::fs::remove_file(&ids).ok();
    let out = run(check(&[
        "-m",
        model.to_str().unwrap(),
        "--backend",
        "cpu-fast",
        "--tokens",
        "/nonexistent/ids.txt",
    ]));
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("neither a file nor"), "{}", out.stderr);
}
