//! `cargo bench --bench forward_token`: one decode token of the tiny preset on the CPU, from
//! the same 8-token state each time.

mod common;

use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind};
use qwen35::synth::{write_synthetic, Preset, Quant, SynthOptions};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path =
        std::env::temp_dir().join(format!("qwen35-bench-forward-{}.gguf", std::process::id()));
    let opts = SynthOptions {
        preset: Preset::Tiny,
        quant: Quant::Q4KM,
        seed: 0,
        vocab_from: None,
    };
    write_synthetic(&opts, &path, |_, _| {})?;
    let file = GgufFile::open(&path);
    // The mapping stays valid after the file is unlinked (Unix); elsewhere removal may fail.
    let _ = std::fs::remove_file(&path);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut engine = load_engine(Arc::new(file?), BackendKind::Cpu, threads, 64)?;
    engine.eval(&[1, 2, 3, 4, 5, 6, 7, 8], false)?;
    let state = engine.snapshot()?;
    // Once outside the loop, so a failure is reported rather than timed.
    engine.restore(&state)?;
    engine.eval(&[9], false)?;
    common::time("forward 1 token, tiny q4_k_m", None, || {
        // Restoring copies the tiny state back: small next to the token.
        engine
            .restore(&state)
            .and_then(|()| engine.eval(&[9], false))
    });
    Ok(())
}
