//! The Ollama client: model discovery (`/api/tags`, `/api/show`, `/api/ps`), streamed
//! chat over `/api/chat` (NDJSON) and text completions over `/api/generate`, mapped to and
//! from the internal chat model.
//!
//! Workers reach it through [`super::Backend`]; transport and error mapping live in
//! [`super::wire`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::clock::{self, ClockOffset};
use super::registry::lock;
use super::wire::{self, Decoder, WireError};
use super::{BackendError, BackendRequest, ChunkStream, ClientSettings, Loaded, ModelInfo};
use crate::chat::{
    AnswerFormat, BackendTimings, ChatMessage, Chunk, FinishReason, Role, SamplingParams, Think,
    ToolCall, ToolChoice, ToolSpec, Usage,
};
use crate::domain::ModelName;

/// How many `/api/show` calls run at once during discovery.
const SHOW_CONCURRENCY: usize = 8;

#[derive(Debug, Clone)]
pub struct OllamaClient {
    settings: ClientSettings,
    http: reqwest::Client,
    urls: Urls,
    /// How far the machine's clock reads from this one's (from `/api/ps`'s `Date`s).
    clock: Arc<Mutex<ClockOffset>>,
}

#[derive(Debug, Clone)]
struct Urls {
    tags: Url,
    show: Url,
    ps: Url,
    chat: Url,
    generate: Url,
    embed: Url,
}

