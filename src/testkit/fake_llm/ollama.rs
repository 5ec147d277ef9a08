//! The fake's Ollama API: `/api/tags`, `/api/ps`, `/api/show`, `/api/version`,
//! `/api/chat` (NDJSON stream or one object) and `/api/embed`, with Ollama's error shape
//! `{"error":"..."}`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::gate::{self, Api, Ask, STREAM_ERROR};
use super::reply::{self, Finish, Last, Prompt, Reply, Timings};
use super::sim::{KeepAlive, SimMessage};
use super::stream::{self, Frames, Pace, to_vec};
use super::{Call, Model, Shared, lock};

/// The fixed timestamp of every record.
pub(crate) const CREATED_AT: &str = "2025-01-01T00:00:00Z";

pub(super) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/", get(|| async { "Ollama is running" }))
        .route("/api/version", get(version))
        .route("/api/tags", get(tags))
        .route("/api/ps", get(ps))
        .route("/api/show", post(show))
        .route("/api/chat", post(chat))
        .route("/api/embed", post(embed))
}

fn json_bytes(content_type: &'static str, bytes: Vec<u8>) -> Response {
    let mut resp = Response::new(Body::from(bytes));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

// ---- discovery -------------------------------------------------------------------------

#[derive(Serialize)]
struct Details<'a> {
    parent_model: &'static str,
    format: &'static str,
    family: &'a str,
    families: [&'a str; 1],
    parameter_size: String,
    quantization_level: &'static str,
}

fn details(name: &str) -> Details<'_> {
    let base = name.split(':').next().unwrap_or(name);
    let letters = base
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(base.len());
    let family = if letters == 0 { base } else { &base[..letters] };
    let parameter_size = name
        .split_once(':')
        .map(|(_, tag)| tag)
        .filter(|t| t.starts_with(|c: char| c.is_ascii_digit()) && t.ends_with(['b', 'B']))
        .map_or_else(|| "unknown".to_owned(), str::to_uppercase);
    Details {
        parent_model: "",
        format: "gguf",
        family,
        families: [family],
        parameter_size,
        quantization_level: "Q4_K_M",
    }
}

#[derive(Serialize)]
struct ModelList<T> {
    models: Vec<T>,
}

#[derive(Serialize)]
struct TagEntry<'a> {
    name: &'a str,
    model: &'a str,
    modified_at: &'static str,
    size: u64,
    digest: &'a str,
    details: Details<'a>,
}

#[derive(Serialize)]
struct PsEntry<'a> {
    name: &'a str,
    model: &'a str,
    size: u64,
    digest: &'a str,
    details: Details<'a>,
    expires_at: String,
    size_vram: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_length: Option<u32>,
}

async fn version() -> Response {
    axum::Json(serde_json::json!({ "version": "0.12.6" })).into_response()
}

async fn tags(State(shared): State<Arc<Shared>>) -> Response {
    let models: Vec<TagEntry<'_>> = shared
        .models
        .iter()
        .map(|m| TagEntry {
            name: &m.spec.name,
            model: &m.spec.name,
            modified_at: CREATED_AT,
            size: m.spec.size,
            digest: &m.digest,
            details: details(&m.spec.name),
        })
        .collect();
    axum::Json(ModelList { models }).into_response()
}

