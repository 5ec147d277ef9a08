//! The fake's OpenAI API: `/v1/models`, `/v1/chat/completions` (`chat.completion` or an
//! SSE stream of `chat.completion.chunk`s ending in `data: [DONE]`) and `/v1/embeddings`,
//! with OpenAI's error shape `{"error":{"message","type","param","code"}}`.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::gate::{self, Api, Ask, STREAM_ERROR};
use super::reply::{self, Finish, Last, Prompt, Reply};
use super::sim::SimMessage;
use super::stream::{self, Frames, Pace, to_vec};
use super::{Call, Model, Shared};

/// The fixed `created` of every object (2025-01-01T00:00:00Z).
pub(crate) const CREATED: u64 = 1_735_689_600;
/// Tool-call arguments are streamed in pieces of at most this many bytes.
const ARGUMENT_PIECE: usize = 8;

pub(super) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/embeddings", post(embeddings))
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let data: Vec<Value> = shared
        .models
        .iter()
        .map(|m| {
            serde_json::json!({
                "id": m.spec.name, "object": "model", "created": CREATED, "owned_by": "library"
            })
        })
        .collect();
    axum::Json(serde_json::json!({ "object": "list", "data": data })).into_response()
}

// ---- chat ------------------------------------------------------------------------------

#[derive(Deserialize)]
struct ChatBody {
    model: String,
    #[serde(default)]
    messages: Vec<InMessage>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    tools: Option<Vec<Value>>,
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
struct InMessage {
    role: String,
    #[serde(default)]
    content: Value,
    tool_call_id: Option<String>,
    tool_calls: Option<Vec<Value>>,
}

/// Text of a message: a string, or the text parts of a content array.
fn text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text")?.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

impl ChatBody {
    fn prompt(&self) -> Prompt {
        let last = match self.messages.last() {
            Some(m) if m.role == "user" => Last::User(text(&m.content)),
            Some(m) if m.role == "tool" => Last::ToolResult {
                name: self.tool_name(m.tool_call_id.as_deref()),
                content: text(&m.content),
            },
            _ => Last::Other,
        };
        let texts: Vec<String> = self.messages.iter().map(|m| text(&m.content)).collect();
        Prompt {
            last,
            prompt_tokens: reply::count_words(texts.iter().map(String::as_str)),
            tools: reply::tool_names(self.tools.as_ref()),
            max_tokens: self
                .max_completion_tokens
                .or(self.max_tokens)
                .and_then(|n| usize::try_from(n).ok()),
        }
    }