impl OllamaClient {
    pub fn new(settings: ClientSettings) -> anyhow::Result<Self> {
        let http = wire::http_client(&settings)?;
        let urls = Urls {
            tags: wire::endpoint(&settings, "api/tags")?,
            show: wire::endpoint(&settings, "api/show")?,
            ps: wire::endpoint(&settings, "api/ps")?,
            chat: wire::endpoint(&settings, "api/chat")?,
            generate: wire::endpoint(&settings, "api/generate")?,
            embed: wire::endpoint(&settings, "api/embed")?,
        };
        Ok(Self {
            settings,
            http,
            urls,
            clock: Arc::default(),
        })
    }

    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// `GET /api/tags` (names and sizes), then `POST /api/show` per model to learn whether
    /// it takes tools and its window (`model_info.<arch>.context_length`). A failed `show`
    /// leaves both unknown instead of failing the list.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, BackendError> {
        let url = &self.urls.tags;
        let tags: ModelList = wire::look_json(&self.settings, url, self.get(url)).await?;
        let named: Vec<(ModelName, Option<u64>)> = tags
            .models
            .iter()
            .filter_map(|m| Some((m.name()?, m.size.filter(|b| *b > 0))))
            .collect();
        let infos = futures::stream::iter(named)
            .map(|(name, size)| async move {
                let (tools, context_length) = self.show(&name).await;
                ModelInfo {
                    name,
                    tools,
                    context_length,
                    size,
                }
            })
            .buffered(SHOW_CONCURRENCY)
            .collect()
            .await;
        Ok(infos)
    }

    /// `GET /api/ps`: the models loaded in memory right now, with the window each was
    /// loaded with and its expiry on this machine's clock (the answer's `Date` tells how
    /// far the server's clock reads from it: see [`super::clock`]).
    pub async fn loaded_models(&self) -> Result<Vec<Loaded>, BackendError> {
        let url = &self.urls.ps;
        let sent = chrono::Utc::now();
        let (ps, date): (ModelList, _) =
            wire::look_json_with(&self.settings, url, self.get(url), |resp| {
                resp.headers()
                    .get(reqwest::header::DATE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(clock::parse_http_date)
            })
            .await?;
        let offset = match date {
            Some(date) => self.observe_clock(date, sent, chrono::Utc::now()),
            None => self.clock_ahead(),
        }
        .unwrap_or_default();
        Ok(ps
            .models
            .iter()
            .filter_map(|m| {
                Some(Loaded {
                    model: m.name()?,
                    num_ctx: m.context_length,
                    expires_at: m
                        .expires_at
                        .as_deref()
                        .and_then(parse_expiry)
                        .and_then(|at| at.checked_sub_signed(offset)),
                })
            })
            .collect())
    }

    /// How far the machine's clock reads ahead of this one's (negative: behind), as the
    /// `Date`s of its answers to `/api/ps` tell; `None` before the first.
    pub fn clock_ahead(&self) -> Option<chrono::TimeDelta> {
        lock(&self.clock).offset()
    }

    /// Takes in one answer's `Date` (see [`ClockOffset::observe`]) and returns the offset
    /// now; says so in the log when the clocks come to differ by more than a second, or
    /// to agree again.
    fn observe_clock(
        &self,
        date: chrono::DateTime<chrono::Utc>,
        sent: chrono::DateTime<chrono::Utc>,
        received: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::TimeDelta> {
        let (before, after) = {
            let mut clock = lock(&self.clock);
            let before = clock.offset();
            clock.observe(date, chrono::TimeDelta::seconds(1), sent, received);
            (before, clock.offset())
        };
        match clock::crossed_a_second(before, after) {
            Some(true) => tracing::warn!(
                backend = %self.settings.name,
                "the machine's clock reads {} this one's; Coordinator reads its models' expiries on its own clock",
                clock::describe(after.unwrap_or_default())
            ),
            Some(false) => tracing::info!(
                backend = %self.settings.name,
                "the machine's clock agrees with this one's again"
            ),
            None => {}
        }
        after
    }

    /// `POST /api/chat` (or `/api/generate`) with `stream: false`, for a client that wants the whole answer:
    /// one record holding all of it instead of a line per token. Waits up to the answer
    /// timeout for it.
    pub async fn complete(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        let (url, builder) = self.post_turn(req, false);
        let resp = wire::send_whole(&self.settings, url, builder).await?;
        // The whole answer is the stream's final record alone.
        wire::decode_stream(&self.settings, resp, NdjsonDecoder::default()).await
    }

    /// The request for one turn: `POST /api/chat`, or `POST /api/generate` for a text
    /// completion (see [`generate`]).
    fn post_turn(&self, req: &BackendRequest, stream: bool) -> (&Url, reqwest::RequestBuilder) {
        let (url, post) = match &req.params.text {
            Some(form) => {
                let url = &self.urls.generate;
                let body = generate::GenerateRequest::from_request(req, form, stream);
                (url, self.http.post(url.clone()).json(&body))
            }
            None => {
                let url = &self.urls.chat;
                let mut body = ChatRequest::from_request(req);
                body.stream = stream;
                (url, self.http.post(url.clone()).json(&body))
            }
        };
        (url, wire::authorize(&self.settings, post))
    }

    /// `POST /api/chat` (or `/api/generate`) with `stream: true`; resolves once the first
    /// chunk has arrived.
    pub async fn chat(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        let (url, builder) = self.post_turn(req, true);
        let resp = wire::send(&self.settings, url, builder).await?;
        wire::decode_stream(&self.settings, resp, NdjsonDecoder::default()).await
    }

    /// `POST /api/embed` `{"model","input":[...]}`: one vector per input, in order.
    pub async fn embed(
        &self,
        model: &ModelName,
        inputs: &[String],
        dimensions: Option<u32>,
    ) -> Result<Vec<Vec<f32>>, BackendError> {
        #[derive(Deserialize)]
        struct EmbedResponse {
            embeddings: Vec<Vec<f32>>,
        }
        let url = &self.urls.embed;
        let mut body = serde_json::json!({ "model": model.as_str(), "input": inputs });
        if let Some(n) = dimensions {
            body["dimensions"] = n.into();
        }
        let builder = wire::authorize(&self.settings, self.http.post(url.clone())).json(&body);
        let resp: EmbedResponse = wire::fetch_json(&self.settings, url, builder).await?;
        wire::check_embedding_count(&self.settings, inputs.len(), resp.embeddings)
    }

    fn get(&self, url: &Url) -> reqwest::RequestBuilder {
        wire::authorize(&self.settings, self.http.get(url.clone()))
    }

    /// `POST /api/show` as the machine answers it, for a client that asked Coordinator.
    pub async fn show_json(&self, model: &ModelName) -> Result<Value, BackendError> {
        let url = &self.urls.show;
        let builder = wire::authorize(&self.settings, self.http.post(url.clone()))
            .json(&serde_json::json!({ "model": model.as_str() }));
        wire::look_json(&self.settings, url, builder).await
    }

    /// `POST /api/show`: whether the model takes tools, and its window.
    async fn show(&self, model: &ModelName) -> (Option<bool>, Option<u32>) {
        let url = &self.urls.show;
        let builder = wire::authorize(&self.settings, self.http.post(url.clone()))
            .json(&serde_json::json!({ "model": model.as_str() }));
        match wire::look_json::<ShowResponse>(&self.settings, url, builder).await {
            Ok(show) => (
                show.capabilities
                    .as_ref()
                    .map(|caps| caps.iter().any(|c| c == "tools")),
                show.context_length(),
            ),
            Err(e) => {
                tracing::debug!(backend = %self.settings.name, model = %model, error = %e, "api/show failed; tools capability and window unknown");
                (None, None)
            }
        }
    }
}

#[derive(Deserialize)]
struct ModelList {
    #[serde(default)]
    models: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    model: Option<String>,
    name: Option<String>,
    /// `/api/ps`: the window the resident model was loaded with.
    context_length: Option<u32>,
    /// Bytes of the model's weights (both lists).
    size: Option<u64>,
    /// `/api/ps`: when the resident model is unloaded unless used meanwhile (RFC 3339,
    /// in the server's time zone).
    expires_at: Option<String>,
}

/// An `/api/ps` `expires_at` (RFC 3339 with any offset and fraction) in UTC; `None` when
/// it does not parse or is Go's zero time (year 1), which says nothing.
pub(crate) fn parse_expiry(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::Datelike;
    let at = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?;
    (at.year() > 1).then(|| at.with_timezone(&chrono::Utc))
}

impl ModelEntry {
    fn name(&self) -> Option<ModelName> {
        let raw = self.model.as_deref().or(self.name.as_deref())?;
        ModelName::parse(raw).ok()
    }
}

#[derive(Deserialize)]
struct ShowResponse {
    capabilities: Option<Vec<String>>,
    #[serde(default)]
    model_info: serde_json::Map<String, Value>,
}

impl ShowResponse {
    /// `model_info["<arch>.context_length"]`, the architecture named by
    /// `general.architecture` (else the only `*.context_length` key).
    fn context_length(&self) -> Option<u32> {
        let read = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
        let arch = self
            .model_info
            .get("general.architecture")
            .and_then(Value::as_str);
        if let Some(v) = arch.and_then(|a| self.model_info.get(&format!("{a}.context_length"))) {
            return read(v);
        }
        let mut found = self
            .model_info
            .iter()
            .filter(|(k, _)| k.ends_with(".context_length"));
        match (found.next(), found.next()) {
            (Some((_, v)), None) => read(v),
            _ => None,
        }
    }
}

// ---- request mapping -------------------------------------------------------------------

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Options::is_empty")]
    options: Options<'a>,
    /// `"json"` or a JSON schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keep_alive: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    think: Option<&'a Think>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    images: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
struct OutToolCall<'a> {
    function: OutFunction<'a>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    name: &'a str,
    /// Ollama wants the arguments as a JSON object, not as text.
    arguments: Value,
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    function: &'a ToolSpec,
}

