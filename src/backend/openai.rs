//! The OpenAI-compatible client (llama.cpp, vLLM, LM Studio, Ollama's `/v1`, …): model
//! discovery over `GET models`, streamed chat over `POST chat/completions` (SSE) and text
//! completions over the legacy `POST completions`, mapped to and from the internal chat model.
//!
//! Workers reach it through [`super::Backend`]; transport and error mapping live in
//! [`super::wire`]. SSE is parsed by a small line parser here: the maintained crates for it
//! either pull in their own HTTP client or have not been released in years.

use std::collections::VecDeque;

use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::wire::{self, Decoder, WireError};
use super::{BackendError, BackendRequest, ChunkStream, ClientSettings, ModelInfo};
use crate::chat::{
    AnswerFormat, ChatMessage, Chunk, FinishReason, Role, Think, ToolCall, ToolChoice, ToolSpec,
    Usage,
};
use crate::domain::ModelName;

#[derive(Debug, Clone)]
pub struct OpenAiClient {
    settings: ClientSettings,
    http: reqwest::Client,
    models_url: Url,
    chat_url: Url,
    completions_url: Url,
    embeddings_url: Url,
}

impl OpenAiClient {
    pub fn new(settings: ClientSettings) -> anyhow::Result<Self> {
        let http = wire::http_client(&settings)?;
        Ok(Self {
            models_url: wire::endpoint(&settings, "models")?,
            chat_url: wire::endpoint(&settings, "chat/completions")?,
            completions_url: wire::endpoint(&settings, "completions")?,
            embeddings_url: wire::endpoint(&settings, "embeddings")?,
            settings,
            http,
        })
    }

    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// `GET models`: the ids in `data[]`. The API does not say which models take tools.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, BackendError> {
        let url = &self.models_url;
        let builder = wire::authorize(&self.settings, self.http.get(url.clone()));
        let list: ModelList = wire::look_json(&self.settings, url, builder).await?;
        Ok(list
            .data
            .iter()
            .filter_map(|m| ModelName::parse(&m.id).ok())
            .map(|name| ModelInfo {
                name,
                tools: None,
                context_length: None,
                size: None,
            })
            .collect())
    }

    /// `POST chat/completions` with `stream: false`, for a client that wants the whole
    /// answer: one body instead of an event per token. Waits up to the answer timeout for
    /// it; its chunks are the answer in one piece.
    pub async fn complete(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        let (url, builder) = self.post_turn(req, false);
        let resp = wire::send_whole(&self.settings, url, builder).await?;
        wire::decode_stream(&self.settings, resp, CompletionDecoder::default()).await
    }

    /// `POST chat/completions` with `stream: true`; resolves once the first chunk has arrived.
    pub async fn chat(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        let (url, builder) = self.post_turn(req, true);
        let resp = wire::send(&self.settings, url, builder).await?;
        wire::decode_stream(&self.settings, resp, SseDecoder::default()).await
    }

    /// The request for one turn: `POST chat/completions`, or the legacy `POST completions`
    /// for a text completion a chat cannot say (a suffix or a raw prompt; see
    /// [`completions`]). A whole answer is asked without `stream_options`.
    fn post_turn(&self, req: &BackendRequest, stream: bool) -> (&Url, reqwest::RequestBuilder) {
        let include_usage = stream.then_some(StreamOptions {
            include_usage: true,
        });
        let (url, post) = match &req.params.text {
            Some(form) if form.needs_completion_endpoint() => {
                let url = &self.completions_url;
                let mut body = completions::CompletionRequest::from_request(req, form);
                body.stream = stream;
                body.stream_options = include_usage;
                (url, self.http.post(url.clone()).json(&body))
            }
            _ => {
                let url = &self.chat_url;
                let mut body = ChatRequest::from_request(req);
                body.stream = stream;
                body.stream_options = include_usage;
                (url, self.http.post(url.clone()).json(&body))
            }
        };
        (url, wire::authorize(&self.settings, post))
    }
}

