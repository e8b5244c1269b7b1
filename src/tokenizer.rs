//! Byte-level BPE tokenizer of the Qwen3.5 family, built from the GGUF vocabulary (QWEN35.md §9).
//!
//! Encoding: added tokens (token types 3 control / 4 user-defined) are cut out of the text first by
//! exact leftmost-longest match, control ones only when special parsing is asked for. Each remaining
//! fragment goes through the `tokenizers` crate assembled like HF's `Qwen3_5Tokenizer` (NFC, regex
//! split, byte-level alphabet, BPE), which is the reference the tests compare against.
//! Decoding maps token strings back to bytes here, so partial UTF-8 can be held back while streaming.
//! No BOS is ever added.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{PreTokenizedString, PreTokenizer, SplitDelimiterBehavior, TokenizerImpl};

/// GGUF metadata keys the tokenizer is built from.
pub mod keys {
    pub const MODEL: &str = "tokenizer.ggml.model";
    pub const PRE: &str = "tokenizer.ggml.pre";
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    pub const MERGES: &str = "tokenizer.ggml.merges";
    pub const EOS_TOKEN_ID: &str = "tokenizer.ggml.eos_token_id";
}

/// HF's Qwen3.5 split: `\p{M}` joins letters and stays out of punctuation runs; one digit per piece.
const QWEN35_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen2 / Qwen3 split, for older files of the same tokenizer family.
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Token texts that end generation when present (llama.cpp's end-of-generation list for Qwen files).
const END_OF_GENERATION: [&str; 5] = [
    "<|im_end|>",
    "<|endoftext|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
];

/// What an undecodable id stands for in decoded text: U+FFFD, so the gap stays visible.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// `tokenizer.ggml.token_type` values (llama.cpp `llama_token_type`).
mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error("tokenizer model {0:?} is not supported (only \"gpt2\", byte-level BPE)")]
    UnsupportedModel(String),
    #[error("pre-tokenizer {0:?} is not supported (known: \"qwen35\", \"qwen2\")")]
    UnsupportedPre(String),
    #[error("{tokens} tokens but {types} token types")]
    TokenTypeCount { tokens: usize, types: usize },
    #[error("{0} tokens do not fit 32-bit ids")]
    TooManyTokens(usize),
    #[error("token {id} {token:?} has unknown token type {token_type}")]
    UnknownTokenType {
        id: u32,
        token: String,
        token_type: i32,
    },
    #[error("token {id} {token:?} repeats token {first}")]
    DuplicateToken { id: u32, first: u32, token: String },
    #[error("vocabulary has no token for byte {byte:#04x} (expected {expected:?})")]
    MissingByteToken { byte: u8, expected: char },
    #[error("merge {index} {merge:?} is not two space-separated tokens")]
    MalformedMerge { index: usize, merge: String },
    #[error("BPE model rejects the vocabulary/merges: {0}")]
    Bpe(#[source] tokenizers::Error),
    #[error("pre-tokenizer regex for {pre:?}: {source}")]
    Regex {
        pre: String,
        #[source]
        source: tokenizers::Error,
    },
    #[error("eos token id {id} outside the vocabulary of {vocab_size} tokens")]
    EosOutOfRange { id: u32, vocab_size: usize },
    #[error("encoding a {len}-byte text fragment: {source}")]
    Encode {
        len: usize,
        #[source]
        source: tokenizers::Error,
    },
}

/// The tokenizer metadata of a GGUF file, borrowed out of it (see [`Tokenizer::from_metadata`]).
#[derive(Debug, Clone, Copy)]
pub struct VocabMetadata<'a> {
    /// `tokenizer.ggml.model`; must be "gpt2".
    pub model: &'a str,
    /// `tokenizer.ggml.pre`: "qwen35" or "qwen2".
    pub pre: &'a str,
    pub tokens: &'a [String],
    pub token_types: &'a [i32],
    /// "left right" pairs, rank = index.
    pub merges: &'a [String],
    pub eos_token_id: Option<u32>,
}

/// Ids of the tokens the chat layer needs; `None` when the vocabulary lacks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpecialIds {
    pub im_start: Option<u32>,
    pub im_end: Option<u32>,
    pub think: Option<u32>,
    pub think_end: Option<u32>,
}