#[derive(Serialize, Default)]
struct Options<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_predict: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_ctx: Option<u32>,
}

impl<'a> Options<'a> {
    fn from_params(p: &'a SamplingParams) -> Self {
        Self {
            temperature: p.temperature,
            top_p: p.top_p,
            num_predict: p.max_tokens,
            stop: &p.stop,
            seed: p.seed,
            num_ctx: p.num_ctx,
        }
    }

    fn is_empty(&self) -> bool {
        self.temperature.is_none()
            && self.top_p.is_none()
            && self.num_predict.is_none()
            && self.stop.is_empty()
            && self.seed.is_none()
            && self.num_ctx.is_none()
    }
}

impl<'a> ChatRequest<'a> {
    fn from_request(req: &'a BackendRequest) -> Self {
        let p = &req.params;
        Self {
            model: req.model.as_str(),
            messages: req
                .messages
                .iter()
                .map(|m| Message::from_chat(m, &req.messages))
                .collect(),
            stream: true,
            // Ollama has no `tool_choice`: a named function is the only tool it is shown;
            // `required` cannot be asked for and is left to the model.
            tools: req
                .tools
                .iter()
                .filter(|t| match &p.tool_choice {
                    Some(ToolChoice::Function { name }) => &t.name == name,
                    _ => true,
                })
                .map(|t| Tool {
                    r#type: "function",
                    function: t,
                })
                .collect(),
            options: Options::from_params(p),
            format: format(p),
            keep_alive: p.keep_alive.as_ref(),
            think: p.think.as_ref(),
        }
    }
}

/// `format`: `"json"` or the schema itself.
fn format(p: &SamplingParams) -> Option<Value> {
    p.format.as_ref().map(|f| match f {
        AnswerFormat::Json => Value::from("json"),
        AnswerFormat::JsonSchema { schema, .. } => schema.clone(),
    })
}

impl<'a> Message<'a> {
    fn from_chat(m: &'a ChatMessage, history: &'a [ChatMessage]) -> Self {
        let tool_name = match m.role {
            Role::Tool => m
                .name
                .as_deref()
                .or_else(|| tool_name_for(m.tool_call_id.as_deref()?, history)),
            _ => None,
        };
        Self {
            role: m.role.as_str(),
            content: &m.content,
            images: &m.images,
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| OutToolCall {
                    function: OutFunction {
                        name: &c.name,
                        arguments: arguments_object(&c.arguments),
                    },
                })
                .collect(),
            tool_name,
            tool_call_id: match m.role {
                Role::Tool => m.tool_call_id.as_deref(),
                _ => None,
            },
        }
    }
}