    /// The name of the tool an assistant message called with this id.
    fn tool_name(&self, id: Option<&str>) -> String {
        let found = id.and_then(|id| {
            self.messages
                .iter()
                .flat_map(|m| m.tool_calls.iter().flatten())
                .find(|c| c.get("id").and_then(Value::as_str) == Some(id))?
                .pointer("/function/name")?
                .as_str()
        });
        found.unwrap_or("tool").to_owned()
    }
}

async fn chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let api = Api::OpenAi;
    let req: ChatBody = match api.parse(&body) {
        Ok(r) => r,
        Err(refusal) => return *refusal,
    };
    let (call, model) = match api.admit(&shared, &req.model, true).await {
        Ok(admitted) => admitted,
        Err(refusal) => return *refusal,
    };
    let prompt = req.prompt();
    if !prompt.tools.is_empty() && !model.spec.tools {
        return api.tools_unsupported(&req.model);
    }
    if shared.sim.is_some() {
        return realistic_chat(&shared, &call, model, req, prompt).await;
    }
    let reply = reply::plan(
        model,
        prompt,
        call.script.as_deref(),
        call.knobs.tokens,
        None,
        call.knobs.answers,
    );
    let id = format!("chatcmpl-fake-{}", call.seq);
    if !req.stream {
        if let Some(resp) = api.whole_answer_fault(&shared, &call).await {
            return resp;
        }
        let mut resp = Response::new(Body::from(completion(&id, model, &reply)));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return resp;
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    let frames = frames(&id, model, &reply, include_usage);
    event_stream(stream::body(
        frames,
        Pace::Every(call.knobs.token_delay),
        &call,
        shared.shutdown.clone(),
    ))
}

fn event_stream(body: Body) -> Response {
    let mut resp = Response::new(body);
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// `/v1/chat/completions` on a realistic machine: Ollama's OpenAI routes go through the
/// same scheduler, with the default context window and keep-alive.
async fn realistic_chat(
    shared: &Arc<Shared>,
    call: &Call,
    model: &Model,
    req: ChatBody,
    prompt: Prompt,
) -> Response {
    let api = Api::OpenAi;
    let Some(sim) = shared.sim.as_ref() else {
        let status = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
        return api.error(status, "not a realistic machine");
    };
    let id = format!("chatcmpl-fake-{}", call.seq);
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let stream = req.stream;
    let ask = Ask {
        messages: req
            .messages
            .iter()
            .map(|m| SimMessage {
                role: m.role.clone(),
                text: text(&m.content),
            })
            .collect(),
        num_ctx: None,
        keep_alive: None,
    };
    let (mut run, reply) = match api.realistic(shared, sim, call, model, ask, prompt).await {
        Ok(started) => started,
        Err(refusal) => return *refusal,
    };
    if !stream {
        if let Some(resp) = api.whole_answer_fault(shared, call).await {
            return resp;
        }
        if !gate::generate_whole(&mut run, reply.completion_tokens(), shared).await {
            return stream::dropped();
        }
        let mut resp = Response::new(Body::from(completion(&id, model, &reply)));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return resp;
    }
    let frames = frames(&id, model, &reply, include_usage);
    if !frames.tokens.is_empty() && !run.until_due(0, &shared.shutdown).await {
        return stream::dropped();
    }
    event_stream(stream::body(
        frames,
        Pace::Simulated(Box::new(run)),
        call,
        shared.shutdown.clone(),
    ))
}

#[derive(Serialize)]
struct UsageOut {
    prompt_tokens: u32,
    completion_tokens: u32,
    total_tokens: u32,
}

fn usage(reply: &Reply) -> UsageOut {
    let completion_tokens = reply.completion_tokens();
    UsageOut {
        prompt_tokens: reply.prompt_tokens,
        completion_tokens,
        total_tokens: reply.prompt_tokens.saturating_add(completion_tokens),
    }
}

fn finish_reason(reply: &Reply) -> &'static str {
    match reply.finish {
        Finish::Stop => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
    }
}

fn call_id(id: &str) -> String {
    format!("call_{}_0", id.trim_start_matches("chatcmpl-fake-"))
}

#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [CompletionChoice<'a>; 1],
    usage: UsageOut,
}

#[derive(Serialize)]
struct CompletionChoice<'a> {
    index: u32,
    message: OutMessage<'a>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<FullCall<'a>>,
}

#[derive(Serialize)]
struct FullCall<'a> {
    id: String,
    r#type: &'static str,
    function: FullFunction<'a>,
}

#[derive(Serialize)]
struct FullFunction<'a> {
    name: &'a str,
    arguments: String,
}

fn completion(id: &str, model: &Model, reply: &Reply) -> Vec<u8> {
    let tool_calls: Vec<FullCall<'_>> = reply
        .tool_call
        .iter()
        .map(|c| FullCall {
            id: call_id(id),
            r#type: "function",
            function: FullFunction {
                name: &c.name,
                arguments: c.arguments.to_string(),
            },
        })
        .collect();
    to_vec(&Completion {
        id,
        object: "chat.completion",
        created: CREATED,
        model: &model.spec.name,
        choices: [CompletionChoice {
            index: 0,
            message: OutMessage {
                role: "assistant",
                content: tool_calls.is_empty().then_some(reply.content.as_str()),
                reasoning_content: (!reply.reasoning.is_empty())
                    .then_some(reply.reasoning.as_str()),
                tool_calls,
            },
            finish_reason: finish_reason(reply),
        }],
        usage: usage(reply),
    })
}

#[derive(Serialize)]
struct ChunkOut<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<ChoiceOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageOut>,
}

#[derive(Serialize)]
struct ChoiceOut<'a> {
    index: u32,
    delta: DeltaOut<'a>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize, Default)]