impl OpenAiClient {
    /// `POST embeddings` `{"model","input":[...]}`: `data[].embedding`, ordered by `index`.
    pub async fn embed(
        &self,
        model: &ModelName,
        inputs: &[String],
        dimensions: Option<u32>,
    ) -> Result<Vec<Vec<f32>>, BackendError> {
        #[derive(Deserialize)]
        struct EmbeddingList {
            data: Vec<Embedding>,
        }
        #[derive(Deserialize)]
        struct Embedding {
            #[serde(default)]
            index: usize,
            embedding: Vec<f32>,
        }
        let url = &self.embeddings_url;
        let mut body = serde_json::json!({ "model": model.as_str(), "input": inputs });
        if let Some(n) = dimensions {
            body["dimensions"] = n.into();
        }
        let builder = wire::authorize(&self.settings, self.http.post(url.clone())).json(&body);
        let mut list: EmbeddingList = wire::fetch_json(&self.settings, url, builder).await?;
        list.data.sort_by_key(|e| e.index);
        let vectors = list.data.into_iter().map(|e| e.embedding).collect();
        wire::check_embedding_count(&self.settings, inputs.len(), vectors)
    }
}

#[derive(Deserialize)]
struct ModelList {
    #[serde(default)]
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
}

// ---- request mapping -------------------------------------------------------------------

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<serde_json::Value>,
    /// A thinking level (`max` is OpenAI's `high`); on/off has no OpenAI equivalent.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<serde_json::Value>,
}

/// `response_format` for a structured-output request (a schema needs a name here).
fn response_format(f: &AnswerFormat) -> serde_json::Value {
    match f {
        AnswerFormat::Json => json!({ "type": "json_object" }),
        AnswerFormat::JsonSchema {
            name,
            schema,
            strict,
        } => {
            let mut spec = json!({
                "name": name.as_deref().unwrap_or("answer"),
                "schema": schema,
            });
            if let Some(strict) = strict {
                spec["strict"] = serde_json::Value::Bool(*strict);
            }
            json!({ "type": "json_schema", "json_schema": spec })
        }
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    /// `null` only for an assistant message that carries nothing but tool calls.
    content: Option<Content<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct OutToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: OutFunction<'a>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    function: &'a ToolSpec,
}

impl<'a> ChatRequest<'a> {
    fn from_request(req: &'a BackendRequest) -> Self {
        let p = &req.params;
        Self {
            model: req.model.as_str(),
            messages: req.messages.iter().map(Message::from_chat).collect(),
            stream: true,
            stream_options: Some(StreamOptions {
                include_usage: true,
            }),
            tools: req
                .tools
                .iter()
                .map(|t| Tool {
                    r#type: "function",
                    function: t,
                })
                .collect(),
            temperature: p.temperature,
            top_p: p.top_p,
            max_tokens: p.max_tokens,
            stop: &p.stop,
            seed: p.seed,
            response_format: p.format.as_ref().map(response_format),
            reasoning_effort: match &p.think {
                Some(Think::Level(level)) if level == "max" => Some("high"),
                Some(Think::Level(level)) => Some(level.as_str()),
                Some(Think::On(_)) | None => None,
            },
            tool_choice: p
                .tool_choice
                .as_ref()
                .filter(|_| !req.tools.is_empty())
                .map(|choice| match choice {
                    ToolChoice::Auto => json!("auto"),
                    ToolChoice::Required => json!("required"),
                    ToolChoice::Function { name } => {
                        json!({ "type": "function", "function": { "name": name } })
                    }
                }),
        }
    }
}

impl<'a> Message<'a> {
    fn from_chat(m: &'a ChatMessage) -> Self {
        let content = if !m.images.is_empty() {
            let text = (!m.content.is_empty()).then_some(Part::Text { text: &m.content });
            let images = m.images.iter().map(|b64| Part::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{};base64,{b64}", image_mime(b64)),
                },
            });
            Some(Content::Parts(text.into_iter().chain(images).collect()))
        } else if m.content.is_empty() && !m.tool_calls.is_empty() {
            None
        } else {
            Some(Content::Text(&m.content))
        };
        Self {
            role: m.role.as_str(),
            content,
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| OutToolCall {
                    id: &c.id,
                    r#type: "function",
                    function: OutFunction {
                        name: &c.name,
                        arguments: if c.arguments.is_empty() {
                            "{}"
                        } else {
                            &c.arguments
                        },
                    },
                })
                .collect(),
            tool_call_id: match m.role {
                Role::Tool => m.tool_call_id.as_deref(),
                _ => None,
            },
        }
    }
}

