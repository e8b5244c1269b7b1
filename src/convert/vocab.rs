//! tokenizer.json + tokenizer_config.json (+ config.json's special ids) → the `tokenizer.*`
//! metadata llama.cpp's converter writes for a Qwen3.5 byte-level BPE vocabulary: tokens, token
//! types, merges, special token ids, add-token flags and the chat template, in its order.

use super::config::{read_json, TextConfig};
use super::ConvertError;
use crate::gguf::{MetaArray, MetaValue};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// GGUF `tokenizer.ggml.token_type` values.
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

/// Special-token roles in the converter's order, with their GGUF keys.
const SPECIAL_ROLES: [(&str, Option<&str>); 7] = [
    ("bos", Some("tokenizer.ggml.bos_token_id")),
    ("eos", Some("tokenizer.ggml.eos_token_id")),
    ("unk", Some("tokenizer.ggml.unknown_token_id")),
    ("sep", Some("tokenizer.ggml.seperator_token_id")),
    ("pad", Some("tokenizer.ggml.padding_token_id")),
    // llama.cpp has no GGUF key for a CLS id and skips it.
    ("cls", None),
    ("mask", Some("tokenizer.ggml.mask_token_id")),
];

struct AddedToken {
    id: u64,
    content: String,
    special: bool,
}

/// The `tokenizer.*` entries for a vocabulary of `config.n_vocab` rows.
pub fn tokenizer_metadata(
    dir: &Path,
    config: &TextConfig,
) -> Result<Vec<(String, MetaValue)>, ConvertError> {
    let tokenizer_path = dir.join("tokenizer.json");
    let tokenizer = read_json(&tokenizer_path)?;
    let bad = |problem: String| ConvertError::BadJson {
        path: tokenizer_path.clone(),
        problem,
    };
    let model = tokenizer
        .get("model")
        .ok_or_else(|| bad("no \"model\"".into()))?;
    if model.get("type").and_then(Value::as_str) != Some("BPE") {
        return Err(bad(format!(
            "the tokenizer model is {}, not BPE",
            model.get("type").unwrap_or(&Value::Null)
        )));
    }
    let vocab = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("no \"model.vocab\" object".into()))?;
    let added = added_tokens(&tokenizer).map_err(bad)?;

    let mut by_id: HashMap<u64, &str> = HashMap::new();
    for (token, id) in vocab {
        let id = id
            .as_u64()
            .ok_or_else(|| bad(format!("the id of {token:?} is {id}")))?;
        by_id.insert(id, token);
    }
    let added_by_id: HashMap<u64, &AddedToken> = added.iter().map(|t| (t.id, t)).collect();
    for token in &added {
        by_id.insert(token.id, &token.content);
    }
    if let Some(&max_id) = by_id.keys().max() {
        if max_id as usize >= config.n_vocab {
            return Err(bad(format!(
                "token id {max_id} is past the model's vocab_size {} ({})",
                config.n_vocab,
                config.path.display()
            )));
        }
    }
    let mut tokens = Vec::with_capacity(config.n_vocab);
    let mut types = Vec::with_capacity(config.n_vocab);
    for id in 0..config.n_vocab as u64 {
        match (by_id.get(&id), added_by_id.get(&id)) {
            (None, _) => {
                tokens.push(format!("[PAD{id}]"));
                types.push(UNUSED);
            }
            (Some(_), Some(token)) if token.special || looks_special(&token.content) => {
                tokens.push(token.content.clone());
                types.push(CONTROL);
            }
            (Some(_), Some(token)) => {
                tokens.push(token.content.replace('\u{2581}', " "));
                types.push(USER_DEFINED);
            }
            (Some(token), None) => {
                tokens.push(token.to_string());
                types.push(NORMAL);
            }
        }
    }

    let mut out = vec![
        (
            "tokenizer.ggml.model".to_string(),
            MetaValue::Str("gpt2".into()),
        ),
        (
            "tokenizer.ggml.pre".to_string(),
            MetaValue::Str(pre_tokenizer(&tokenizer).map_err(bad)?.into()),
        ),
        (
            "tokenizer.ggml.tokens".to_string(),
            MetaValue::Array(MetaArray::Str(tokens)),
        ),
        (
            "tokenizer.ggml.token_type".to_string(),
            MetaValue::Array(MetaArray::I32(types)),
        ),
    ];
    let merges = merges(model).map_err(bad)?;
    if !merges.is_empty() {
        out.push((
            "tokenizer.ggml.merges".into(),
            MetaValue::Array(MetaArray::Str(merges)),
        ));
    }
    out.extend(special_tokens(dir, &tokenizer, &added, config)?);
    Ok(out)
}