/// In the realistic mode, the resident models (most recently used first) with their
/// expiry on the wall clock (a model kept forever some 292 years on, as in Ollama);
/// otherwise the models used since start count as loaded, expiring five minutes after
/// their last use.
async fn ps(State(shared): State<Arc<Shared>>) -> Response {
    if lock(&shared.live).knobs.ps_fails {
        return Api::Ollama.error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the fake's /api/ps fails",
        );
    }
    fn entry(m: &Model, expires_at: String, context_length: Option<u32>) -> PsEntry<'_> {
        PsEntry {
            name: &m.spec.name,
            model: &m.spec.name,
            size: m.spec.size,
            digest: &m.digest,
            details: details(&m.spec.name),
            expires_at,
            size_vram: m.spec.size,
            context_length,
        }
    }
    let resident = shared.sim.as_ref().map(|sim| sim.resident());
    let models: Vec<PsEntry<'_>> = match &resident {
        Some(resident) => resident
            .iter()
            .filter_map(|r| {
                let m = shared.model(&r.model)?;
                // A model kept forever: Ollama holds Go's largest duration and shows
                // its expiry that far ahead (some 292 years).
                let left = r
                    .expires_in
                    .map_or(chrono::Duration::nanoseconds(i64::MAX), |d| {
                        chrono::Duration::from_std(d).unwrap_or_default()
                    });
                let expires_at =
                    (shared.now() + left).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                Some(entry(m, expires_at, Some(r.num_ctx)))
            })
            .collect(),
        None => shared
            .models
            .iter()
            .filter(|m| m.loaded.load(Ordering::Relaxed))
            .map(|m| {
                let at = m.expires_at() + shared.clock_ahead;
                entry(
                    m,
                    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    None,
                )
            })
            .collect(),
    };
    axum::Json(ModelList { models }).into_response()
}

#[derive(Deserialize)]
struct ShowBody {
    model: Option<String>,
    /// The older spelling.
    name: Option<String>,
}

async fn show(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let name = match Api::Ollama.parse::<ShowBody>(&body) {
        Ok(b) => b.model.or(b.name).unwrap_or_default(),
        Err(refusal) => return *refusal,
    };
    let Some(model) = shared.model(&name) else {
        let message = format!("model '{name}' not found");
        return Api::Ollama.error(StatusCode::NOT_FOUND, &message);
    };
    let mut capabilities = vec!["completion"];
    if model.spec.tools {
        capabilities.push("tools");
    }
    let d = details(&model.spec.name);
    axum::Json(serde_json::json!({
        "modelfile": format!("# fake-llm\nFROM {}\n", model.spec.name),
        "parameters": "",
        "template": "{{ .Prompt }}",
        "details": d,
        "model_info": {
            "general.architecture": d.family,
            format!("{}.context_length", d.family): model.spec.context_length,
        },
        "capabilities": capabilities,
        "modified_at": CREATED_AT,
    }))
    .into_response()
}

// ---- chat ------------------------------------------------------------------------------

#[derive(Deserialize)]
struct ChatBody {
    model: String,
    #[serde(default)]
    messages: Vec<InMessage>,
    stream: Option<bool>,
    tools: Option<Vec<Value>>,
    options: Option<InOptions>,
    keep_alive: Option<Value>,
}

#[derive(Deserialize)]
struct InMessage {
    role: String,
    content: Option<String>,
    tool_name: Option<String>,
}

#[derive(Deserialize)]
struct InOptions {
    num_predict: Option<i64>,
    num_ctx: Option<i64>,
}

impl ChatBody {
    fn prompt(&self) -> Prompt {
        let last = match self.messages.last() {
            Some(m) if m.role == "user" => Last::User(m.content.clone().unwrap_or_default()),
            Some(m) if m.role == "tool" => Last::ToolResult {
                name: m.tool_name.clone().unwrap_or_else(|| "tool".to_owned()),
                content: m.content.clone().unwrap_or_default(),
            },
            _ => Last::Other,
        };
        Prompt {
            last,
            prompt_tokens: reply::count_words(
                self.messages.iter().filter_map(|m| m.content.as_deref()),
            ),
            tools: reply::tool_names(self.tools.as_ref()),
            max_tokens: self
                .options
                .as_ref()
                .and_then(|o| o.num_predict)
                .and_then(|n| usize::try_from(n).ok()),
        }
    }
}

