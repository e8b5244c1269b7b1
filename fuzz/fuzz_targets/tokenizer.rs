//! The fixture's tokenizer over arbitrary text and arbitrary (often out-of-range) id sequences.
#![no_main]

// Each target runs one of the shared bodies.
#[allow(dead_code)]
#[path = "../harness.rs"]
mod harness;

use std::sync::OnceLock;

use qwen35::gguf::GgufFile;
use qwen35::tokenizer::Tokenizer;

fn fixture_tokenizer() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let path = format!(
            "{}/../{}",
            env!("CARGO_MANIFEST_DIR"),
            harness::TOKENIZER_FIXTURE
        );
        let file = GgufFile::open(path).expect("fixture opens");
        Tokenizer::from_gguf(&file).expect("fixture has a tokenizer")
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::tokenizer(fixture_tokenizer(), data);
});