/// A token matched by exact text before BPE.
#[derive(Debug)]
struct AddedToken {
    text: String,
    id: u32,
    /// Control tokens are only recognised with special parsing on; user-defined ones always.
    control: bool,
}

pub struct Tokenizer {
    /// NFC + regex split + byte-level alphabet + BPE, for text between added tokens.
    bpe: BpePipeline,
    /// Longest first, so the first hit at a position is the leftmost-longest match.
    added: Vec<AddedToken>,
    added_by_text: HashMap<String, u32>,
    /// Bytes of every token, back to back; token `i` is `bytes[offsets[i]..offsets[i + 1]]`.
    bytes: Vec<u8>,
    offsets: Vec<usize>,
    eos: Vec<u32>,
    special: SpecialIds,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("added_tokens", &self.added.len())
            .field("eos", &self.eos)
            .field("special", &self.special)
            .finish()
    }
}

impl Tokenizer {
    /// The tokenizer a GGUF file describes in its `tokenizer.ggml.*` entries.
    pub fn from_gguf(file: &crate::gguf::GgufFile) -> Result<Tokenizer, TokenizerError> {
        let token_types = file.get_i32_array(keys::TOKEN_TYPE)?;
        Self::from_metadata(&VocabMetadata {
            model: file.get_str(keys::MODEL)?,
            pre: file.get_str(keys::PRE)?,
            tokens: file.get_str_array(keys::TOKENS)?,
            token_types: &token_types,
            merges: file.get_str_array(keys::MERGES)?,
            eos_token_id: file.get_u32_opt(keys::EOS_TOKEN_ID)?,
        })
    }

