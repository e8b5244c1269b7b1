//! ChatML rendering and reasoning splitting over arbitrary roles and contents.
#![no_main]

// Each target runs one of the shared bodies.
#[allow(dead_code)]
#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::chat_template(data);
});
