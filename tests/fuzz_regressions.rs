//! Replays every input the fuzz targets (`fuzz/`) once failed on, through the same bodies
//! (`fuzz/harness.rs`): `tests/data/fuzz/<target>/<input>`. A fixed bug that comes back fails here
//! under plain `cargo test`, without the nightly toolchain or cargo-fuzz.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

use qwen35::gguf::GgufFile;
use qwen35::tokenizer::Tokenizer;

/// The crashing inputs recorded for `target`, sorted by name (none while the directory, which
/// git only keeps once it holds a file, is absent).
fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.expect("directory entry").path())
        .collect();
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