/// The name of the tool an earlier assistant message called with this id.
fn tool_name_for<'a>(id: &str, history: &'a [ChatMessage]) -> Option<&'a str> {
    history
        .iter()
        .flat_map(|m| &m.tool_calls)
        .find(|c| c.id == id)
        .map(|c| c.name.as_str())
}

/// Our arguments are JSON text; Ollama wants an object. Empty or non-object text
/// (which a model cannot have meant as arguments) becomes `{}`.
fn arguments_object(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Default::default()),
    }
}

// ---- response decoding -----------------------------------------------------------------

/// One NDJSON line of an `/api/chat` (or `/api/generate`) stream.
#[derive(Deserialize)]
struct Record {
    message: Option<RecordMessage>,
    /// `/api/generate`: the text, in place of `message.content`.
    response: Option<String>,
    /// `/api/generate`: the reasoning, in place of `message.thinking`.
    thinking: Option<String>,
    #[serde(default)]
    done: bool,
    done_reason: Option<String>,
    prompt_eval_count: Option<u32>,
    eval_count: Option<u32>,
    total_duration: Option<u64>,
    load_duration: Option<u64>,
    prompt_eval_duration: Option<u64>,
    eval_duration: Option<u64>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct RecordMessage {
    content: Option<String>,
    thinking: Option<String>,
    tool_calls: Option<Vec<InToolCall>>,
}

#[derive(Deserialize)]
struct InToolCall {
    id: Option<String>,
    function: InFunction,
}

#[derive(Deserialize)]
struct InFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

/// Decodes Ollama's NDJSON chat stream into chunks.
#[derive(Debug, Default)]
pub(super) struct NdjsonDecoder {
    calls_seen: usize,
    done: bool,
}

impl Decoder for NdjsonDecoder {
    fn line(&mut self, line: &str, out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        if line.trim().is_empty() {
            return Ok(());
        }
        let record: Record = serde_json::from_str(line)
            .map_err(|e| WireError::Protocol(format!("bad NDJSON line ({e}): {line:.200}")))?;
        if let Some(error) = record.error {
            return Err(WireError::MidStream(error));
        }
        if let Some(message) = record.message {
            self.message(message, out);
        }
        if record.response.is_some() || record.thinking.is_some() {
            let generated = RecordMessage {
                content: record.response,
                thinking: record.thinking,
                tool_calls: None,
            };
            self.message(generated, out);
        }
        if record.done {
            self.done = true;
            let finish_reason = match record.done_reason.as_deref() {
                Some("length") => FinishReason::Length,
                _ if self.calls_seen > 0 => FinishReason::ToolCalls,
                _ => FinishReason::Stop,
            };
            let usage = Usage {
                prompt_tokens: record.prompt_eval_count.unwrap_or(0),
                completion_tokens: record.eval_count.unwrap_or(0),
                backend_total_ms: record.total_duration.map(|ns| ns / 1_000_000),
                backend_timings: match (
                    record.load_duration,
                    record.prompt_eval_duration,
                    record.eval_duration,
                ) {
                    (Some(load), Some(prompt), Some(eval)) => Some(BackendTimings {
                        load_s: load as f64 / 1e9,
                        prompt_eval_s: prompt as f64 / 1e9,
                        eval_s: eval as f64 / 1e9,
                    }),
                    _ => None,
                },
            };
            out.push_back(Chunk::Done {
                finish_reason,
                usage,
            });
        }
        Ok(())
    }

    fn end(&mut self, _out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        if self.done {
            Ok(())
        } else {
            Err(WireError::Protocol(
                "the stream ended before the final `done` record".into(),
            ))
        }
    }

    fn finished(&self) -> bool {
        self.done
    }
}

impl NdjsonDecoder {
    fn message(&mut self, message: RecordMessage, out: &mut VecDeque<Chunk>) {
        if let Some(text) = message.thinking.filter(|t| !t.is_empty()) {
            out.push_back(Chunk::Reasoning { text });
        }
        if let Some(text) = message.content.filter(|t| !t.is_empty()) {
            out.push_back(Chunk::Content { text });
        }
        let calls: Vec<ToolCall> = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let id = c.id.unwrap_or_else(|| format!("call_{}", self.calls_seen));
                self.calls_seen += 1;
                let arguments = match c.function.arguments {
                    Value::String(s) => s,
                    Value::Null => "{}".to_owned(),
                    other => other.to_string(),
                };
                ToolCall {
                    id,
                    name: c.function.name,
                    arguments,
                }
            })
            .collect();
        if !calls.is_empty() {
            out.push_back(Chunk::ToolCalls { calls });
        }
    }
}

#[path = "ollama_generate.rs"]
mod generate;

#[cfg(test)]
#[path = "ollama_tests.rs"]
mod tests;
