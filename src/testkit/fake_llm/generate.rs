//! The fake's text completions: Ollama's `POST /api/generate` (NDJSON records with
//! `response`, or one object) and OpenAI's legacy `POST /v1/completions`
//! (`text_completion`, whole or an SSE stream ending in `data: [DONE]`).
//!
//! The reply follows the chat rules, with the prompt as the last user message; a
//! `suffix` shows in it as ` [suffix: <suffix>]` after the prompt, so a test sees that it
//! arrived. As Ollama does, `raw` with a `system` is refused and an empty prompt only
//! loads the model. The realistic mode's pacing is not applied here.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::gate::{Api, STREAM_ERROR};
use super::ollama::{CREATED_AT, Metrics, done_reason, metrics};
use super::openai::CREATED;
use super::reply::{self, Last, Prompt, Reply, Timings};
use super::stream::{self, Frames, Pace, to_vec};
use super::{Call, Model, Shared};

pub(super) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/api/generate", post(generate))
        .route("/v1/completions", post(completions))
}

fn with_type(body: Body, content_type: &'static str) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// The reply to a prompt (and suffix), by the chat rules.
fn plan(model: &Model, call: &Call, prompt: &str, suffix: Option<&str>, max: Option<i64>) -> Reply {
    let text = match suffix {
        Some(s) if !s.is_empty() => format!("{prompt} [suffix: {s}]"),
        _ => prompt.to_owned(),
    };
    let prompt = Prompt {
        prompt_tokens: reply::count_words(std::iter::once(text.as_str())),
        last: Last::User(text),
        tools: Vec::new(),
        max_tokens: max.and_then(|n| usize::try_from(n).ok()),
    };
    reply::plan(
        model,
        prompt,
        call.script.as_deref(),
        call.knobs.tokens,
        None,
        call.knobs.answers,
    )
}

// ---- Ollama ----------------------------------------------------------------------------

#[derive(Deserialize)]
struct GenerateBody {
    model: String,
    #[serde(default)]
    prompt: String,
    suffix: Option<String>,
    system: Option<String>,
    stream: Option<bool>,
    #[serde(default)]
    raw: bool,
    options: Option<GenerateOptions>,
}

#[derive(Deserialize)]
struct GenerateOptions {
    num_predict: Option<i64>,
}

#[derive(Serialize)]
struct Record<'a> {
    model: &'a str,
    created_at: &'static str,
    response: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
    done: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    metrics: Option<Metrics>,
}

fn record<'a>(model: &'a str, response: &'a str, thinking: Option<&'a str>) -> Record<'a> {
    Record {
        model,
        created_at: CREATED_AT,
        response,
        thinking,
        done: false,
        metrics: None,
    }
}

fn line(value: &impl Serialize) -> Bytes {
    let mut bytes = to_vec(value);
    bytes.push(b'\n');
    Bytes::from(bytes)
}

async fn generate(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let api = Api::Ollama;
    let req: GenerateBody = match api.parse(&body) {
        Ok(r) => r,
        Err(refusal) => return *refusal,
    };
    if req.raw && req.system.as_deref().is_some_and(|s| !s.is_empty()) {
        let message = "raw mode does not support template, system, or context";
        return api.error(StatusCode::BAD_REQUEST, message);
    }
    let (call, model) = match api.admit(&shared, &req.model, true).await {
        Ok(admitted) => admitted,
        Err(refusal) => return *refusal,
    };
    let name = model.spec.name.as_str();
    let stream = req.stream.unwrap_or(true);
    let content_type = if stream {
        "application/x-ndjson"
    } else {
        "application/json; charset=utf-8"
    };
    if req.prompt.is_empty() {
        let mut load = record(name, "", None);
        load.done = true;
        load.metrics = Some(metrics(&Reply::empty(), "load", Timings::default()));
        return with_type(Body::from(to_vec(&load)), content_type);
    }
    let max = req.options.as_ref().and_then(|o| o.num_predict);
    let reply = plan(model, &call, &req.prompt, req.suffix.as_deref(), max);
    let timings = reply::timings(&reply, call.knobs.token_delay);
    let thinking = (!reply.reasoning.is_empty()).then_some(reply.reasoning.as_str());
    if !stream {
        if let Some(resp) = api.whole_answer_fault(&shared, &call).await {
            return resp;
        }
        let mut whole = record(name, &reply.content, thinking);
        whole.done = true;
        whole.metrics = Some(metrics(&reply, done_reason(&reply), timings));
        return with_type(Body::from(to_vec(&whole)), content_type);
    }
    let tokens = reply::tokens(&reply.reasoning)
        .map(|(_, t)| line(&record(name, "", Some(t))))
        .chain(reply::tokens(&reply.content).map(|(_, t)| line(&record(name, t, None))))
        .collect();
    let mut done = record(name, "", None);
    done.done = true;
    done.metrics = Some(metrics(&reply, done_reason(&reply), timings));
    let frames = Frames {
        head: Vec::new(),
        tokens,
        tail: vec![line(&done)],
        error: line(&serde_json::json!({ "error": STREAM_ERROR })),
    };
    let body = stream::body(
        frames,
        Pace::Every(call.knobs.token_delay),
        &call,
        shared.shutdown.clone(),
    );
    with_type(body, content_type)
}

