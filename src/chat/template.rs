//! The chat template renderer: minijinja set up the way HF transformers sets up Jinja2 for
//! `apply_chat_template` (`trim_blocks`, `lstrip_blocks`, loop controls, Python string methods,
//! a `tojson` that writes what Python's `json.dumps` writes, `raise_exception`, `strftime_now`,
//! and the special tokens `bos_token` and `eos_token`).

use super::Message;
use crate::gguf::{GgufError, GgufFile, MetaValue};
use crate::tokenizer::keys;
use minijinja::value::{Kwargs, Serde};
use minijinja::{Environment, Error, ErrorKind, Value};

const TEMPLATE_NAME: &str = "chat";
const CHATML: &str = include_str!("chatml.jinja");
/// The GGUF metadata key llama.cpp's converter stores the Jinja chat template under.
pub const GGUF_TEMPLATE_KEY: &str = "tokenizer.chat_template";
/// Bounds what a hostile template can make one render do (minijinja's fuel: roughly
/// instructions; a real Qwen template spends a few thousand per message).
const RENDER_FUEL: u64 = 50_000_000;

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the chat template does not compile: {0}")]
    Syntax(String),
    #[error("rendering the chat template failed: {0}")]
    Render(String),
    #[error("the GGUF key {GGUF_TEMPLATE_KEY} is not a string: {0}")]
    Metadata(String),
    #[error("reading the special tokens the chat template is given: {0}")]
    SpecialTokens(#[from] GgufError),
}

/// The GGUF keys of the special tokens a template sees as `bos_token` and `eos_token`.
const BOS_TOKEN_ID: &str = "tokenizer.ggml.bos_token_id";
const SPECIAL_TOKENS: [(&str, &str); 2] = [
    ("bos_token", BOS_TOKEN_ID),
    ("eos_token", keys::EOS_TOKEN_ID),
];

/// What a render gets besides the messages.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// End with the assistant turn's opening, for the model to continue.
    pub add_generation_prompt: bool,
    /// OpenAI-style tool definitions, passed as `tools` when given.
    pub tools: Option<serde_json::Value>,
    /// Further template variables (`chat_template_kwargs`), e.g. `enable_thinking`.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
}

impl RenderOptions {
    /// A generation prompt with thinking switched on or off (`enable_thinking`).
    pub fn generation(thinking: bool) -> RenderOptions {
        let mut kwargs = serde_json::Map::new();
        kwargs.insert("enable_thinking".into(), thinking.into());
        RenderOptions {
            add_generation_prompt: true,
            tools: None,
            kwargs,
        }
    }
}

pub struct ChatTemplate {
    env: Environment<'static>,
    /// `bos_token`, `eos_token`: the texts of the file's special tokens, as HF transformers
    /// passes the tokenizer's to templates; a request's own variables of those names win.
    special_tokens: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChatTemplate")
    }
}

impl ChatTemplate {
    /// Compiles a Jinja chat template.
    pub fn new(source: &str) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| TemplateError::Syntax(format!("{e:#}")))?;
        env.set_syntax(syntax);
        env.set_fuel(Some(RENDER_FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", python_tojson);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<Value, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        // HF transformers' `strftime_now`: the local time through Python's `strftime`.
        env.add_function("strftime_now", |format: String| {
            strftime(&format, &jiff::ZonedDateTime::now())
        });
        env.add_template_owned(TEMPLATE_NAME, source.to_owned())
            .map_err(|e| TemplateError::Syntax(format!("{e:#}")))?;
        Ok(ChatTemplate {
            env,
            special_tokens: serde_json::Map::new(),
        })
    }

    /// Gives the template `bos_token` and `eos_token` (each when `Some`).
    pub fn with_special_tokens(mut self, bos: Option<String>, eos: Option<String>) -> ChatTemplate {
        for ((name, _), text) in SPECIAL_TOKENS.iter().zip([bos, eos]) {
            match text {
                Some(text) => self.special_tokens.insert((*name).into(), text.into()),
                None => self.special_tokens.remove(*name),
            };
        }
        self
    }

    /// ChatML (QWEN35.md §9), for files without a template of their own.
    pub fn chatml() -> ChatTemplate {
        ChatTemplate::new(CHATML).expect("the built-in ChatML template compiles")
    }

    /// The file's own template, or ChatML when it has none, given the texts of the file's
    /// beginning- and end-of-sequence tokens (an id the file lacks, or one outside its
    /// vocabulary, leaves that variable undefined, as HF does for a tokenizer without it).
    pub fn from_gguf(file: &GgufFile) -> Result<ChatTemplate, TemplateError> {
        let template = match file.get(GGUF_TEMPLATE_KEY) {
            None => ChatTemplate::chatml(),
            Some(MetaValue::Str(source)) => ChatTemplate::new(source)?,
            Some(other) => return Err(TemplateError::Metadata(format!("{other:?}"))),
        };
        let vocab = file.get_str_array_opt(keys::TOKENS)?.unwrap_or_default();
        let text = |key: &str| -> Result<Option<String>, GgufError> {
            let id = file.get_u32_opt(key)?;
            Ok(id.and_then(|id| vocab.get(id as usize)).cloned())
        };
        let [(_, bos), (_, eos)] = SPECIAL_TOKENS;
        Ok(template.with_special_tokens(text(bos)?, text(eos)?))
    }

    pub fn render(
        &self,
        messages: &[Message],
        options: &RenderOptions,
    ) -> Result<String, TemplateError> {
        let mut context = options.kwargs.clone();
        for (name, text) in &self.special_tokens {
            context.entry(name).or_insert_with(|| text.clone());
        }
        context.insert(
            "messages".into(),
            serde_json::to_value(messages).map_err(|e| TemplateError::Render(e.to_string()))?,
        );
        if let Some(tools) = &options.tools {
            context.insert("tools".into(), tools.clone());
        }
        context.insert(
            "add_generation_prompt".into(),
            options.add_generation_prompt.into(),
        );
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TemplateError::Render(format!("{e:#}")))?;
        template
            .render(Value::from(Serde(&context)))
            .map_err(|e| TemplateError::Render(format!("{e:#}")))
    }

    /// The rendered prompt and the byte offsets in it where a message ends: where the render of
    /// the first k messages (without a generation prompt) is a prefix of the whole, for each k
    /// up to all of them (the end of the last message, before the generation prompt).
    /// These are the positions where the model state is worth keeping: a later request that
    /// repeats those messages renders the same text up to there.
    pub fn render_with_boundaries(
        &self,
        messages: &[Message],
        options: &RenderOptions,
    ) -> Result<(String, Vec<usize>), TemplateError> {
        let text = self.render(messages, options)?;
        let partial = RenderOptions {
            add_generation_prompt: false,
            ..options.clone()
        };
        let boundaries = (1..=messages.len())
            .filter_map(|k| self.render(&messages[..k], &partial).ok())
            .filter(|prefix| !prefix.is_empty() && text.starts_with(prefix.as_str()))
            .map(|prefix| prefix.len())
            .collect();
        Ok((text, boundaries))
    }
}

