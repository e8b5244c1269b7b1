//! The bodies of the fuzz targets, shared with `tests/fuzz_regressions.rs` so that every input
//! the fuzzer once crashed on is replayed by `cargo test` through exactly the same code.
//! A panic anywhere here is a bug; the invariants asserted are the ones the APIs document.

use std::sync::Arc;

use qwen35::chat::{split_reasoning, ChatTemplate, Message, RenderOptions, Role};
use qwen35::gguf::GgufFile;
use qwen35::model::{load_engine, BackendKind, Config, ModelError};
use qwen35::tokenizer::Tokenizer;

/// Path of the fixture whose tokenizer the `tokenizer` target uses, from the repository root.
pub const TOKENIZER_FIXTURE: &str = "tests/fixtures/tiny-f32.gguf";

/// A GGUF file from anywhere: parsed, its config read, its tokenizer built and the model loaded
/// on the CPU with an 8-token context (no evaluation: the forward is not under test). Returns
/// the error that stopped it, if any.
pub fn gguf_model(data: &[u8]) -> Result<(), ModelError> {
    let file = GgufFile::from_bytes(data.to_vec())?;
    for info in file.tensors() {
        let bytes = file.tensor_data(info);
        assert_eq!(bytes.len() as u64, info.n_bytes, "tensor {}", info.name);
    }
    let _ = Tokenizer::from_gguf(&file);
    Config::from_gguf(&file)?;
    load_engine(Arc::new(file), BackendKind::Cpu, 1, 8).map(drop)
}

/// Two bytes per id: mostly ids near the vocabulary (in range or just past it), and with the top
/// bit set ids from the far end of u32, so out-of-range ids of every size turn up.
fn ids_of(data: &[u8], vocab_size: usize) -> Vec<u32> {
    data.chunks_exact(2)
        .map(|pair| {
            let raw = u16::from_le_bytes([pair[0], pair[1]]);
            if raw & 0x8000 != 0 {
                u32::MAX - u32::from(raw & 0x7fff)
            } else {
                u32::from(raw) % (vocab_size as u32 + 8)
            }
        })
        .collect()
}

/// `data` as text (lossy UTF-8) encoded with and without special-token parsing, and as ids
/// decoded at once and through the stream decoder.
pub fn tokenizer(tokenizer: &Tokenizer, data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for parse_special in [false, true] {
        let ids = tokenizer
            .encode(&text, parse_special)
            .expect("any text encodes");
        assert!(ids.iter().all(|&id| (id as usize) < tokenizer.vocab_size()));
        // Byte-level BPE loses nothing, and ASCII is unchanged by NFC normalisation.
        if text.is_ascii() {
            assert_eq!(
                tokenizer.decode(&ids),
                text,
                "parse_special={parse_special}"
            );
        }
    }

    let ids = ids_of(data, tokenizer.vocab_size());
    let mut stream = tokenizer.stream_decoder();
    let mut streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
    streamed.push_str(&stream.finish());
    assert_eq!(streamed, tokenizer.decode(&ids));
    for &id in &ids {
        let _ = tokenizer.token_bytes(id);
        let _ = tokenizer.is_eos(id);
    }
}

/// Messages separated by 0xFF (never part of UTF-8): a role byte, then the content.
fn messages_of(data: &[u8]) -> Vec<Message> {
    data.split(|&b| b == 0xFF)
        .filter_map(|chunk| {
            let (&role, content) = chunk.split_first()?;
            let role = match role % 4 {
                0 => Role::System,
                1 => Role::User,
                2 => Role::Assistant,
                _ => Role::Tool,
            };
            Some(Message::new(role, String::from_utf8_lossy(content)))
        })
        .collect()
}

/// Whether `part` lies inside `whole` (split_reasoning hands out sub-slices).
fn is_within(part: &str, whole: &str) -> bool {
    let range = whole.as_bytes().as_ptr_range();
    part.is_empty() || range.contains(&part.as_ptr()) && part.len() <= whole.len()
}

/// A flags byte (bit 0: thinking), then messages as in [`messages_of`]: rendered through the
/// built-in ChatML template with message boundaries, each content split into reasoning and answer.
pub fn chat_template(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let thinking = flags & 1 != 0;
    let messages = messages_of(rest);

    static CHATML: std::sync::OnceLock<ChatTemplate> = std::sync::OnceLock::new();
    let template = CHATML.get_or_init(ChatTemplate::chatml);
    let (prompt, boundaries) = template
        .render_with_boundaries(&messages, &RenderOptions::generation(thinking))
        .expect("ChatML renders any messages");
    let generation_prefix = if thinking {
        "<|im_start|>assistant\n<think>\n"
    } else {
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    };
    assert!(prompt.ends_with(generation_prefix));
    assert!(messages.is_empty() || prompt.starts_with("<|im_start|>"));
    assert_eq!(boundaries.len(), messages.len());
    for end in boundaries {
        assert!(prompt[..end].ends_with("<|im_end|>\n"));
    }

    for message in &messages {
        let (reasoning, answer) = split_reasoning(&message.content);
        assert!(is_within(answer, &message.content));
        assert!(reasoning.is_none_or(|r| is_within(r, &message.content)));
    }
}