/// The MIME type of a base64 image, told by the encoded magic bytes (PNG when unknown).
fn image_mime(b64: &str) -> &'static str {
    if b64.starts_with("/9j/") {
        "image/jpeg"
    } else if b64.starts_with("R0lGOD") {
        "image/gif"
    } else if b64.starts_with("UklGR") {
        "image/webp"
    } else {
        "image/png"
    }
}

// ---- response decoding -----------------------------------------------------------------

/// One `data:` payload of a `chat.completion.chunk` stream.
#[derive(Deserialize)]
struct StreamEvent {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Option<Delta>,
    /// A `text_completion`'s text, in place of the delta.
    text: Option<String>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    thinking: Option<String>,
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
}

/// A whole `chat.completion` (`stream: false`). Its message has the shape of a delta
/// that holds everything, so it is decoded as one event of a stream.
#[derive(Deserialize)]
struct Completion {
    choices: Option<Vec<WholeChoice>>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WholeChoice {
    message: Option<Delta>,
    /// A whole `text_completion`'s text.
    text: Option<String>,
    finish_reason: Option<String>,
}

/// Decodes a whole `chat.completion` body (on one line or pretty-printed over many).
#[derive(Debug, Default)]
pub(super) struct CompletionDecoder {
    body: String,
    stream: SseDecoder,
}

impl Decoder for CompletionDecoder {
    fn line(&mut self, line: &str, _out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        self.body.push_str(line);
        self.body.push('\n');
        Ok(())
    }

    fn end(&mut self, out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        let body = std::mem::take(&mut self.body);
        let whole: Completion = serde_json::from_str(&body)
            .map_err(|e| WireError::Protocol(format!("bad chat.completion ({e}): {body:.200}")))?;
        let choices = whole.choices.map(|c| {
            c.into_iter()
                .map(|w| Choice {
                    delta: w.message,
                    text: w.text,
                    finish_reason: w.finish_reason,
                })
                .collect()
        });
        let event = StreamEvent {
            choices,
            usage: whole.usage,
            error: whole.error,
        };
        self.stream.apply(event, out)?;
        if self.stream.finish.is_none() {
            return Err(WireError::Protocol(
                "the answer has no choice with a finish_reason".into(),
            ));
        }
        self.stream.end(out)
    }

    fn finished(&self) -> bool {
        self.stream.finished()
    }
}

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Decodes an OpenAI SSE chat stream into chunks; ends with exactly one `Done`.
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    /// The `data:` lines of the event being read.
    data: String,
    calls: Vec<PartialCall>,
    calls_emitted: usize,
    finish: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl Decoder for SseDecoder {
    fn line(&mut self, line: &str, out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        if line.is_empty() {
            return self.dispatch(out);
        }
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(value);
            return Ok(());
        }
        // Comments, `event:`/`id:`/`retry:` fields and anything else are ignored, except a
        // bare JSON error object, which some servers write without the `data:` prefix.
        if line.starts_with('{') {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
                if value.get("error").is_some() {
                    return Err(WireError::MidStream(error_text(&value)));
                }
            }
        }
        Ok(())
    }

    fn end(&mut self, out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        self.dispatch(out)?;
        if self.done {
            return Ok(());
        }
        if self.finish.is_none() {
            return Err(WireError::Protocol(
                "the stream ended before a finish_reason or [DONE]".into(),
            ));
        }
        self.complete(out);
        Ok(())
    }

    fn finished(&self) -> bool {
        self.done
    }
}

impl SseDecoder {
    /// Handles the event whose `data:` lines have been collected.
    fn dispatch(&mut self, out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        if self.data.is_empty() || self.done {
            self.data.clear();
            return Ok(());
        }
        let data = std::mem::take(&mut self.data);
        let result = self.event(&data, out);
        self.data = data;
        self.data.clear();
        result
    }

