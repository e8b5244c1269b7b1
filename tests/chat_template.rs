//! The chat template renderer against HF transformers' `apply_chat_template` on the same
//! templates (vectors from `scripts/make_chat_template_vectors.py`): a Qwen3.5-style template
//! with system, user, assistant and tool turns, tools, and thinking on and off; and the built-in
//! ChatML.

use qwen35::chat::{ChatTemplate, Message, RenderOptions, Role};
use qwen35::gguf::{GgufFile, GgufWriter, MetaArray, MetaValue};
use serde_json::Value;

const VECTORS: &str = include_str!("data/chat_template/vectors.json");
const QWEN35_STYLE: &str = include_str!("data/chat_template/qwen35_style.jinja");

#[test]
fn renders_what_transformers_renders() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    let qwen35_style = ChatTemplate::new(QWEN35_STYLE).unwrap();
    let chatml = ChatTemplate::chatml();
    let mut checked = 0;
    for case in vectors["vectors"].as_array().unwrap() {
        let name = format!("{} / {}", case["template"], case["name"]);
        let template = match case["template"].as_str().unwrap() {
            "qwen35_style" => &qwen35_style,
            "chatml" => &chatml,
            other => panic!("unknown template {other}"),
        };
        let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
        let options = RenderOptions {
            add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
            tools: Some(case["tools"].clone()).filter(|t| !t.is_null()),
            kwargs: case["kwargs"].as_object().unwrap().clone(),
        };
        let rendered = template.render(&messages, &options).unwrap();
        assert_eq!(rendered, case["rendered"].as_str().unwrap(), "{name}");
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} vectors");
}

#[test]
fn the_vectors_cover_every_role_and_both_thinking_modes() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    let cases = vectors["vectors"].as_array().unwrap();
    for role in ["system", "user", "assistant", "tool"] {
        assert!(
            cases.iter().any(|c| c["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == role)),
            "{role}"
        );
    }
    for thinking in [true, false] {
        assert!(cases
            .iter()
            .any(|c| c["kwargs"]["enable_thinking"] == thinking));
    }
    assert!(cases.iter().any(|c| !c["tools"].is_null()));
}

/// `strftime_now`, as HF transformers gives templates: today's local date, as `date` prints it.
#[test]
fn strftime_now_renders_the_local_date() {
    let template = ChatTemplate::new("Today is {{ strftime_now('%d %b %Y') }}.").unwrap();
    let date = || {
        let out = std::process::Command::new("date")
            .arg("+%d %b %Y")
            .env("LC_ALL", "C")
            .output()
            .expect("date runs");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let before = date();
    let rendered = template.render(&[], &RenderOptions::default()).unwrap();
    let after = date();
    assert!(
        [format!("Today is {before}."), format!("Today is {after}.")].contains(&rendered),
        "{rendered} ({before})"
    );
    let unknown = ChatTemplate::new("{{ strftime_now('%K') }}").unwrap();
    let err = unknown.render(&[], &RenderOptions::default()).unwrap_err();
    assert!(err.to_string().contains("%K"), "{err}");
}

/// A GGUF holding `template`, a three-token vocabulary and the given special-token ids.
fn gguf_with(template: &str, bos: Option<u32>, eos: Option<u32>) -> GgufFile {
    let mut writer = GgufWriter::new();
    let mut add = |key: &str, value| writer.add_kv(key, value).unwrap();
    add("tokenizer.chat_template", MetaValue::Str(template.into()));
    let vocab = ["<s>", "</s>", "a"].map(String::from).to_vec();
    add(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::Str(vocab)),
    );
    if let Some(id) = bos {
        add("tokenizer.ggml.bos_token_id", MetaValue::U32(id));
    }
    if let Some(id) = eos {
        add("tokenizer.ggml.eos_token_id", MetaValue::U32(id));
    }
    let bytes = writer.write_header(Vec::new()).unwrap().finish().unwrap();
    GgufFile::from_bytes(bytes).unwrap()
}

/// `bos_token` and `eos_token` are the texts of the file's special tokens, undefined when the
/// file names none (or an id outside its vocabulary); a request's own variables win.
#[test]
fn templates_see_the_files_special_tokens() {
    let source = "{{ bos_token | default('-') }}|{{ eos_token | default('-') }}|\
                  {{ messages[0].content }}";
    let messages = [Message::new(Role::User, "hi")];
    let render = |file: &GgufFile, options: &RenderOptions| {
        ChatTemplate::from_gguf(file)
            .unwrap()
            .render(&messages, options)
            .unwrap()
    };
    let plain = RenderOptions::default();
    assert_eq!(
        render(&gguf_with(source, Some(0), Some(1)), &plain),
        "<s>|</s>|hi"
    );
    assert_eq!(
        render(&gguf_with(source, None, Some(1)), &plain),
        "-|</s>|hi"
    );
    assert_eq!(
        render(&gguf_with(source, Some(0), Some(7)), &plain),
        "<s>|-|hi"
    );
    let mut own = RenderOptions::default();
    own.kwargs.insert("eos_token".into(), "<end>".into());
    assert_eq!(
        render(&gguf_with(source, Some(0), Some(1)), &own),
        "<s>|<end>|hi"
    );
}
