//! A state saved on one backend restores on another: a CPU-saved state (through a
//! `--prompt-cache` file) continues on wgpu (lavapipe in CI) with the greedy tokens the CPU
//! continues with, and a wgpu-saved state on the CPU likewise; `run --prefill-backend wgpu
//! --backend cpu` answers as `run --backend cpu`. Skipped without a wgpu adapter unless
//! QWEN35_REQUIRE_GPU=1.

use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind, Engine, ModelError};
use qwen35::sample::argmax;
use qwen35::state_file::{load, save, ModelIdentity};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

const GREEDY: usize = 16;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-f32.gguf")
}

fn engine(file: &Arc<GgufFile>, kind: BackendKind) -> Option<Box<dyn Engine>> {
    match load_engine(Arc::clone(file), kind, 1, 128) {
        Ok(engine) => Some(engine),
        Err(ModelError::BackendUnavailable { reason, .. })
            if std::env::var("QWEN35_REQUIRE_GPU").as_deref() != Ok("1") =>
        {
            eprintln!("NOTICE: skipping the {kind} half: {reason}");
            None
        }
        Err(e) => panic!("{kind}: {e}"),
    }
}

/// Greedy tokens from `logits` on, each fed back.
fn greedy(engine: &mut dyn Engine, mut logits: Vec<f32>) -> Vec<u32> {
    let mut tokens = Vec::new();
    for _ in 0..GREEDY {
        let next = argmax(&logits);
        tokens.push(next);
        logits = engine.eval(&[next], false).unwrap();
    }
    tokens
}

#[test]
fn a_state_saved_on_one_backend_continues_on_the_other() {
    let file = Arc::new(GgufFile::open(fixture()).unwrap());
    let identity = ModelIdentity::of(&file);
    let prompt: Vec<u32> = vec![345, 20, 87, 101, 99, 346, 12, 300, 7, 41];
    let (prefix, last) = prompt.split_at(prompt.len() - 1);
    let dir = std::env::temp_dir().join(format!("qwen35-cross-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in [
        (BackendKind::Cpu, BackendKind::Wgpu),
        (BackendKind::Wgpu, BackendKind::Cpu),
    ] {
        let (Some(mut saver), Some(mut restorer)) = (engine(&file, from), engine(&file, to)) else {
            return;
        };
        saver.eval(prefix, false).unwrap();
        let path = dir.join(format!("{from}.state"));
        save(&path, identity, prefix, &saver.snapshot().unwrap()).unwrap();
        let (_, snapshot) = load(&path, identity).unwrap();
        restorer.restore(&snapshot).unwrap();
        assert_eq!(restorer.position(), prefix.len());

        let logits = saver.eval(last, false).unwrap();
        let expected = greedy(saver.as_mut(), logits);
        let logits = restorer.eval(last, false).unwrap();
        let got = greedy(restorer.as_mut(), logits);
        assert_eq!(got, expected, "saved on {from}, restored on {to}");
    }
}

/// A restored state is uploaded when `restore` returns: its writes are not left queued for the
/// next step's submit, where `bench --depth` would time them as decode.
#[test]
fn a_restored_state_is_uploaded_before_restore_returns() {
    let file = Arc::new(GgufFile::open(fixture()).unwrap());
    let Some(mut engine) = engine(&file, BackendKind::Wgpu) else {
        return;
    };
    engine.eval(&[345, 20, 87, 101], false).unwrap();
    let snapshot = engine.snapshot().unwrap();
    engine.reset();
    engine.take_stats();
    engine.restore(&snapshot).unwrap();
    let submits = engine.take_stats().submits;
    assert!(submits > 0, "restore left its uploads for a later submit");
}

#[test]
fn run_prefills_on_wgpu_and_decodes_on_the_cpu() {
    let file = Arc::new(GgufFile::open(fixture()).unwrap());
    if engine(&file, BackendKind::Wgpu).is_none() {
        return;
    }
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_qwen35"))
            .arg("run")
            .arg("-m")
            .arg(fixture())
            .args(["--ctx", "128", "--threads", "1", "--temp", "0", "-n", "16"])
            .args(["-p", "The capital of France is"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let split = run(&["--prefill-backend", "wgpu", "--backend", "cpu"]);
    assert_eq!(split, run(&["--backend", "cpu"]));
    assert!(!split.trim().is_empty());
}
