//! The request bodies of `/v1/chat/completions` and `/v1/completions`, checked field by field:
//! anything the server cannot honour is a 400 naming the field, never a silent default.

use super::error::ApiError;
use crate::chat::{Message, Role};
use crate::sample::SamplerConfig;
use serde::Deserialize;

/// Sampling defaults when a request leaves a field out: the CLI's (Qwen's recommended
/// non-thinking settings).
pub const DEFAULT_TEMPERATURE: f32 = 0.7;
pub const DEFAULT_TOP_K: usize = 20;
pub const DEFAULT_TOP_P: f32 = 0.8;
/// OpenAI's limit on stop sequences.
const MAX_STOPS: usize = 4;

/// Fields both endpoints take.
#[derive(Debug, Deserialize)]
pub struct SamplingFields {
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<i64>,
    pub max_completion_tokens: Option<i64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub top_k: Option<i64>,
    pub seed: Option<u64>,
    pub stop: Option<Stop>,
    #[serde(alias = "repeat_penalty")]
    pub repetition_penalty: Option<f32>,
    pub n: Option<i64>,
}

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<RequestMessage>,
    pub tools: Option<serde_json::Value>,
    /// Extra template variables, e.g. `{"enable_thinking": false}` as Qwen documents it.
    pub chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
}

#[derive(Debug, Deserialize)]
pub struct RequestMessage {
    pub role: String,
    pub content: Option<Content>,
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<serde_json::Value>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

/// A message's content: a string, or OpenAI's list of parts (only text parts are served).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub prompt: Prompt,
    #[serde(flatten)]
    pub sampling: SamplingFields,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    One(String),
    Many(Vec<String>),
}

impl Prompt {
    pub fn text(self) -> Result<String, ApiError> {
        match self {
            Prompt::One(text) => Ok(text),
            Prompt::Many(mut texts) if texts.len() == 1 => Ok(texts.remove(0)),
            Prompt::Many(_) => Err(ApiError::invalid_field(
                "prompt",
                "one prompt per request is served (batches of prompts are not)",
            )),
        }
    }
}

/// What a request asks of the generation, checked.
#[derive(Debug, Clone)]
pub struct GenerationParams {
    pub sampling: SamplerConfig,
    /// Most tokens to generate; `None`: until the end of generation or of the context.
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
}

impl SamplingFields {
    pub fn params(&self) -> Result<GenerationParams, ApiError> {
        if let Some(n) = self.n.filter(|&n| n != 1) {
            return Err(ApiError::invalid_field(
                "n",
                format!("n must be 1 (one choice per request is served), not {n}"),
            ));
        }
        let max_tokens = match (self.max_completion_tokens, self.max_tokens) {
            (Some(n), _) => Some(("max_completion_tokens", n)),
            (None, Some(n)) => Some(("max_tokens", n)),
            (None, None) => None,
        };
        let max_tokens = match max_tokens {
            Some((field, n)) if n < 1 => {
                return Err(ApiError::invalid_field(
                    field,
                    format!("{field} must be at least 1, not {n}"),
                ))
            }
            Some((_, n)) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None => None,
        };
        let temperature = checked("temperature", self.temperature, 0.0..=2.0)?;
        let top_p = checked("top_p", self.top_p, f32::MIN_POSITIVE..=1.0)?;
        let min_p = checked("min_p", self.min_p, 0.0..=1.0)?;
        let repeat_penalty = checked("repetition_penalty", self.repetition_penalty, 0.01..=10.0)?;
        let top_k = match self.top_k {
            Some(k) if k < 0 => {
                return Err(ApiError::invalid_field(
                    "top_k",
                    format!("top_k must be 0 (off) or more, not {k}"),
                ))
            }
            Some(k) => usize::try_from(k).unwrap_or(usize::MAX),
            None => DEFAULT_TOP_K,
        };
        let stop = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(list)) => list.clone(),
        };
        if stop.len() > MAX_STOPS || stop.iter().any(String::is_empty) {
            return Err(ApiError::invalid_field(
                "stop",
                format!("stop takes at most {MAX_STOPS} non-empty strings"),
            ));
        }
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
        Ok(GenerationParams {
            sampling: SamplerConfig {
                temperature: temperature.unwrap_or(DEFAULT_TEMPERATURE),
                top_k,
                top_p: top_p.unwrap_or(DEFAULT_TOP_P),
                min_p: min_p.unwrap_or(0.0),
                repeat_penalty: repeat_penalty.unwrap_or(1.0),
                seed,
                ..SamplerConfig::default()
            },
            max_tokens,
            stop,
            stream: self.stream,
            include_usage: self
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage),
        })
    }
}

fn checked(
    field: &str,
    value: Option<f32>,
    range: std::ops::RangeInclusive<f32>,
) -> Result<Option<f32>, ApiError> {
    match value {
        Some(v) if !range.contains(&v) => Err(ApiError::invalid_field(
            field,
            format!(
                "{field} must lie in [{}, {}], not {v}",
                range.start(),
                range.end()
            ),
        )),
        other => Ok(other),
    }
}

impl ChatRequest {
    /// The messages as the chat template takes them.
    pub fn messages(&self) -> Result<Vec<Message>, ApiError> {
        if self.messages.is_empty() {
            return Err(ApiError::invalid_field(
                "messages",
                "messages must hold at least one message",
            ));
        }
        self.messages
            .iter()
            .enumerate()
            .map(|(i, m)| m.to_message(i))
            .collect()
    }
}

impl RequestMessage {
    fn to_message(&self, index: usize) -> Result<Message, ApiError> {
        let role = match self.role.as_str() {
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => {
                return Err(ApiError::invalid_field(
                    &format!("messages[{index}].role"),
                    format!("unknown role '{other}' (system, developer, user, assistant or tool)"),
                ))
            }
        };
        let content = match &self.content {
            None => String::new(),
            Some(Content::Text(text)) => text.clone(),
            Some(Content::Parts(parts)) => {
                let mut text = String::new();
                for part in parts {
                    match (part.kind.as_str(), &part.text) {
                        ("text", Some(t)) => text.push_str(t),
                        (kind, _) => {
                            return Err(ApiError::invalid_field(
                                &format!("messages[{index}].content"),
                                format!(
                                    "content parts of type '{kind}' are not served (text only)"
                                ),
                            ))
                        }
                    }
                }
                text
            }
        };
        Ok(Message {
            role,
            content,
            reasoning_content: self.reasoning_content.clone(),
            tool_calls: self.tool_calls.iter().map(arguments_as_object).collect(),
            tool_call_id: self.tool_call_id.clone(),
            name: self.name.clone(),
        })
    }
}

/// OpenAI sends a tool call's arguments as a JSON string; templates iterate them as a mapping.
fn arguments_as_object(call: &serde_json::Value) -> serde_json::Value {
    let mut call = call.clone();
    if let Some(arguments) = call.pointer_mut("/function/arguments") {
        if let Some(parsed) = arguments
            .as_str()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .filter(serde_json::Value::is_object)
        {
            *arguments = parsed;
        }
    }
    call
}

/// Parses a request body, telling malformed JSON from a well-formed body of the wrong shape.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            ApiError::invalid(format!("the request body does not fit the API: {e}"))
        }
        _ => ApiError::invalid(format!("the request body is not valid JSON: {e}"))
            .with_code("invalid_json"),
    })
}
