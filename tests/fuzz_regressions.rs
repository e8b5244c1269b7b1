//! Replays the fuzz targets' regression corpus (`tests/data/fuzz/<target>/<input>`) through the
//! same bodies as the fuzz targets (`fuzz/harness.rs`), under plain `cargo test`, without the
//! nightly toolchain or cargo-fuzz. No campaign has found a crash yet, so the corpus holds
//! hand-minimized hostile inputs (scripts/make_fuzz_regressions.py); a crashing input found later
//! is added there once fixed.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

use qwen35::gguf::GgufFile;
use qwen35::tokenizer::Tokenizer;

/// The inputs recorded for `target`, sorted by name. A missing or empty directory fails: the
/// tests below would otherwise pass by looping over nothing.
fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; the regression corpus (scripts/make_fuzz_regressions.py) is missing",
            dir.display()
        )
    });
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    assert!(
        !paths.is_empty(),
        "{}: the regression corpus is empty",
        dir.display()
    );
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, data)
        })
        .collect()
}

/// The gguf_model seeds that are whole models must load, or the fuzzer never gets past the
/// config checks to the weight loading it is meant to hammer.
#[test]
fn micro_model_seeds_load() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/gguf_model");
    for name in ["micro-f32.gguf", "micro-q8_0.gguf"] {
        let data = std::fs::read(seeds.join(name)).expect("seed exists");
        harness::gguf_model(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn chat_template_inputs() {
    for (path, data) in inputs("chat_template") {
        println!("{}", path.display());
        harness::chat_template(&data);
    }
}

#[test]
fn tokenizer_inputs() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join(harness::TOKENIZER_FIXTURE);
    let file = GgufFile::open(fixture).expect("fixture opens");
    let tokenizer = Tokenizer::from_gguf(&file).expect("fixture has a tokenizer");
    for (path, data) in inputs("tokenizer") {
        println!("{}", path.display());
        harness::tokenizer(&tokenizer, &data);
    }
}

/// Each recorded file is malformed: it must be turned down with an error.
#[test]
fn gguf_model_inputs_fail_with_an_error() {
    for (path, data) in inputs("gguf_model") {
        match harness::gguf_model(&data) {
            Err(e) => println!("{}: {e}", path.display()),
            Ok(()) => panic!("{} loaded", path.display()),
        }
    }
}
