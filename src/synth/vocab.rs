//! The tokenizer metadata of a synthetic file: copied from another GGUF, or a built-in byte-level
//! vocabulary (256 byte tokens and the ChatML / think tokens, no merges), padded with unused
//! tokens up to the preset's real vocabulary size so tensor shapes match the real model.

use super::preset::ModelShape;
use super::SynthError;
use crate::gguf::{GgufFile, MetaArray, MetaValue};

const TOKENS_KEY: &str = "tokenizer.ggml.tokens";

/// `tokenizer.ggml.token_type` values (llama.cpp `llama_token_type`).
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

/// Added tokens after the 256 byte tokens, in id order.
const SPECIALS: [(&str, i32); 5] = [
    ("<|endoftext|>", CONTROL),
    ("<|im_start|>", CONTROL),
    ("<|im_end|>", CONTROL),
    ("<think>", USER_DEFINED),
    ("</think>", USER_DEFINED),
];
const ENDOFTEXT_ID: u32 = 256;
const IM_END_ID: u32 = 258;

/// ChatML, thinking on in the generation prompt (QWEN35.md §9).
const CHAT_TEMPLATE: &str = "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}";

/// Tokenizer metadata entries and the vocabulary size they define.
pub struct Vocabulary {
    pub entries: Vec<(String, MetaValue)>,
    pub n_tokens: u64,
}

/// Tokens of the built-in vocabulary for `shape`, padding included.
pub fn builtin_size(shape: &ModelShape) -> u64 {
    let own = 256 + SPECIALS.len() as u64;
    shape.vocab_size.map_or(own, |size| size.max(own))
}

/// The built-in vocabulary, padded to [`builtin_size`].
pub fn builtin(shape: &ModelShape) -> Vocabulary {
    let n_tokens = builtin_size(shape);
    let mut tokens: Vec<String> = (0..=255u8).map(byte_token).collect();
    let mut types = vec![NORMAL; tokens.len()];
    for (text, token_type) in SPECIALS {
        tokens.push(text.to_string());
        types.push(token_type);
    }
    for id in tokens.len() as u64..n_tokens {
        tokens.push(format!("<|unused_{id}|>"));
        types.push(UNUSED);
    }
    let entries = vec![
        ("tokenizer.ggml.model".into(), MetaValue::Str("gpt2".into())),
        ("tokenizer.ggml.pre".into(), MetaValue::Str("qwen35".into())),
        (TOKENS_KEY.into(), MetaValue::Array(MetaArray::Str(tokens))),
        (
            "tokenizer.ggml.token_type".into(),
            MetaValue::Array(MetaArray::I32(types)),
        ),
        (
            "tokenizer.ggml.merges".into(),
            MetaValue::Array(MetaArray::Str(Vec::new())),
        ),
        (
            "tokenizer.ggml.bos_token_id".into(),
            MetaValue::U32(ENDOFTEXT_ID),
        ),
        (
            "tokenizer.ggml.eos_token_id".into(),
            MetaValue::U32(IM_END_ID),
        ),
        (
            "tokenizer.ggml.padding_token_id".into(),
            MetaValue::U32(ENDOFTEXT_ID),
        ),
        (
            "tokenizer.ggml.add_bos_token".into(),
            MetaValue::Bool(false),
        ),
        (
            "tokenizer.chat_template".into(),
            MetaValue::Str(CHAT_TEMPLATE.into()),
        ),
    ];
    Vocabulary { entries, n_tokens }
}

/// Every `tokenizer.*` entry of `file` (the `tokenizer.ggml.*` vocabulary and the chat
/// template); the vocabulary size is the length of its token list.
pub fn copied_from(file: &GgufFile) -> Result<Vocabulary, SynthError> {
    let n_tokens = file
        .get_str_array(TOKENS_KEY)
        .map_err(SynthError::VocabSource)?
        .len() as u64;
    let entries = file
        .metadata()
        .filter(|(key, _)| key.starts_with("tokenizer."))
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    Ok(Vocabulary { entries, n_tokens })
}

/// The GPT-2 byte-level alphabet: printable Latin-1 bytes stand for themselves, the others map
/// to U+0100 upwards in byte order.
fn byte_token(byte: u8) -> String {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let c = if printable(byte) {
        char::from(byte)
    } else {
        let rank = (0..byte).filter(|&b| !printable(b)).count() as u32;
        char::from_u32(256 + rank).unwrap_or(char::REPLACEMENT_CHARACTER)
    };
    c.to_string()
}