fn added_tokens(tokenizer: &Value) -> Result<Vec<AddedToken>, String> {
    let Some(list) = tokenizer.get("added_tokens") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or("\"added_tokens\" is not a list".to_string())?;
    list.iter()
        .map(|entry| {
            let id = entry.get("id").and_then(Value::as_u64);
            let content = entry.get("content").and_then(Value::as_str);
            match (id, content) {
                (Some(id), Some(content)) => Ok(AddedToken {
                    id,
                    content: content.to_string(),
                    special: entry
                        .get("special")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                }),
                _ => Err(format!("added token {entry} has no id or content")),
            }
        })
        .collect()
}

/// Added tokens that are not marked special but look like control tokens.
fn looks_special(token: &str) -> bool {
    matches!(token, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (token.starts_with("<|") && token.ends_with("|>"))
        || (token.starts_with("<\u{ff5c}") && token.ends_with("\u{ff5c}>"))
        || (token.starts_with("<unused") && token.ends_with('>'))
}

/// The Qwen3.5 pre-tokenizer split, in HF's spelling; llama.cpp names it `qwen35`.
const QWEN35_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// llama.cpp recognises a pre-tokenizer by hashing how it splits a test text; for Qwen3.5 it
/// answers `qwen35`. Here the tokenizer.json's split regex is compared with Qwen3.5's instead.
fn pre_tokenizer(tokenizer: &Value) -> Result<&'static str, String> {
    let mut found = Vec::new();
    collect_split_patterns(tokenizer.get("pre_tokenizer"), &mut found);
    if found.iter().any(|p| p == QWEN35_SPLIT) {
        Ok("qwen35")
    } else {
        Err(format!(
            "the pre-tokenizer is not Qwen3.5's (split patterns found: {found:?}); only the qwen35 pre-tokenizer is supported"
        ))
    }
}

fn collect_split_patterns(node: Option<&Value>, out: &mut Vec<String>) {
    let Some(node) = node else { return };
    if node.get("type").and_then(Value::as_str) == Some("Split") {
        if let Some(regex) = node
            .get("pattern")
            .and_then(|p| p.get("Regex"))
            .and_then(Value::as_str)
        {
            out.push(regex.to_string());
        }
    }
    if let Some(children) = node.get("pretokenizers").and_then(Value::as_array) {
        for child in children {
            collect_split_patterns(Some(child), out);
        }
    }
}

/// Merges as "left right" strings; pairs whose parts contain spaces get them as U+0120.
fn merges(model: &Value) -> Result<Vec<String>, String> {
    let Some(list) = model.get("merges").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|merge| match merge {
            Value::String(s) => Ok(s.clone()),
            Value::Array(pair) if pair.len() == 2 => {
                let part = |v: &Value| {
                    v.as_str()
                        .map(|s| s.replace(' ', "\u{0120}"))
                        .ok_or_else(|| format!("merge {merge} is not a pair of strings"))
                };
                Ok(format!("{} {}", part(&pair[0])?, part(&pair[1])?))
            }
            other => Err(format!("unknown merge format {other}")),
        })
        .collect()
}

