//! `--prompt-cache FILE`: a restored state gives bit-identical logits to a cold prefill; `run`
//! restores it and answers as without; a file for another model, or cut short, or altered, is
//! refused with a message by run, chat and serve.

use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind, Engine};
use qwen35::state_file::{load, save, ModelIdentity, StateFileError};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

const PROMPT: &str = "The capital of France is";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qwen35-prompt-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn engine(file: &Arc<GgufFile>) -> Box<dyn Engine> {
    load_engine(Arc::clone(file), BackendKind::Cpu, 1, 64).unwrap()
}

#[test]
fn a_restored_state_gives_bit_identical_logits() {
    let file = Arc::new(GgufFile::open(fixture("tiny-f32.gguf")).unwrap());
    let identity = ModelIdentity::of(&file);
    let tokens: Vec<u32> = vec![345, 20, 87, 101, 99, 346, 12, 300];
    let (prefix, next) = tokens.split_at(tokens.len() - 1);

    let mut cold = engine(&file);
    cold.eval(prefix, false).unwrap();
    let path = scratch("bits.state");
    save(&path, identity, prefix, &cold.snapshot().unwrap()).unwrap();
    let cold_logits = cold.eval(next, false).unwrap();

    let (saved_tokens, snapshot) = load(&path, identity).unwrap();
    assert_eq!(saved_tokens, prefix);
    let mut restored = engine(&file);
    restored.restore(&snapshot).unwrap();
    let restored_logits = restored.eval(next, false).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&restored_logits), bits(&cold_logits));
}

fn cli(args: &[&str], extra: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qwen35"))
        .args(args)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn run(model: &str, cache: &Path) -> Output {
    let model = fixture(model);
    cli(
        &[
            "run",
            "--ctx",
            "64",
            "--threads",
            "1",
            "--temp",
            "0",
            "-n",
            "8",
            "-p",
            PROMPT,
        ],
        &[
            "-m".as_ref(),
            model.as_os_str(),
            "--prompt-cache".as_ref(),
            cache.as_os_str(),
        ],
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn run_restores_the_saved_prompt_and_answers_the_same() {
    let path = scratch("run.state");
    let first = run("tiny-f32.gguf", &path);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let stderr = text(&first.stderr);
    let restored = |stderr: &str| -> (usize, usize) {
        let line = stderr
            .lines()
            .find(|l| l.starts_with("prompt cache: "))
            .unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        (words[2].parse().unwrap(), words[4].parse().unwrap())
    };
    let (cached, total) = restored(&stderr);
    assert_eq!(cached, 0, "{stderr}");
    assert!(path.exists());

    let second = run("tiny-f32.gguf", &path);
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert_eq!(restored(&text(&second.stderr)), (total - 1, total));
    assert_eq!(text(&second.stdout), text(&first.stdout));
}

#[test]
fn files_for_another_model_or_damaged_are_refused() {
    let path = scratch("good.state");
    assert!(run("tiny-f32.gguf", &path).status.success());
    let bytes = std::fs::read(&path).unwrap();
    let file = Arc::new(GgufFile::open(fixture("tiny-f32.gguf")).unwrap());
    let identity = ModelIdentity::of(&file);

    let truncated = scratch("truncated.state");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let corrupted = scratch("corrupted.state");
    let mut flipped = bytes.clone();
    flipped[bytes.len() - 100] ^= 0x40;
    std::fs::write(&corrupted, &flipped).unwrap();
    let foreign = scratch("foreign.state");
    std::fs::write(&foreign, b"GGUF and then something else").unwrap();

    assert!(matches!(
        load(&truncated, identity),
        Err(StateFileError::Truncated { .. })
    ));
    assert!(matches!(
        load(&corrupted, identity),
        Err(StateFileError::Corrupted { .. })
    ));
    assert!(matches!(
        load(&foreign, identity),
        Err(StateFileError::NotAStateFile { .. })
    ));

    let cases = [
        ("tiny-q8_0.gguf", &path, "was saved for another model"),
        ("tiny-f32.gguf", &truncated, "is truncated"),
        ("tiny-f32.gguf", &corrupted, "is corrupted"),
        (
            "tiny-f32.gguf",
            &foreign,
            "is not a qwen35 prompt-cache file",
        ),
    ];
    for (model, file, message) in cases {
        let out = run(model, file);
        let stderr = text(&out.stderr);
        assert!(
            !out.status.success(),
            "{model} {}: {stderr}",
            file.display()
        );
        assert!(stderr.contains(message), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // The file is left as it was: a refused file is not overwritten.
    assert_eq!(std::fs::read(&corrupted).unwrap(), flipped);

    let model = fixture("tiny-q8_0.gguf");
    for command in [&["chat"][..], &["serve", "--port", "0"]] {
        let out = cli(
            &[command, &["--ctx", "64", "--threads", "1"]].concat(),
            &[
                "-m".as_ref(),
                model.as_os_str(),
                "--prompt-cache".as_ref(),
                path.as_os_str(),
            ],
        );
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{command:?}: {stderr}");
        assert!(
            stderr.contains("was saved for another model"),
            "{command:?}: {stderr}"
        );
    }
}