async fn chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let api = Api::Ollama;
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
    let stream = req.stream.unwrap_or(true);
    if shared.sim.is_some() {
        return realistic_chat(&shared, &call, model, req, prompt).await;
    }
    if req.messages.is_empty() {
        // Ollama loads the model and answers with one `load` record.
        let timings = reply::timings(&Reply::empty(), call.knobs.token_delay);
        let line = done_record(model, &Reply::empty(), "load", timings);
        return json_bytes(content_type(stream), line);
    }
    let reply = reply::plan(
        model,
        prompt,
        call.script.as_deref(),
        call.knobs.tokens,
        None,
        call.knobs.answers,
    );
    let timings = reply::timings(&reply, call.knobs.token_delay);
    if !stream {
        if let Some(resp) = api.whole_answer_fault(&shared, &call).await {
            return resp;
        }
        return json_bytes(content_type(false), whole_record(model, &reply, timings));
    }
    let frames = frames(model, &reply, timings);
    ndjson(stream::body(
        frames,
        Pace::Every(call.knobs.token_delay),
        &call,
        shared.shutdown.clone(),
    ))
}

fn ndjson(body: Body) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    resp
}

/// `/api/chat` on a realistic machine: waits for admission, the load and prompt
/// processing before the first byte (as Ollama does), then paces the tokens.
async fn realistic_chat(
    shared: &Arc<Shared>,
    call: &Call,
    model: &Model,
    req: ChatBody,
    prompt: Prompt,
) -> Response {
    let Some(sim) = shared.sim.as_ref() else {
        return Api::Ollama.error(StatusCode::INTERNAL_SERVER_ERROR, "not a realistic machine");
    };
    let stream = req.stream.unwrap_or(true);
    let keep_alive = req.keep_alive.as_ref().and_then(KeepAlive::parse);
    if req.messages.is_empty()
        && keep_alive.and_then(KeepAlive::lasts) == Some(std::time::Duration::ZERO)
    {
        // `keep_alive: 0` with no messages unloads the model.
        sim.unload(&model.spec.name);
        let line = done_record(model, &Reply::empty(), "unload", Timings::default());
        return json_bytes(content_type(stream), line);
    }
    let load_only = req.messages.is_empty();
    let ask = Ask {
        messages: req
            .messages
            .into_iter()
            .map(|m| SimMessage {
                role: m.role,
                text: m.content.unwrap_or_default(),
            })
            .collect(),
        num_ctx: req
            .options
            .as_ref()
            .and_then(|o| o.num_ctx)
            .and_then(|n| u32::try_from(n).ok()),
        keep_alive,
    };
    let (mut run, reply) = match Api::Ollama
        .realistic(shared, sim, call, model, ask, prompt)
        .await
    {
        Ok(started) => started,
        Err(refusal) => return *refusal,
    };
    if load_only {
        // Ollama loads the model and answers with one `load` record.
        let line = done_record(model, &Reply::empty(), "load", run.timings(0));
        return json_bytes(content_type(stream), line);
    }
    if !stream {
        if let Some(resp) = Api::Ollama.whole_answer_fault(shared, call).await {
            return resp;
        }
        if !gate::generate_whole(&mut run, reply.completion_tokens(), shared).await {
            return stream::dropped();
        }
        let timings = run.timings(run.total);
        return json_bytes(content_type(false), whole_record(model, &reply, timings));
    }
    // One frame per generated token (and one for a tool call): the completion count.
    let count = reply.completion_tokens();
    let frames = frames(model, &reply, run.timings(count));
    if count > 0 && !run.until_due(0, &shared.shutdown).await {
        return stream::dropped();
    }
    ndjson(stream::body(
        frames,
        Pace::Simulated(Box::new(run)),
        call,
        shared.shutdown.clone(),
    ))
}

fn content_type(stream: bool) -> &'static str {
    if stream {
        "application/x-ndjson"
    } else {
        "application/json; charset=utf-8"
    }
}

#[derive(Serialize)]
struct Record<'a> {
    model: &'a str,
    created_at: &'static str,
    message: OutMessage<'a>,
    done: bool,
    #[serde(flatten)]
    metrics: Option<Metrics>,
}

#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutCall<'a>>,
}

#[derive(Serialize)]
struct OutCall<'a> {
    function: OutFunction<'a>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    name: &'a str,
    arguments: &'a Value,
}