    /// Builds the tokenizer from GGUF tokenizer metadata: checks the model kind, then
    /// [`Tokenizer::from_vocab`], then adds the file's eos token to the end-of-generation set.
    pub fn from_metadata(meta: &VocabMetadata<'_>) -> Result<Tokenizer, TokenizerError> {
        if meta.model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel(meta.model.to_owned()));
        }
        let tokenizer = Self::from_vocab(meta.tokens, meta.token_types, meta.merges, meta.pre)?;
        match meta.eos_token_id {
            Some(id) => tokenizer.with_eos_id(id),
            None => Ok(tokenizer),
        }
    }

    /// Builds a byte-level BPE tokenizer from GGUF-style arrays: token strings in the GPT-2 byte
    /// alphabet, their `token_type`s, and "left right" merges in rank order.
    pub fn from_vocab(
        tokens: &[String],
        token_types: &[i32],
        merges: &[String],
        pre: &str,
    ) -> Result<Tokenizer, TokenizerError> {
        if tokens.len() != token_types.len() {
            return Err(TokenizerError::TokenTypeCount {
                tokens: tokens.len(),
                types: token_types.len(),
            });
        }
        if u32::try_from(tokens.len()).is_err() {
            return Err(TokenizerError::TooManyTokens(tokens.len()));
        }
        let pattern = match pre {
            "qwen35" => QWEN35_PATTERN,
            "qwen2" => QWEN2_PATTERN,
            other => return Err(TokenizerError::UnsupportedPre(other.to_owned())),
        };

        let mut vocab = Vocab::with_capacity(tokens.len());
        let mut added = Vec::new();
        let mut added_by_text = HashMap::new();
        let mut bytes = Vec::with_capacity(tokens.iter().map(String::len).sum());
        let mut offsets = Vec::with_capacity(tokens.len() + 1);
        offsets.push(0);
        let byte_of_char = byte_of_char_table();
        for ((id, token), &token_type) in (0u32..).zip(tokens).zip(token_types) {
            let is_added = match token_type {
                token_type::CONTROL | token_type::USER_DEFINED => true,
                token_type::NORMAL
                | token_type::UNKNOWN
                | token_type::UNUSED
                | token_type::BYTE => false,
                _ => {
                    return Err(TokenizerError::UnknownTokenType {
                        id,
                        token: token.clone(),
                        token_type,
                    })
                }
            };
            let first = if is_added {
                added_by_text.insert(token.clone(), id)
            } else {
                vocab.insert(token.clone(), id)
            };
            if let Some(first) = first {
                return Err(TokenizerError::DuplicateToken {
                    id,
                    first,
                    token: token.clone(),
                });
            }
            if is_added {
                bytes.extend_from_slice(token.as_bytes());
                // An empty text would match everywhere; such a token can only be decoded.
                if !token.is_empty() {
                    added.push(AddedToken {
                        text: token.clone(),
                        id,
                        control: token_type == token_type::CONTROL,
                    });
                }
            } else {
                push_byte_level_bytes(&mut bytes, token, &byte_of_char);
            }
            offsets.push(bytes.len());
        }
        added.sort_by_key(|t| std::cmp::Reverse(t.text.len()));
        check_byte_tokens(&vocab)?;

        let merges = merges
            .iter()
            .enumerate()
            .map(|(index, merge)| match merge.split_once(' ') {
                Some((left, right)) if !left.is_empty() && !right.is_empty() => {
                    Ok((left.to_owned(), right.to_owned()))
                }
                _ => Err(TokenizerError::MalformedMerge {
                    index,
                    merge: merge.clone(),
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = bpe_pipeline(vocab, merges, pre, pattern)?;

        let id_of_text = |text: &str| {
            added_by_text
                .get(text)
                .copied()
                .or_else(|| bpe.token_to_id(text))
        };
        let mut eos: Vec<u32> = END_OF_GENERATION
            .iter()
            .filter_map(|text| id_of_text(text))
            .collect();
        eos.sort_unstable();
        eos.dedup();
        let special = SpecialIds {
            im_start: id_of_text("<|im_start|>"),
            im_end: id_of_text("<|im_end|>"),
            think: id_of_text("<think>"),
            think_end: id_of_text("</think>"),
        };

        Ok(Tokenizer {
            bpe,
            added,
            added_by_text,
            bytes,
            offsets,
            eos,
            special,
        })
    }

    /// Adds `id` (the file's `tokenizer.ggml.eos_token_id`) to the end-of-generation set.
    pub fn with_eos_id(mut self, id: u32) -> Result<Tokenizer, TokenizerError> {
        if id as usize >= self.vocab_size() {
            return Err(TokenizerError::EosOutOfRange {
                id,
                vocab_size: self.vocab_size(),
            });
        }
        if let Err(at) = self.eos.binary_search(&id) {
            self.eos.insert(at, id);
        }
        Ok(self)
    }

    /// Token ids of `text`. With `parse_special`, control-token texts such as `<|im_start|>` become
    /// their tokens; without, they are tokenized as plain text. User-defined tokens (e.g. `<think>`
    /// where the file marks it so) are always recognised. Never adds BOS.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let mut ids = Vec::new();
        // Both stay on character boundaries: token texts are whole UTF-8.
        let mut plain_start = 0;
        for (at, _) in text.char_indices() {
            if at < plain_start {
                continue;
            }
            if let Some(token) = self.added_token_at(text, at, parse_special) {
                self.encode_plain(&text[plain_start..at], &mut ids)?;
                ids.push(token.id);
                plain_start = at + token.text.len();
            }
        }
        self.encode_plain(&text[plain_start..], &mut ids)?;
        Ok(ids)
    }

    /// The longest eligible added token starting at byte `at` of `text`.
    fn added_token_at(&self, text: &str, at: usize, parse_special: bool) -> Option<&AddedToken> {
        let rest = text.as_bytes().get(at..)?;
        self.added
            .iter()
            .find(|t| (parse_special || !t.control) && rest.starts_with(t.text.as_bytes()))
    }

    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>) -> Result<(), TokenizerError> {
        if text.is_empty() {
            return Ok(());
        }
        let encoding =
            self.bpe
                .encode_fast(text, false)
                .map_err(|source| TokenizerError::Encode {
                    len: text.len(),
                    source,
                })?;
        ids.extend_from_slice(encoding.get_ids());
        Ok(())
    }

    /// Text of `ids`, including special tokens' text. Invalid UTF-8 (only possible for sequences
    /// the model would not produce, or cut mid-character) becomes U+FFFD; unknown ids too.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.piece(id).unwrap_or(REPLACEMENT));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The raw bytes token `id` stands for (a fragment of UTF-8 for many BPE tokens).
    pub fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        self.piece(id).map(<[u8]>::to_vec)
    }

    fn piece(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        let start = *self.offsets.get(i)?;
        let end = *self.offsets.get(i + 1)?;
        self.bytes.get(start..end)
    }

    /// Id of a vocabulary entry, spelled as in the GGUF (byte-level alphabet for BPE tokens,
    /// e.g. "Ġthe"; plain text for added tokens, e.g. "<|im_end|>").
    pub fn id_of(&self, token: &str) -> Option<u32> {
        self.added_by_text
            .get(token)
            .copied()
            .or_else(|| self.bpe.token_to_id(token))
    }

    pub fn vocab_size(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Tokens that end generation, ascending: those of [`END_OF_GENERATION`] present in the
    /// vocabulary plus the file's eos token.
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    pub fn special_ids(&self) -> &SpecialIds {
        &self.special
    }

    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }
}

