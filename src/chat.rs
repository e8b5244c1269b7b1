//! ChatML prompts for Qwen3.5 (QWEN35.md §9), text only, no tools.
//!
//! ```text
//! <|im_start|>{role}\n{content}<|im_end|>\n      one per message; past replies without reasoning
//! <|im_start|>assistant\n<think>\n               generation prefix, thinking on
//! <|im_start|>assistant\n<think>\n\n</think>\n\n generation prefix, thinking off
//! ```
//! The rendered text is meant to be tokenized with special-token parsing on.
//!
//! A session continues with [`render_turn`] instead of re-rendering the history: the model's reply
//! stays in the context exactly as generated, up to its `<|im_end|>`, and the next user turn is
//! appended. The result equals [`render_prompt`] of the history except that each past reply keeps
//! its reasoning block (`<think>…</think>\n\n` after the `assistant\n` line; empty when thinking
//! was off), which `render_prompt` drops the way the model's chat template does.

pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";
pub const THINK: &str = "<think>";
pub const THINK_END: &str = "</think>";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    /// For assistant messages, the reply as generated (a reasoning block is allowed and dropped).
    pub content: String,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
        }
    }
}

/// The full prompt for `messages`, ending with the assistant generation prefix.
pub fn render_prompt(messages: &[Message], thinking: bool) -> String {
    let mut prompt = String::new();
    for message in messages {
        let content = match message.role {
            Role::Assistant => split_reasoning(&message.content).1,
            Role::System | Role::User => &message.content,
        };
        push_message(&mut prompt, message.role, content);
    }
    prompt.push_str(generation_prefix(thinking));
    prompt
}

/// What follows a finished reply (which ends with `<|im_end|>`) to ask the next question.
pub fn render_turn(user: &str, thinking: bool) -> String {
    let mut turn = String::from("\n");
    push_message(&mut turn, Role::User, user);
    turn.push_str(generation_prefix(thinking));
    turn
}

/// The text the assistant's reply starts after. With thinking off, an empty reasoning block is
/// already closed so the model answers directly.
pub fn generation_prefix(thinking: bool) -> &'static str {
    if thinking {
        "<|im_start|>assistant\n<think>\n"
    } else {
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    }
}

fn push_message(out: &mut String, role: Role, content: &str) {
    out.push_str(IM_START);
    out.push_str(role.name());
    out.push('\n');
    out.push_str(content);
    out.push_str(IM_END);
    out.push('\n');
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
    fn single_user_message() {
        let messages = [Message::new(Role::User, "Hello")];
        assert_eq!(
            render_prompt(&messages, false),
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        );
        assert_eq!(
            render_prompt(&messages, true),
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n"
        );
    }

    #[test]
    fn history_drops_past_reasoning() {
        let messages = [
            Message::new(Role::System, "Be brief."),
            Message::new(Role::User, "2+2?"),
            Message::new(Role::Assistant, "<think>\nadd them\n</think>\n\n4"),
            Message::new(Role::User, "and 3+3?"),
        ];
        assert_eq!(
            render_prompt(&messages, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n\
             <|im_start|>user\n2+2?<|im_end|>\n\
             <|im_start|>assistant\n4<|im_end|>\n\
             <|im_start|>user\nand 3+3?<|im_end|>\n\
             <|im_start|>assistant\n<think>\n"
        );
    }

    /// A session: prompt, then per exchange the generated reply, its `<|im_end|>`, the next turn.
    /// Dropping each kept reasoning block must give `render_prompt` of the history.
    #[test]
    fn turns_concatenate_to_the_rendered_history() {
        let exchanges = [
            ("first question", "weigh it", "first answer"),
            ("second\nquestion", "", "second answer\nin two lines"),
            ("third", "more thought\n\nstill", "done"),
        ];
        for thinking in [true, false] {
            let mut history = vec![Message::new(Role::System, "sys")];
            let mut session = String::new();
            let mut kept_blocks = Vec::new();
            for (i, (question, reasoning, answer)) in exchanges.iter().enumerate() {
                history.push(Message::new(Role::User, *question));
                session.push_str(&if i == 0 {
                    render_prompt(&history, thinking)
                } else {
                    render_turn(question, thinking)
                });
                // The prompt supplies "<think>\n" (and, thinking off, the whole empty block).
                let generated = if thinking {
                    format!("{reasoning}\n</think>\n\n{answer}")
                } else {
                    answer.to_string()
                };
                session.push_str(&generated);
                session.push_str(IM_END);
                let full_reply = if thinking {
                    format!("<think>\n{reasoning}\n</think>\n\n{answer}")
                } else {
                    format!("<think>\n\n</think>\n\n{answer}")
                };
                kept_blocks.push(full_reply.replace(answer, ""));
                history.push(Message::new(Role::Assistant, generated));
            }
            let question = "last";
            session.push_str(&render_turn(question, thinking));
            history.push(Message::new(Role::User, question));

            let expected = render_prompt(&history, thinking);
            let prefix = generation_prefix(thinking);
            let mut without_reasoning = session
                .strip_suffix(prefix)
                .expect("session ends with the generation prefix")
                .to_owned();
            for block in &kept_blocks {
                let at = without_reasoning
                    .find(&format!("assistant\n{block}"))
                    .expect("reply keeps its reasoning block");
                let start = at + "assistant\n".len();
                without_reasoning.replace_range(start..start + block.len(), "");
            }
            without_reasoning.push_str(prefix);
            assert_eq!(without_reasoning, expected, "thinking={thinking}");
        }
    }

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