// ---- OpenAI ----------------------------------------------------------------------------

#[derive(Deserialize)]
struct CompletionBody {
    model: String,
    prompt: Value,
    suffix: Option<String>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<i64>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Serialize)]
struct TextCompletion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<TextChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct TextChoice<'a> {
    text: &'a str,
    index: u32,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: u32,
    completion_tokens: u32,
    total_tokens: u32,
}

fn usage(reply: &Reply) -> Usage {
    let completion_tokens = reply.completion_tokens();
    Usage {
        prompt_tokens: reply.prompt_tokens,
        completion_tokens,
        total_tokens: reply.prompt_tokens.saturating_add(completion_tokens),
    }
}

fn event(value: &impl Serialize) -> Bytes {
    let mut bytes = b"data: ".to_vec();
    bytes.extend_from_slice(&to_vec(value));
    bytes.extend_from_slice(b"\n\n");
    Bytes::from(bytes)
}

async fn completions(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let api = Api::OpenAi;
    let req: CompletionBody = match api.parse(&body) {
        Ok(r) => r,
        Err(refusal) => return *refusal,
    };
    let prompt = match &req.prompt {
        Value::String(s) => s.clone(),
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => return api.error(StatusCode::BAD_REQUEST, "prompt must be a string"),
    };
    let (call, model) = match api.admit(&shared, &req.model, true).await {
        Ok(admitted) => admitted,
        Err(refusal) => return *refusal,
    };
    let reply = plan(model, &call, &prompt, req.suffix.as_deref(), req.max_tokens);
    let id = format!("cmpl-fake-{}", call.seq);
    let name = model.spec.name.as_str();
    let finish = done_reason(&reply);
    let body = |choices, usage| TextCompletion {
        id: &id,
        object: "text_completion",
        created: CREATED,
        model: name,
        choices,
        usage,
    };
    let choice = |text, finish_reason| TextChoice {
        text,
        index: 0,
        logprobs: None,
        finish_reason,
    };
    if !req.stream {
        if let Some(resp) = api.whole_answer_fault(&shared, &call).await {
            return resp;
        }
        let whole = body(
            vec![choice(&reply.content, Some(finish))],
            Some(usage(&reply)),
        );
        return with_type(Body::from(to_vec(&whole)), "application/json");
    }
    let tokens = reply::tokens(&reply.content)
        .map(|(_, t)| event(&body(vec![choice(t, None)], None)))
        .collect();
    let mut tail = vec![event(&body(vec![choice("", Some(finish))], None))];
    if req.stream_options.is_some_and(|o| o.include_usage) {
        tail.push(event(&body(Vec::new(), Some(usage(&reply)))));
    }
    tail.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let error = serde_json::json!({ "error": { "message": STREAM_ERROR, "type": "server_error" } });
    let frames = Frames {
        head: Vec::new(),
        tokens,
        tail,
        error: event(&error),
    };
    let body = stream::body(
        frames,
        Pace::Every(call.knobs.token_delay),
        &call,
        shared.shutdown.clone(),
    );
    with_type(body, "text/event-stream")
}