/// Turns generated ids into text as they come, holding back a UTF-8 sequence split across tokens
/// until it is complete. The concatenated output equals [`Tokenizer::decode`] of all ids.
#[derive(Debug)]
pub struct StreamDecoder<'t> {
    tokenizer: &'t Tokenizer,
    pending: Vec<u8>,
}

impl<'t> StreamDecoder<'t> {
    pub fn new(tokenizer: &'t Tokenizer) -> Self {
        StreamDecoder {
            tokenizer,
            pending: Vec::new(),
        }
    }

    /// The text that became complete with token `id` (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        self.pending
            .extend_from_slice(self.tokenizer.piece(id).unwrap_or(REPLACEMENT));
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    text.push_str(&String::from_utf8_lossy(valid));
                    match error.error_len() {
                        // Same replacement unit as `from_utf8_lossy`, so streaming equals decode.
                        Some(bad) => {
                            text.push('\u{FFFD}');
                            rest = after.get(bad..).unwrap_or_default();
                        }
                        // Incomplete sequence at the end: wait for the next token.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        self.pending.drain(..self.pending.len() - keep);
        text
    }

    /// Whatever is still held back, lossily (an unfinished sequence becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// The `tokenizers` pipeline of HF's Qwen3.5 tokenizer.json, minus added tokens (handled above).
type BpePipeline =
    TokenizerImpl<BPE, NFC, SharedPreTokenizer, PostProcessorWrapper, DecoderWrapper>;

/// The regex split and byte-level step, compiled once per pattern and shared by every tokenizer
/// built with it: compiling the split's regex (it has a look-ahead) costs more than the rest of
/// building a tokenizer, and `Split`'s `Clone` compiles it again.
#[derive(Clone)]
struct SharedPreTokenizer(Arc<Sequence>);

impl PreTokenizer for SharedPreTokenizer {
    fn pre_tokenize(&self, pretokenized: &mut PreTokenizedString) -> tokenizers::Result<()> {
        self.0.pre_tokenize(pretokenized)
    }
}

fn shared_pre_tokenizer(
    pre: &str,
    pattern: &'static str,
) -> Result<SharedPreTokenizer, TokenizerError> {
    static COMPILED: Mutex<Vec<(&str, Arc<Sequence>)>> = Mutex::new(Vec::new());
    // A poisoned lock holds a complete list: entries are pushed whole.
    let mut compiled = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, sequence)) = compiled.iter().find(|(p, _)| *p == pattern) {
        return Ok(SharedPreTokenizer(Arc::clone(sequence)));
    }
    let split = Split::new(
        SplitPattern::Regex(pattern.to_owned()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|source| TokenizerError::Regex {
        pre: pre.to_owned(),
        source,
    })?;
    let byte_level = ByteLevel::new(false, false, false);
    let sequence = Arc::new(Sequence::new(vec![split.into(), byte_level.into()]));
    compiled.push((pattern, Arc::clone(&sequence)));
    Ok(SharedPreTokenizer(sequence))
}

fn bpe_pipeline(
    vocab: Vocab,
    merges: Vec<(String, String)>,
    pre: &str,
    pattern: &'static str,
) -> Result<BpePipeline, TokenizerError> {
    let model = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(TokenizerError::Bpe)?;
    let mut tokenizer = TokenizerImpl::new(model);
    tokenizer
        .with_normalizer(Some(NFC))
        .map_err(TokenizerError::Bpe)?;
    tokenizer.with_pre_tokenizer(Some(shared_pre_tokenizer(pre, pattern)?));
    Ok(tokenizer)
}

/// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other bytes are
/// shifted to U+0100.. in byte order. Returns byte → char.
fn byte_alphabet() -> [char; 256] {
    let stands_for_itself = |b: u8| matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = ['\0'; 256];
    let mut shifted = 0u32;
    for (b, slot) in (0u8..=255).zip(table.iter_mut()) {
        *slot = if stands_for_itself(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(0xFF + shifted).unwrap_or('\0')
        };
    }
    table
}

/// char → byte for the GPT-2 alphabet, indexed by code point (the alphabet ends below U+0144).
fn byte_of_char_table() -> Vec<Option<u8>> {
    let alphabet = byte_alphabet();
    let mut table = vec![None; 0x144];
    for (b, c) in (0u8..=255).zip(alphabet) {
        if let Some(slot) = table.get_mut(c as usize) {
            *slot = Some(b);
        }
    }
    table
}

/// Appends the bytes a byte-level token string stands for. A character outside the alphabet
/// (not produced by the GGUF converter) is kept as its own UTF-8.
fn push_byte_level_bytes(out: &mut Vec<u8>, token: &str, byte_of_char: &[Option<u8>]) {
    for c in token.chars() {
        match byte_of_char.get(c as usize).copied().flatten() {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
}

/// Every byte needs a token, or BPE would silently drop text it cannot spell.
fn check_byte_tokens(vocab: &Vocab) -> Result<(), TokenizerError> {
    for (byte, expected) in (0u8..=255).zip(byte_alphabet()) {
        if !vocab.contains_key(expected.encode_utf8(&mut [0; 4]) as &str) {
            return Err(TokenizerError::MissingByteToken { byte, expected });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy vocabulary: the 256 byte tokens, "he", "ll", "hell", "hello", and added tokens.
    fn toy() -> Tokenizer {
        let alphabet = byte_alphabet();
        let mut tokens: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
        let mut types = vec![token_type::NORMAL; 256];
        for (text, ty) in [
            ("he", token_type::NORMAL),
            ("ll", token_type::NORMAL),
            ("hell", token_type::NORMAL),
            ("hello", token_type::NORMAL),
            ("<|im_start|>", token_type::CONTROL),
            ("<|im_end|>", token_type::CONTROL),
            ("<think>", token_type::USER_DEFINED),
            ("</think>", token_type::USER_DEFINED),
            ("<|im_end|>x", token_type::CONTROL),
            ("[PAD1]", token_type::UNUSED),
        ] {
            tokens.push(text.to_owned());
            types.push(ty);
        }
        let merges = ["h e", "l l", "he ll", "hell o"].map(String::from);
        Tokenizer::from_vocab(&tokens, &types, &merges, "qwen35").unwrap()
    }

    #[test]
    fn byte_alphabet_is_a_bijection_onto_printable_chars() {
        let alphabet = byte_alphabet();
        let mut seen: Vec<char> = alphabet.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(alphabet[b' ' as usize], 'Ġ');
        assert_eq!(alphabet[b'\n' as usize], 'Ċ');
        assert_eq!(alphabet[b'A' as usize], 'A');
        assert!(alphabet
            .iter()
            .all(|c| !c.is_whitespace() && !c.is_control()));
    }

    #[test]
    fn bpe_merges_by_rank_and_added_tokens_split_first() {
        let tok = toy();
        let hello = tok.id_of("hello").unwrap();
        let im_start = tok.id_of("<|im_start|>").unwrap();
        let think = tok.id_of("<think>").unwrap();
        assert_eq!(tok.encode("hello", true).unwrap(), vec![hello]);
        assert_eq!(
            tok.encode("<|im_start|>hello<think>", true).unwrap(),
            vec![im_start, hello, think]
        );
        // Control tokens are text without special parsing; user-defined ones stay tokens.
        let plain = tok.encode("<|im_start|>hello<think>", false).unwrap();
        assert!(!plain.contains(&im_start));
        assert_eq!(plain.last(), Some(&think));
        assert_eq!(tok.decode(&plain), "<|im_start|>hello<think>");
    }

    #[test]
    fn longest_added_token_wins() {
        let tok = toy();
        let long = tok.id_of("<|im_end|>x").unwrap();
        assert_eq!(tok.encode("<|im_end|>x", true).unwrap(), vec![long]);
    }

    #[test]
    fn eos_and_special_ids_come_from_token_texts() {
        let tok = toy();
        let im_end = tok.id_of("<|im_end|>").unwrap();
        assert_eq!(tok.eos_ids(), &[im_end]);
        let hello = tok.id_of("hello").unwrap();
        let tok = tok.with_eos_id(hello).unwrap();
        assert!(tok.is_eos(hello) && tok.is_eos(im_end));
        assert_eq!(tok.special_ids().think, tok.id_of("<think>"));
        assert_eq!(tok.special_ids().im_start, tok.id_of("<|im_start|>"));
        let size = tok.vocab_size() as u32;
        assert!(matches!(
            tok.with_eos_id(size),
            Err(TokenizerError::EosOutOfRange { .. })
        ));
    }

    #[test]
    fn stream_decoder_holds_back_split_characters() {
        let tok = toy();
        // "é" is two bytes: two byte tokens; "😀" four.
        let ids = tok.encode("aé😀b", false).unwrap();
        let byte_ids: Vec<u32> = "aé😀b"
            .bytes()
            .map(|b| tok.id_of(&byte_alphabet()[b as usize].to_string()).unwrap())
            .collect();
        assert_eq!(ids, byte_ids);
        let mut stream = tok.stream_decoder();
        let pieces: Vec<String> = ids.iter().map(|&id| stream.push(id)).collect();
        assert_eq!(pieces, ["a", "", "é", "", "", "", "😀", "b"]);
        assert_eq!(stream.finish(), "");
    }

    #[test]
    fn stream_decoder_replaces_like_decode() {
        let tok = toy();
        let byte = |b: u8| tok.id_of(&byte_alphabet()[b as usize].to_string()).unwrap();
        // A truncated 4-byte sequence, then ASCII, then an unfinished one at the end.
        let ids = [byte(0xF0), byte(0x9F), byte(b'a'), byte(0xE4), byte(0xBD)];
        let mut stream = tok.stream_decoder();
        let mut text: String = ids.iter().map(|&id| stream.push(id)).collect();
        text.push_str(&stream.finish());
        assert_eq!(text, tok.decode(&ids));
        assert_eq!(text, "\u{FFFD}a\u{FFFD}");
    }

    #[test]
    fn unknown_ids_decode_visibly() {
        let tok = toy();
        assert_eq!(tok.token_bytes(u32::MAX), None);
        assert_eq!(tok.decode(&[u32::MAX]), "\u{FFFD}");
    }

    #[test]
    fn malformed_inputs_are_errors() {
        let alphabet = byte_alphabet();
        let tokens: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
        let types = vec![token_type::NORMAL; 256];
        let err = |tokens: &[String], types: &[i32], merges: &[String], pre: &str| {
            Tokenizer::from_vocab(tokens, types, merges, pre).unwrap_err()
        };
        assert!(matches!(
            err(&tokens, &types, &[], "llama3"),
            TokenizerError::UnsupportedPre(_)
        ));
        assert!(matches!(
            err(&tokens, &types[1..], &[], "qwen35"),
            TokenizerError::TokenTypeCount { .. }
        ));
        assert!(matches!(
            err(&tokens[1..], &types[1..], &[], "qwen35"),
            TokenizerError::MissingByteToken { byte: 0, .. }
        ));
        assert!(matches!(
            err(&tokens, &types, &["ab".to_owned()], "qwen35"),
            TokenizerError::MalformedMerge { index: 0, .. }
        ));
        assert!(matches!(
            err(&tokens, &types, &["a zz".to_owned()], "qwen35"),
            TokenizerError::Bpe(_)
        ));
        let mut bad_types = types.clone();
        bad_types[7] = 9;
        assert!(matches!(
            err(&tokens, &bad_types, &[], "qwen35"),
            TokenizerError::UnknownTokenType { id: 7, .. }
        ));
        let mut doubled = tokens.clone();
        doubled.push("a".to_owned());
        let mut doubled_types = types.clone();
        doubled_types.push(token_type::NORMAL);
        assert!(matches!(
            err(&doubled, &doubled_types, &[], "qwen35"),
            TokenizerError::DuplicateToken { id: 256, .. }
        ));
        let meta = VocabMetadata {
            model: "llama",
            pre: "qwen35",
            tokens: &tokens,
            token_types: &types,
            merges: &[],
            eos_token_id: None,
        };
        assert!(matches!(
            Tokenizer::from_metadata(&meta),
            Err(TokenizerError::UnsupportedModel(_))
        ));
    }
}