struct DeltaOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallDelta<'a>>,
}

#[derive(Serialize)]
struct CallDelta<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    r#type: Option<&'static str>,
    function: FunctionDelta<'a>,
}

#[derive(Serialize)]
struct FunctionDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

fn event(chunk: &ChunkOut<'_>) -> Bytes {
    let mut bytes = Vec::with_capacity(160);
    bytes.extend_from_slice(b"data: ");
    bytes.extend_from_slice(&to_vec(chunk));
    bytes.extend_from_slice(b"\n\n");
    Bytes::from(bytes)
}

/// Splits text into pieces of at most `max` bytes, on character boundaries.
fn pieces(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + max).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == start {
            end = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// Role chunk, one chunk per token (reasoning first), the tool call (name, then argument
/// pieces), the finish chunk, the usage chunk when asked for, and `[DONE]`.
fn frames(id: &str, model: &Model, reply: &Reply, include_usage: bool) -> Frames {
    let name = model.spec.name.as_str();
    let chunk = |delta: DeltaOut<'_>, finish_reason| {
        event(&ChunkOut {
            id,
            object: "chat.completion.chunk",
            created: CREATED,
            model: name,
            choices: vec![ChoiceOut {
                index: 0,
                delta,
                finish_reason,
            }],
            usage: None,
        })
    };
    let head = vec![chunk(
        DeltaOut {
            role: Some("assistant"),
            content: Some(""),
            ..DeltaOut::default()
        },
        None,
    )];
    let mut tokens: Vec<Bytes> = reply::tokens(&reply.reasoning)
        .map(|(_, t)| {
            let delta = DeltaOut {
                reasoning_content: Some(t),
                ..DeltaOut::default()
            };
            chunk(delta, None)
        })
        .chain(reply::tokens(&reply.content).map(|(_, t)| {
            let delta = DeltaOut {
                content: Some(t),
                ..DeltaOut::default()
            };
            chunk(delta, None)
        }))
        .collect();
    if let Some(call) = &reply.tool_call {
        let call_id = call_id(id);
        let arguments = call.arguments.to_string();
        let opening = CallDelta {
            index: 0,
            id: Some(&call_id),
            r#type: Some("function"),
            function: FunctionDelta {
                name: Some(&call.name),
                arguments: "",
            },
        };
        let mut deltas = vec![opening];
        deltas.extend(
            pieces(&arguments, ARGUMENT_PIECE)
                .into_iter()
                .map(|piece| CallDelta {
                    index: 0,
                    id: None,
                    r#type: None,
                    function: FunctionDelta {
                        name: None,
                        arguments: piece,
                    },
                }),
        );
        tokens.extend(deltas.into_iter().map(|d| {
            let delta = DeltaOut {
                tool_calls: vec![d],
                ..DeltaOut::default()
            };
            chunk(delta, None)
        }));
    }
    let mut tail = vec![chunk(DeltaOut::default(), Some(finish_reason(reply)))];
    if include_usage {
        tail.push(event(&ChunkOut {
            id,
            object: "chat.completion.chunk",
            created: CREATED,
            model: name,
            choices: Vec::new(),
            usage: Some(usage(reply)),
        }));
    }
    tail.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let error = serde_json::json!({
        "error": { "message": STREAM_ERROR, "type": "server_error", "param": null, "code": null }
    });
    let mut error_event = b"data: ".to_vec();
    error_event.extend_from_slice(&to_vec(&error));
    error_event.extend_from_slice(b"\n\n");
    Frames {
        head,
        tokens,
        tail,
        error: Bytes::from(error_event),
    }
}

// ---- embeddings ------------------------------------------------------------------------

async fn embeddings(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let (model, vectors, tokens) = match Api::OpenAi.embed(&shared, &body).await {
        Ok(done) => done,
        Err(refusal) => return *refusal,
    };
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, embedding)| {
            serde_json::json!({ "object": "embedding", "index": index, "embedding": embedding })
        })
        .collect();
    axum::Json(serde_json::json!({
        "object": "list",
        "data": data,
        "model": model.spec.name,
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    }))
    .into_response()
}