/// Special ids (tokenizer_config.json's tokens, then config.json's ids), add-token flags and the
/// chat template, in the order gguf-py's SpecialVocab writes them.
fn special_tokens(
    dir: &Path,
    tokenizer: &Value,
    added: &[AddedToken],
    config: &TextConfig,
) -> Result<Vec<(String, MetaValue)>, ConvertError> {
    let config_path = dir.join("tokenizer_config.json");
    let tokenizer_config: Map<String, Value> = if config_path.is_file() {
        match read_json(&config_path)? {
            Value::Object(map) => map,
            _ => {
                return Err(ConvertError::BadJson {
                    path: config_path,
                    problem: "not a JSON object".into(),
                })
            }
        }
    } else {
        Map::new()
    };
    let mut ids: Vec<(&str, u64)> = Vec::new();
    let mut add_flags: Vec<(&str, bool)> = Vec::new();
    let set_flag = |flags: &mut Vec<(&'static str, bool)>, role: &'static str, value: bool| {
        if !flags.iter().any(|(r, _)| *r == role) {
            flags.push((role, value));
        }
    };
    if let Some(post) = tokenizer.get("post_processor").filter(|p| !p.is_null()) {
        let processors = match post.get("processors").and_then(Value::as_array) {
            Some(list) => list.clone(),
            None => vec![post.clone()],
        };
        for processor in processors {
            match processor.get("type").and_then(Value::as_str) {
                Some("ByteLevel") => {
                    set_flag(&mut add_flags, "bos", false);
                    set_flag(&mut add_flags, "eos", false);
                }
                other => {
                    return Err(ConvertError::BadJson {
                        path: dir.join("tokenizer.json"),
                        problem: format!(
                            "post-processor {other:?} is not supported (Qwen3.5 tokenizers use ByteLevel or none)"
                        ),
                    })
                }
            }
        }
    }
    if !tokenizer_config.is_empty() {
        for (role, _) in SPECIAL_ROLES {
            if let Some(Value::Bool(flag)) = tokenizer_config.get(&format!("add_{role}_token")) {
                set_flag(&mut add_flags, role, *flag);
            }
            let content = match tokenizer_config.get(&format!("{role}_token")) {
                Some(Value::String(s)) => s.as_str(),
                Some(Value::Object(entry)) => match entry.get("content") {
                    Some(Value::String(s)) => s.as_str(),
                    _ => continue,
                },
                _ => continue,
            };
            if let Some(token) = added.iter().find(|t| t.content == content) {
                if !ids.iter().any(|(r, _)| *r == role) {
                    ids.push((role, token.id));
                }
            }
        }
    }
    for (role, _) in SPECIAL_ROLES {
        let key = format!("{role}_token_id");
        let id = config.get(&key).and_then(Value::as_u64);
        if let Some(id) = id {
            if !ids.iter().any(|(r, _)| *r == role) {
                ids.push((role, id));
            }
        }
    }

    let mut out = Vec::new();
    for (role, id) in ids {
        let key = SPECIAL_ROLES
            .iter()
            .find(|(r, _)| *r == role)
            .and_then(|(_, k)| *k);
        if let Some(key) = key {
            out.push((key.to_string(), MetaValue::U32(id as u32)));
        }
    }
    for (role, flag) in add_flags {
        if matches!(role, "bos" | "eos" | "sep") {
            out.push((
                format!("tokenizer.ggml.add_{role}_token"),
                MetaValue::Bool(flag),
            ));
        }
    }
    if let Some(template) = chat_template(dir, &tokenizer_config, &config_path)? {
        out.push(("tokenizer.chat_template".into(), MetaValue::Str(template)));
    }
    Ok(out)
}

/// tokenizer_config.json's `chat_template`, else chat_template.jinja, else chat_template.json's.
fn chat_template(
    dir: &Path,
    tokenizer_config: &Map<String, Value>,
    config_path: &Path,
) -> Result<Option<String>, ConvertError> {
    let unsupported = |path: PathBuf| ConvertError::BadJson {
        path,
        problem: "a chat template that is not one string (named templates are not supported)"
            .into(),
    };
    // gguf-py reads no template at all without a tokenizer_config.json.
    if tokenizer_config.is_empty() {
        return Ok(None);
    }
    match tokenizer_config.get("chat_template") {
        Some(Value::String(s)) => return Ok(Some(s.clone())),
        Some(Value::Null) | None => {}
        Some(_) => return Err(unsupported(config_path.to_path_buf())),
    }
    let jinja = dir.join("chat_template.jinja");
    if jinja.is_file() {
        if dir.join("additional_chat_templates").is_dir() {
            return Err(unsupported(jinja));
        }
        return std::fs::read_to_string(&jinja)
            .map(Some)
            .map_err(|source| ConvertError::Io {
                path: jinja,
                source,
            });
    }
    let json = dir.join("chat_template.json");
    if json.is_file() {
        return match read_json(&json)?.get("chat_template") {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err(unsupported(json)),
        };
    }
    Ok(None)
}
