//! The HTTP side: routes, the API key check, request bodies to jobs, and the model's events to
//! OpenAI-shaped responses (one JSON body, or server-sent events ending in `data: [DONE]`).

use super::api::{parse_body, ChatRequest, CompletionRequest, GenerationParams};
use super::error::ApiError;
use super::generate::Outcome;
use super::text::Split;
use super::worker::{Event, Job, EVENT_BUFFER};
use super::{PanicSite, Shared};
use crate::chat::{tokenize_at_boundaries, RenderOptions, THINK};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Request bodies past this are refused with 413.
pub const MAX_BODY_BYTES: usize = 16 << 20;

pub fn router(shared: Arc<Shared>) -> Router {
    let api = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            require_api_key,
        ));
    Router::new()
        .route("/health", get(health))
        .merge(api)
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "no such route",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                "this route does not take that method",
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::internal("the request failed inside the server").into_response()
            },
        ))
        .with_state(shared)
}

async fn require_api_key(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(key) = &shared.api_key else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|given| same_secret(given.as_bytes(), key.as_bytes())) {
        return next.run(request).await;
    }
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        "a valid API key is required: Authorization: Bearer KEY",
    )
    .with_code("invalid_api_key")
    .into_response()
}

/// Compares without stopping at the first difference, so timing does not reveal the key.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

async fn models(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": shared.model_name,
            "object": "model",
            "created": shared.created,
            "owned_by": "qwen35",
        }],
    }))
}

fn body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        let kind = "invalid_request_error";
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                status,
                kind,
                format!("the request body is over the limit of {MAX_BODY_BYTES} bytes"),
            )
        } else {
            ApiError::new(status, kind, rejection.body_text())
        }
    })
}

/// Which endpoint a reply is for: the response shapes differ.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Chat,
    Completion,
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    shared.planted.fire(PanicSite::Route);
    let request: ChatRequest = parse_body(&body(raw)?)?;
    let params = request.sampling.params()?;
    let messages = request.messages()?;
    let options = RenderOptions {
        add_generation_prompt: true,
        tools: request.tools.clone(),
        kwargs: request.chat_template_kwargs.clone().unwrap_or_default(),
    };
    let prompt_shared = Arc::clone(&shared);
    let (prompt, boundaries, opened) = tokio::task::spawn_blocking(move || {
        let (text, byte_boundaries) = prompt_shared
            .template
            .render_with_boundaries(&messages, &options)
            .map_err(|e| ApiError::invalid_field("messages", e.to_string()))?;
        let (tokens, boundaries) =
            tokenize_at_boundaries(&prompt_shared.tokenizer, &text, &byte_boundaries)
                .map_err(|e| ApiError::invalid_field("messages", e.to_string()))?;
        let opened = text.trim_end_matches('\n').ends_with(THINK);
        Ok::<_, ApiError>((tokens, boundaries, opened))
    })
    .await
    .map_err(|e| ApiError::internal(format!("rendering the prompt failed: {e}")))??;
    submit(
        &shared,
        Endpoint::Chat,
        params,
        prompt,
        boundaries,
        Some(opened),
    )
    .await
}

async fn completions(
    State(shared): State<Arc<Shared>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CompletionRequest = parse_body(&body(raw)?)?;
    let params = request.sampling.params()?;
    let text = request.prompt.text()?;
    let prompt_shared = Arc::clone(&shared);
    let prompt = tokio::task::spawn_blocking(move || prompt_shared.tokenizer.encode(&text, true))
        .await
        .map_err(|e| ApiError::internal(format!("tokenizing the prompt failed: {e}")))?
        .map_err(|e| ApiError::invalid_field("prompt", e.to_string()))?;
    submit(
        &shared,
        Endpoint::Completion,
        params,
        prompt,
        Vec::new(),
        None,
    )
    .await
}

