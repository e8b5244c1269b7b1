//! Chat prompts: the model file's own Jinja chat template (`tokenizer.chat_template`) rendered
//! with minijinja the way HF transformers' `apply_chat_template` renders it, ChatML when the
//! file has none; and the split of a reply into reasoning and answer.
//!
//! The CLI (`run --chat`, `chat`) and the server build their prompts through [`ChatTemplate`],
//! so the same conversation gives the same tokens everywhere. The rendered text is meant to be
//! tokenized with special-token parsing on.

mod template;

use crate::tokenizer::{Tokenizer, TokenizerError};

pub use template::{ChatTemplate, RenderOptions, TemplateError};

pub const THINK: &str = "<think>";
pub const THINK_END: &str = "</think>";

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message as chat templates see it (the OpenAI message shape).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: Role,
    /// For assistant messages, the reply as generated (templates drop a reasoning block).
    #[serde(default)]
    pub content: String,
    /// An assistant reply's reasoning, given apart from its content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// An assistant's tool calls, as OpenAI sends them (`{"type", "id", "function": {"name",
    /// "arguments"}}`), passed to the template as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<serde_json::Value>,
    /// A tool result's call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
}

/// The tokens of a rendered prompt and the token counts at its message boundaries (byte
/// offsets from [`ChatTemplate::render_with_boundaries`]): a boundary counts where the text
/// before it tokenizes to a prefix of the whole prompt's tokens.
pub fn tokenize_at_boundaries(
    tokenizer: &Tokenizer,
    text: &str,
    byte_boundaries: &[usize],
) -> Result<(Vec<u32>, Vec<usize>), TokenizerError> {
    let tokens = tokenizer.encode(text, true)?;
    let mut boundaries = Vec::new();
    for &end in byte_boundaries {
        let Some(prefix) = text.get(..end) else {
            continue;
        };
        let head = tokenizer.encode(prefix, true)?;
        if !head.is_empty() && tokens.starts_with(&head) {
            boundaries.push(head.len());
        }
    }
    Ok((tokens, boundaries))
}

/// Splits a reply into (reasoning, answer) for display and history, like the chat template:
/// the reasoning is what precedes the first `</think>` (after an opening `<think>`, which the
/// generated text lacks when the prompt supplied it), newlines trimmed; the answer is what follows
/// the last `</think>`, leading newlines trimmed. Text without `</think>` is all answer, unless it
/// opens with `<think>`: then it is reasoning still in progress.
pub fn split_reasoning(text: &str) -> (Option<&str>, &str) {
    let Some((before, _)) = text.split_once(THINK_END) else {
        return match text.trim_start_matches('\n').strip_prefix(THINK) {
            Some(reasoning) => (Some(reasoning.trim_matches('\n')), ""),
            None => (None, text),
        };
    };
    let reasoning = before.rsplit(THINK).next().unwrap_or(before);
    let answer = text.rsplit(THINK_END).next().unwrap_or_default();
    (
        Some(reasoning.trim_matches('\n')),
        answer.trim_start_matches('\n'),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_is_split_from_the_answer() {
        assert_eq!(
            split_reasoning("<think>\nstep 1\nstep 2\n</think>\n\nThe answer."),
            (Some("step 1\nstep 2"), "The answer.")
        );
        // Generated text: the opening tag was in the prompt.
        assert_eq!(
            split_reasoning("hmm\n</think>\n\nYes."),
            (Some("hmm"), "Yes.")
        );
        assert_eq!(
            split_reasoning("<think>\n\n</think>\n\nHi"),
            (Some(""), "Hi")
        );
        assert_eq!(split_reasoning("Just text."), (None, "Just text."));
        assert_eq!(
            split_reasoning("<think>\nhalf a thou"),
            (Some("half a thou"), "")
        );
        assert_eq!(split_reasoning(""), (None, ""));
    }
}