/// What a final record (of `/api/chat` and `/api/generate`) adds.
#[derive(Serialize)]
pub(super) struct Metrics {
    done_reason: &'static str,
    total_duration: u64,
    load_duration: u64,
    prompt_eval_count: u32,
    prompt_eval_duration: u64,
    eval_count: u32,
    eval_duration: u64,
}

pub(super) fn metrics(reply: &Reply, done_reason: &'static str, t: Timings) -> Metrics {
    Metrics {
        done_reason,
        total_duration: t.total,
        load_duration: t.load,
        prompt_eval_count: reply.prompt_tokens,
        prompt_eval_duration: t.prompt_eval,
        eval_count: reply.completion_tokens(),
        eval_duration: t.eval,
    }
}

pub(super) fn done_reason(reply: &Reply) -> &'static str {
    match reply.finish {
        Finish::Length => "length",
        Finish::Stop | Finish::ToolCalls => "stop",
    }
}

fn calls(reply: &Reply) -> Vec<OutCall<'_>> {
    reply
        .tool_call
        .iter()
        .map(|c| OutCall {
            function: OutFunction {
                name: &c.name,
                arguments: &c.arguments,
            },
        })
        .collect()
}

fn line(record: &Record<'_>) -> Bytes {
    let mut bytes = to_vec(record);
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn message<'a>(content: &'a str, thinking: Option<&'a str>) -> OutMessage<'a> {
    OutMessage {
        role: "assistant",
        content,
        thinking,
        tool_calls: Vec::new(),
    }
}

fn done_record(model: &Model, reply: &Reply, reason: &'static str, timings: Timings) -> Vec<u8> {
    to_vec(&Record {
        model: &model.spec.name,
        created_at: CREATED_AT,
        message: message("", None),
        done: true,
        metrics: Some(metrics(reply, reason, timings)),
    })
}

fn whole_record(model: &Model, reply: &Reply, timings: Timings) -> Vec<u8> {
    let thinking = (!reply.reasoning.is_empty()).then_some(reply.reasoning.as_str());
    let mut msg = message(&reply.content, thinking);
    msg.tool_calls = calls(reply);
    to_vec(&Record {
        model: &model.spec.name,
        created_at: CREATED_AT,
        message: msg,
        done: true,
        metrics: Some(metrics(reply, done_reason(reply), timings)),
    })
}

/// One NDJSON line per token (thinking first), one for the tool call, then the `done` line.
fn frames(model: &Model, reply: &Reply, timings: Timings) -> Frames {
    let name = model.spec.name.as_str();
    let record = |message| Record {
        model: name,
        created_at: CREATED_AT,
        message,
        done: false,
        metrics: None,
    };
    let mut tokens: Vec<Bytes> = reply::tokens(&reply.reasoning)
        .map(|(_, t)| line(&record(message("", Some(t)))))
        .chain(reply::tokens(&reply.content).map(|(_, t)| line(&record(message(t, None)))))
        .collect();
    if reply.tool_call.is_some() {
        let mut msg = message("", None);
        msg.tool_calls = calls(reply);
        tokens.push(line(&record(msg)));
    }
    let mut done = done_record(model, reply, done_reason(reply), timings);
    done.push(b'\n');
    let mut error = to_vec(&serde_json::json!({ "error": STREAM_ERROR }));
    error.push(b'\n');
    Frames {
        head: Vec::new(),
        tokens,
        tail: vec![Bytes::from(done)],
        error: Bytes::from(error),
    }
}

// ---- embeddings ------------------------------------------------------------------------

async fn embed(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let (model, embeddings, prompt_eval_count) = match Api::Ollama.embed(&shared, &body).await {
        Ok(done) => done,
        Err(refusal) => return *refusal,
    };
    axum::Json(serde_json::json!({
        "model": model.spec.name,
        "embeddings": embeddings,
        "total_duration": 2_000_000u64,
        "load_duration": 1_000_000u64,
        "prompt_eval_count": prompt_eval_count,
    }))
    .into_response()
}