    fn event(&mut self, data: &str, out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        if data.trim() == "[DONE]" {
            self.complete(out);
            return Ok(());
        }
        let event: StreamEvent = serde_json::from_str(data)
            .map_err(|e| WireError::Protocol(format!("bad SSE event ({e}): {data:.200}")))?;
        self.apply(event, out)
    }

    /// Handles one decoded event (or a whole answer, as one event).
    fn apply(&mut self, event: StreamEvent, out: &mut VecDeque<Chunk>) -> Result<(), WireError> {
        if let Some(error) = event.error.filter(|e| !e.is_null()) {
            return Err(WireError::MidStream(error_text(
                &serde_json::json!({ "error": error }),
            )));
        }
        if let Some(usage) = event.usage {
            self.usage = Some(Usage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                backend_total_ms: None,
                backend_timings: None,
            });
        }
        let Some(choice) = event.choices.and_then(|c| c.into_iter().next()) else {
            return Ok(());
        };
        if let Some(delta) = choice.delta {
            self.delta(delta, out);
        }
        if let Some(text) = choice.text.filter(|t| !t.is_empty()) {
            out.push_back(Chunk::Content { text });
        }
        if let Some(reason) = choice.finish_reason {
            self.finish = Some(reason);
            self.flush_calls(out);
        }
        Ok(())
    }

    fn delta(&mut self, delta: Delta, out: &mut VecDeque<Chunk>) {
        let reasoning = delta
            .reasoning_content
            .or(delta.reasoning)
            .or(delta.thinking);
        if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
            out.push_back(Chunk::Reasoning { text });
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push_back(Chunk::Content { text });
        }
        for part in delta.tool_calls.unwrap_or_default() {
            self.merge_call(part);
        }
    }

    /// Merges a tool-call delta into the call with the same `index`. Servers that omit the
    /// index start a new call whenever a new id appears.
    fn merge_call(&mut self, part: DeltaToolCall) {
        let index = match part.index {
            Some(i) => i,
            None => {
                let last = self.calls.last();
                let new_id = part.id.is_some() && last.is_none_or(|c| c.id != part.id);
                if new_id || last.is_none() {
                    self.calls.len()
                } else {
                    self.calls.len() - 1
                }
            }
        };
        if self.calls.len() <= index {
            self.calls.resize_with(index + 1, PartialCall::default);
        }
        let call = &mut self.calls[index];
        if part.id.is_some() {
            call.id = part.id;
        }
        if let Some(f) = part.function {
            if let Some(name) = f.name {
                call.name.push_str(&name);
            }
            if let Some(args) = f.arguments {
                call.arguments.push_str(&args);
            }
        }
    }

    /// Emits the assembled tool calls as one chunk.
    fn flush_calls(&mut self, out: &mut VecDeque<Chunk>) {
        let calls: Vec<ToolCall> = self
            .calls
            .drain(..)
            .filter(|c| !c.name.is_empty())
            .map(|c| {
                let n = self.calls_emitted;
                self.calls_emitted += 1;
                ToolCall {
                    id: c.id.unwrap_or_else(|| format!("call_{n}")),
                    name: c.name,
                    arguments: if c.arguments.is_empty() {
                        "{}".to_owned()
                    } else {
                        c.arguments
                    },
                }
            })
            .collect();
        if !calls.is_empty() {
            out.push_back(Chunk::ToolCalls { calls });
        }
    }

    /// Emits pending tool calls and the one final `Done`.
    fn complete(&mut self, out: &mut VecDeque<Chunk>) {
        if self.done {
            return;
        }
        self.flush_calls(out);
        self.done = true;
        let finish_reason = match self.finish.as_deref() {
            Some("length") => FinishReason::Length,
            _ if self.calls_emitted > 0 => FinishReason::ToolCalls,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        out.push_back(Chunk::Done {
            finish_reason,
            usage: self.usage.take().unwrap_or_default(),
        });
    }
}

fn error_text(value: &serde_json::Value) -> String {
    wire::json_error_message(value).unwrap_or_else(|| value.to_string())
}

#[path = "openai_completions.rs"]
mod completions;

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