/// Queues the job and answers with its reply, whole or streamed.
async fn submit(
    shared: &Shared,
    endpoint: Endpoint,
    params: GenerationParams,
    prompt: Vec<u32>,
    boundaries: Vec<usize>,
    reasoning: Option<bool>,
) -> Result<Response, ApiError> {
    let param = if endpoint == Endpoint::Chat {
        "messages"
    } else {
        "prompt"
    };
    if prompt.is_empty() {
        return Err(ApiError::invalid_field(param, "the prompt is empty"));
    }
    if prompt.len() >= shared.context_len {
        return Err(ApiError::invalid_field(
            param,
            format!(
                "the prompt is {} tokens and the context holds {} (one must be left for the reply)",
                prompt.len(),
                shared.context_len
            ),
        )
        .with_code("context_length_exceeded"));
    }
    let (events, replies) = mpsc::channel(EVENT_BUFFER);
    let job = Job {
        prompt,
        boundaries,
        sampling: params.sampling.clone(),
        max_tokens: params.max_tokens,
        stop: params.stop.clone(),
        reasoning,
        events,
    };
    shared
        .jobs
        .send(job)
        .map_err(|_| ApiError::internal("the model is no longer serving"))?;
    let reply = Reply {
        id: format!(
            "{}-{}",
            if endpoint == Endpoint::Chat {
                "chatcmpl"
            } else {
                "cmpl"
            },
            shared.next_id.fetch_add(1, Ordering::Relaxed)
        ),
        created: unix_time(),
        model: shared.model_name.clone(),
        endpoint,
    };
    if params.stream {
        Ok(stream(reply, replies, params.include_usage).into_response())
    } else {
        whole(reply, replies).await.map(IntoResponse::into_response)
    }
}

fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

struct Reply {
    id: String,
    created: u64,
    model: String,
    endpoint: Endpoint,
}

impl Reply {
    fn usage(outcome: &Outcome) -> Value {
        json!({
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
            "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
            "prompt_tokens_details": { "cached_tokens": outcome.cached_tokens },
        })
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Completion, _) => "text_completion",
        }
    }

    fn envelope(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// One choice; `message` is the chat message or delta (`None` for a completion's text).
    fn choice(&self, split: &Split, finish: Option<&str>, chunk: bool) -> Value {
        match self.endpoint {
            Endpoint::Chat => {
                let mut message = serde_json::Map::new();
                if !chunk {
                    message.insert("role".into(), "assistant".into());
                }
                if !chunk || !split.content.is_empty() || finish.is_none() {
                    message.insert("content".into(), split.content.clone().into());
                }
                if !split.reasoning.is_empty() {
                    message.insert("reasoning_content".into(), split.reasoning.clone().into());
                }
                let key = if chunk { "delta" } else { "message" };
                json!({ "index": 0, key: message, "finish_reason": finish, "logprobs": null })
            }
            Endpoint::Completion => json!({
                "index": 0,
                "text": split.content,
                "finish_reason": finish,
                "logprobs": null,
            }),
        }
    }
}

async fn whole(reply: Reply, mut events: mpsc::Receiver<Event>) -> Result<Json<Value>, ApiError> {
    let mut text = Split::default();
    while let Some(event) = events.recv().await {
        match event {
            Event::Delta(split) => {
                text.reasoning.push_str(&split.reasoning);
                text.content.push_str(&split.content);
            }
            Event::Failed(error) => return Err(error),
            Event::Done(outcome) => {
                let trimmed = text.reasoning.trim_end_matches('\n').len();
                text.reasoning.truncate(trimmed);
                let choice = reply.choice(&text, Some(outcome.finish.reason()), false);
                let mut body = reply.envelope(false, json!([choice]));
                body["usage"] = Reply::usage(&outcome);
                return Ok(Json(body));
            }
        }
    }
    Err(ApiError::internal(
        "the model stopped before the reply was done",
    ))
}

fn stream(
    reply: Reply,
    mut events: mpsc::Receiver<Event>,
    include_usage: bool,
) -> impl IntoResponse {
    let (sse, out) = mpsc::channel::<Result<SseEvent, Infallible>>(EVENT_BUFFER);
    tokio::spawn(async move {
        let data = |value: Value| Ok(SseEvent::default().data(value.to_string()));
        if reply.endpoint == Endpoint::Chat {
            let first = reply.envelope(
                true,
                json!([{ "index": 0, "delta": { "role": "assistant", "content": "" },
                         "finish_reason": null, "logprobs": null }]),
            );
            if sse.send(data(first)).await.is_err() {
                return;
            }
        }
        // Dropping `events` when the client has gone stops the generation.
        while let Some(event) = events.recv().await {
            let message = match event {
                Event::Delta(split) => {
                    reply.envelope(true, json!([reply.choice(&split, None, true)]))
                }
                Event::Failed(error) => error.body(),
                Event::Done(outcome) => {
                    let finish =
                        reply.choice(&Split::default(), Some(outcome.finish.reason()), true);
                    if sse
                        .send(data(reply.envelope(true, json!([finish]))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    if !include_usage {
                        break;
                    }
                    let mut usage = reply.envelope(true, json!([]));
                    usage["usage"] = Reply::usage(&outcome);
                    usage
                }
            };
            if sse.send(data(message)).await.is_err() {
                return;
            }
        }
        let _ = sse.send(Ok(SseEvent::default().data("[DONE]"))).await;
    });
    Sse::new(ReceiverStream::new(out)).keep_alive(KeepAlive::default())
}
