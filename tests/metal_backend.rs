//! `--backend metal`. On a Mac with a Metal GPU: the backend against the CPU reference on every
//! fixture, decode (MSL kernels) and prefill (WGSL kernels). Elsewhere: the host code is built
//! (this test links it), and choosing the backend is a typed error naming the adapters found.

mod decode_check;

use std::sync::Arc;

use qwen35::backend::gpu::msl_kernels::MslKernel;
use qwen35::backend::gpu::GpuOptions;
use qwen35::backend::metal::{self, MetalError};
use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind, ModelError};

fn fixture() -> Arc<GgufFile> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny-q4_k.gguf");
    Arc::new(GgufFile::open(path).expect("fixture"))
}

const GREEDY: usize = 32;

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "needs a Metal GPU: run it on a Mac (README, Metal)"
)]
fn metal_matches_cpu_on_every_fixture() {
    for fixture in decode_check::fixtures() {
        let reference = decode_check::reference(&fixture, GREEDY);
        let mut metal = load_engine(fixture.file.clone(), BackendKind::Metal, 1, 256)
            .unwrap_or_else(|e| panic!("the Metal backend on a Mac: {e}"));
        let vocab = metal.config().vocab;
        let what = format!("metal ({})", fixture.variant);
        // One token at a time runs the MSL kernels; the whole prompt at once, the WGSL ones.
        let decoded = decode_check::run(metal.as_mut(), &fixture.prompt, GREEDY, true);
        decode_check::assert_agrees(
            &format!("{what} decode"),
            &decoded,
            &reference,
            vocab,
            0.9999,
        );
        let prefilled = decode_check::run(metal.as_mut(), &fixture.prompt, GREEDY, false);
        decode_check::assert_agrees(
            &format!("{what} prefill"),
            &prefilled,
            &reference,
            vocab,
            0.9999,
        );
    }
}

#[test]
#[cfg_attr(target_os = "macos", ignore = "a Mac has a Metal adapter")]
fn metal_elsewhere_is_a_clear_error() {
    match metal::open(&GpuOptions::default()) {
        Err(MetalError::NoMetalAdapter { found }) => assert!(!found.is_empty()),
        Err(other) => panic!("expected NoMetalAdapter, got {other}"),
        Ok(_) => panic!("a Metal adapter on {}", std::env::consts::OS),
    }
    match load_engine(fixture(), BackendKind::Metal, 1, 64) {
        Err(ModelError::BackendUnavailable { backend, reason }) => {
            assert_eq!(backend, "metal");
            assert!(reason.contains("no Metal adapter"), "{reason}");
        }
        Err(other) => panic!("expected BackendUnavailable, got {other}"),
        Ok(_) => panic!("the Metal backend loaded on {}", std::env::consts::OS),
    }
}

#[test]
fn every_kernel_has_its_source_entry_and_buffers() {
    for kernel in MslKernel::all() {
        let source = kernel.source();
        let entry = format!("kernel void {}(", kernel.entry());
        assert!(source.contains(&entry), "{}: no {entry}", kernel.name());
        // [[buffer(0)]] is the parameters; every buffer the layout declares is used.
        for n in 0..=kernel.buffers().len() {
            assert!(
                source.contains(&format!("[[buffer({n})]]")),
                "{}: no [[buffer({n})]]",
                kernel.name()
            );
        }
        let beyond = format!("[[buffer({})]]", kernel.buffers().len() + 1);
        assert!(
            !source.contains(&beyond),
            "{}: {beyond} beyond the layout",
            kernel.name()
        );
        assert!(kernel.threads_per_threadgroup().is_multiple_of(32));
    }
}
