//! The chat template renderer against HF transformers' `apply_chat_template` on the same
//! templates (vectors from `scripts/make_chat_template_vectors.py`): a Qwen3.5-style template
//! with system, user, assistant and tool turns, tools, and thinking on and off; and the built-in
//! ChatML.

use qwen35::chat::{ChatTemplate, Message, RenderOptions};
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
