//! A crafted GGUF file must fail to load with an error, never panic, hang or exhaust memory.
#![no_main]

// Each target runs one of the shared bodies.
#[allow(dead_code)]
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = harness::gguf_model(data);
});