/// `time` formatted as Python's `strftime` formats it (the C locale's names); a directive it
/// does not know is a render error naming the format.
fn strftime(format: &str, time: &jiff::ZonedDateTime) -> Result<Value, Error> {
    jiff::fmt::strtime::format(format, time)
        .map(Value::from)
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidOperation,
                format!("strftime_now({format:?}): {e}"),
            )
        })
}

/// `tojson` as HF transformers defines it for chat templates: Python's
/// `json.dumps(x, ensure_ascii=False, indent=indent)`, so `", "` and `": "` between items, no
/// HTML escaping, keys in their given order.
fn python_tojson(value: &Value, indent: Option<usize>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match indent {
        Some(indent) => Some(indent),
        None => kwargs.get::<Option<usize>>("indent")?,
    };
    let json = serde_json::to_value(value).map_err(|e| {
        Error::new(ErrorKind::InvalidOperation, "tojson: not serializable").with_source(e)
    })?;
    let mut out = Vec::new();
    let written = match indent {
        Some(width) => {
            let spaces = vec![b' '; width];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&spaces);
            serde::Serialize::serialize(
                &json,
                &mut serde_json::Serializer::with_formatter(&mut out, formatter),
            )
        }
        None => serde::Serialize::serialize(
            &json,
            &mut serde_json::Serializer::with_formatter(&mut out, PythonFormatter),
        ),
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, "tojson failed").with_source(e))?;
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, "tojson: not UTF-8").with_source(e))?;
    Ok(Value::from_safe_string(text))
}

/// Python's default JSON separators: `", "` between items and `": "` after keys.
struct PythonFormatter;

fn item_separator<W: ?Sized + std::io::Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Role;

    #[test]
    fn boundaries_fall_where_messages_end() {
        let template = ChatTemplate::chatml();
        let messages = [
            Message::new(Role::System, "sys"),
            Message::new(Role::User, "hi"),
        ];
        let (text, boundaries) = template
            .render_with_boundaries(&messages, &RenderOptions::generation(false))
            .unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n\
             <|im_start|>assistant\n<think>\n\n</think>\n\n"
        );
        let system = "<|im_start|>system\nsys<|im_end|>\n".len();
        let user = "<|im_start|>user\nhi<|im_end|>\n".len();
        assert_eq!(boundaries, [system, system + user]);
    }

    /// Python's `datetime(2026, 3, 7, 9, 5, 2).strftime(format)` for each format.
    #[test]
    fn strftime_formats_as_python_does() {
        let time = jiff::civil::date(2026, 3, 7)
            .at(9, 5, 2, 0)
            .in_tz("UTC")
            .unwrap();
        for (format, python) in [
            ("%d %b %Y", "07 Mar 2026"),
            ("%B %d, %Y", "March 07, 2026"),
            ("%Y-%m-%d", "2026-03-07"),
            ("%A %H:%M:%S", "Saturday 09:05:02"),
            ("%I:%M %p", "09:05 AM"),
            ("%j", "066"),
            ("%a %y", "Sat 26"),
            ("%e", " 7"),
        ] {
            assert_eq!(
                strftime(format, &time).unwrap().to_string(),
                python,
                "{format}"
            );
        }
        assert!(strftime("%K", &time).is_err());
    }

    #[test]
    fn template_errors_are_reported() {
        assert!(matches!(
            ChatTemplate::new("{% if %}"),
            Err(TemplateError::Syntax(_))
        ));
        let raising = ChatTemplate::new("{{ raise_exception('no system role') }}").unwrap();
        let err = raising
            .render(&[], &RenderOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no system role"), "{err}");
        let endless = ChatTemplate::new("{% for i in range(100000000) %}{{ i }}{% endfor %}");
        assert!(endless
            .unwrap()
            .render(&[], &RenderOptions::default())
            .is_err());
    }
}
