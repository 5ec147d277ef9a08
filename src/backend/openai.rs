//! The OpenAI-compatible client (llama.cpp, vLLM, LM Studio, Ollama's `/v1`, …): model
//! discovery over `GET models` and streamed chat over `POST chat/completions` (SSE),
//! mapped to and from the internal chat model.
//!
//! Workers reach it through [`super::Backend`]; transport and error mapping live in
//! [`super::wire`]. SSE is parsed by a small line parser here: the maintained crates for it
//! either pull in their own HTTP client or have not been released in years.

use std::collections::VecDeque;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::wire::{self, Decoder, WireError};
use super::{BackendError, BackendRequest, ChunkStream, ClientSettings, ModelInfo};
use crate::chat::{ChatMessage, Chunk, FinishReason, Role, ToolCall, ToolSpec, Usage};
use crate::domain::ModelName;

#[derive(Debug, Clone)]
pub struct OpenAiClient {
    settings: ClientSettings,
    http: reqwest::Client,
    models_url: Url,
    chat_url: Url,
    embeddings_url: Url,
}

impl OpenAiClient {
    pub fn new(settings: ClientSettings) -> anyhow::Result<Self> {
        let http = wire::http_client(&settings)?;
        Ok(Self {
            models_url: wire::endpoint(&settings, "models")?,
            chat_url: wire::endpoint(&settings, "chat/completions")?,
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
        let list: ModelList = wire::fetch_json(&self.settings, url, builder).await?;
        Ok(list
            .data
            .iter()
            .filter_map(|m| ModelName::parse(&m.id).ok())
            .map(|name| ModelInfo { name, tools: None })
            .collect())
    }

    /// The API cannot tell which models are loaded.
    pub async fn loaded_models(&self) -> Result<Vec<ModelName>, BackendError> {
        Ok(Vec::new())
    }

    /// `POST chat/completions` with `stream: true`; resolves once the first chunk has arrived.
    pub async fn chat(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        let url = &self.chat_url;
        let body = ChatRequest::from_request(req);
        let builder = wire::authorize(&self.settings, self.http.post(url.clone())).json(&body);
        let resp = wire::send(&self.settings, url, builder).await?;
        wire::decode_stream(&self.settings, resp, SseDecoder::default()).await
    }
}

impl OpenAiClient {
    /// `POST embeddings` `{"model","input":[...]}`: `data[].embedding`, ordered by `index`.
    pub async fn embed(
        &self,
        model: &ModelName,
        inputs: &[String],
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
        let body = serde_json::json!({ "model": model.as_str(), "input": inputs });
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
    stream_options: StreamOptions,
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
            stream_options: StreamOptions {
                include_usage: true,
            },
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

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Decodes an OpenAI SSE chat stream into chunks; ends with exactly one `Done`.
#[derive(Debug, Default)]
struct SseDecoder {
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
            });
        }
        let Some(choice) = event.choices.and_then(|c| c.into_iter().next()) else {
            return Ok(());
        };
        if let Some(delta) = choice.delta {
            self.delta(delta, out);
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::chat::SamplingParams;
    use crate::domain::WorkerName;
    use crate::testkit::chunks::{closed_port, collect_chunks as collect, content_text as text_of};
    use crate::testkit::fake_llm::{Failure, FakeLlm, FakeLlmServer, Script};

    async fn setup() -> (FakeLlmServer, OpenAiClient) {
        let server = FakeLlm::builder()
            .model("qwen2.5:7b")
            .model_with_tools("llama3.1:8b")
            .spawn()
            .await
            .unwrap();
        let client = client(&server, Duration::from_secs(10), None);
        (server, client)
    }

    fn client(server: &FakeLlmServer, idle: Duration, key: Option<&str>) -> OpenAiClient {
        let mut settings = server
            .openai_settings(WorkerName::parse("sun").unwrap())
            .unwrap();
        settings.idle_timeout = idle;
        settings.api_key = key.map(str::to_owned);
        OpenAiClient::new(settings).unwrap()
    }

    fn request(model: &str, messages: Vec<ChatMessage>) -> BackendRequest {
        BackendRequest {
            model: ModelName::parse(model).unwrap(),
            messages,
            params: SamplingParams::default(),
            tools: Vec::new(),
        }
    }

    fn weather_tool() -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: None,
            parameters: json!({ "type": "object" }),
        }
    }

    #[tokio::test]
    async fn streams_text_with_usage_and_bearer_auth() {
        let (server, _) = setup().await;
        let client = client(&server, Duration::from_secs(10), Some("sk-test"));
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Echo from qwen2.5:7b: hello world");
        assert_eq!(chunks.len(), 6, "{chunks:?}");
        assert_eq!(
            chunks.last().unwrap(),
            &Ok(Chunk::Done {
                finish_reason: FinishReason::Stop,
                usage: Usage {
                    prompt_tokens: 2,
                    completion_tokens: 5,
                    backend_total_ms: None,
                },
            })
        );
        let sent = server.requests_to("/v1/chat/completions").pop().unwrap();
        assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
        let body = sent.body.unwrap();
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({ "include_usage": true }));
    }

    #[tokio::test]
    async fn reasoning_content_becomes_reasoning_chunks() {
        let (server, client) = setup().await;
        server.set_script(
            "qwen2.5:7b",
            Some(Script::text("Yes.").with_reasoning("Hmm ok")),
        );
        let req = request("qwen2.5:7b", vec![ChatMessage::user("ok?")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        let chunks: Vec<Chunk> = chunks.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            chunks[..3],
            [
                Chunk::Reasoning { text: "Hmm".into() },
                Chunk::Reasoning { text: " ok".into() },
                Chunk::Content {
                    text: "Yes.".into()
                },
            ]
        );
    }

    #[tokio::test]
    async fn tools_round_trip() {
        let (server, client) = setup().await;
        let mut req = request(
            "llama3.1:8b",
            vec![ChatMessage::user(
                r#"call tool get_weather {"city":"Paris"}"#,
            )],
        );
        req.tools = vec![weather_tool()];
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        let call = ToolCall {
            id: "call_1_0".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        };
        assert_eq!(
            chunks,
            [
                Ok(Chunk::ToolCalls {
                    calls: vec![call.clone()]
                }),
                Ok(Chunk::Done {
                    finish_reason: FinishReason::ToolCalls,
                    usage: Usage {
                        prompt_tokens: 4,
                        completion_tokens: 1,
                        backend_total_ms: None,
                    },
                }),
            ]
        );

        let mut assistant = ChatMessage::assistant("");
        assistant.tool_calls = vec![call];
        let mut result = ChatMessage::new(Role::Tool, "18 degrees");
        result.tool_call_id = Some("call_1_0".into());
        result.name = Some("get_weather".into());
        req.messages.push(assistant);
        req.messages.push(result);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Tool get_weather returned: 18 degrees");

        let sent = server
            .requests_to("/v1/chat/completions")
            .pop()
            .unwrap()
            .body
            .unwrap();
        assert_eq!(
            sent["messages"][1],
            json!({ "role": "assistant", "content": null, "tool_calls": [
                { "id": "call_1_0", "type": "function",
                  "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } }
            ] })
        );
        assert_eq!(
            sent["messages"][2],
            json!({ "role": "tool", "content": "18 degrees", "tool_call_id": "call_1_0" })
        );
        assert_eq!(
            sent["tools"],
            json!([{ "type": "function", "function": { "name": "get_weather", "parameters": { "type": "object" } } }])
        );
    }

    #[tokio::test]
    async fn params_and_images_are_mapped() {
        let (server, client) = setup().await;
        let mut user = ChatMessage::user("look");
        user.images = vec!["/9j/4AAQ".into()];
        let mut req = request("qwen2.5:7b", vec![user]);
        req.params = SamplingParams {
            temperature: Some(0.5),
            top_p: Some(0.9),
            max_tokens: Some(2),
            stop: vec!["END".into()],
            seed: Some(42),
        };
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Echo from");
        assert!(matches!(
            chunks.last(),
            Some(Ok(Chunk::Done {
                finish_reason: FinishReason::Length,
                ..
            }))
        ));
        let sent = server
            .requests_to("/v1/chat/completions")
            .pop()
            .unwrap()
            .body
            .unwrap();
        assert_eq!(
            sent,
            json!({
                "model": "qwen2.5:7b",
                "messages": [{ "role": "user", "content": [
                    { "type": "text", "text": "look" },
                    { "type": "image_url", "image_url": { "url": "data:image/jpeg;base64,/9j/4AAQ" } },
                ] }],
                "stream": true,
                "stream_options": { "include_usage": true },
                "temperature": 0.5,
                "top_p": 0.9,
                "max_tokens": 2,
                "stop": ["END"],
                "seed": 42,
            })
        );
    }

    #[tokio::test]
    async fn lists_model_ids() {
        let (_server, client) = setup().await;
        let models = client.list_models().await.unwrap();
        let names: Vec<(&str, Option<bool>)> =
            models.iter().map(|m| (m.name.as_str(), m.tools)).collect();
        assert_eq!(names, [("qwen2.5:7b", None), ("llama3.1:8b", None)]);
    }

    #[tokio::test]
    async fn refused_connection_is_connect_naming_the_backend() {
        let addr = closed_port().unwrap();
        let settings = ClientSettings {
            name: WorkerName::parse("sun").unwrap(),
            base_url: reqwest::Url::parse(&format!("http://{addr}/v1/")).unwrap(),
            connect_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(2),
            api_key: None,
        };
        let client = OpenAiClient::new(settings).unwrap();
        let err = client.list_models().await.err().unwrap();
        assert!(
            matches!(&err, BackendError::Connect { backend, url, .. }
                if backend == "sun" && url == &format!("http://{addr}/v1/models")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn http_failures_map_to_error_kinds() {
        let (server, client) = setup().await;
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
        for (status, check) in [
            (
                503,
                (|e| matches!(e, BackendError::Busy { status: 503, .. }))
                    as fn(&BackendError) -> bool,
            ),
            (429, |e| matches!(e, BackendError::Busy { status: 429, .. })),
            (502, |e| {
                matches!(e, BackendError::Server { status: 502, .. })
            }),
        ] {
            server.update_knobs(|k| {
                k.fail_next = 1;
                k.failure = Failure::Status(status);
            });
            let err = client.chat(&req).await.err().unwrap();
            assert!(check(&err), "HTTP {status}: {err:?}");
            assert!(
                err.to_string().contains("fake-llm: injected failure"),
                "{err}"
            );
        }
        let err = client
            .chat(&request("missing", vec![ChatMessage::user("hi")]))
            .await
            .err()
            .unwrap();
        assert_eq!(
            err,
            BackendError::Rejected {
                backend: "sun".into(),
                status: 404,
                message: "The model `missing` does not exist.".into(),
            }
        );
    }

    #[tokio::test]
    async fn tools_for_a_model_without_them_is_rejected_with_the_message() {
        let (_server, client) = setup().await;
        let mut req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
        req.tools = vec![weather_tool()];
        let err = client.chat(&req).await.err().unwrap();
        assert!(
            matches!(&err, BackendError::Rejected { status: 400, message, .. }
                if message == "registry.ollama.ai/library/qwen2.5:7b does not support tools"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn silence_mid_stream_is_stalled() {
        let (server, _) = setup().await;
        // A short real timeout: this tests the timeout itself, nothing races with it.
        let client = client(&server, Duration::from_millis(500), None);
        server.update_knobs(|k| k.stall_after = Some(3));
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Echo from qwen2.5:7b:");
        assert!(
            matches!(chunks.last(), Some(Err(BackendError::Stalled { backend, .. })) if backend == "sun"),
            "{chunks:?}"
        );
    }

    #[tokio::test]
    async fn error_event_mid_stream_is_midstream() {
        let (server, client) = setup().await;
        server.update_knobs(|k| k.error_after = Some(2));
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Echo from");
        assert_eq!(
            chunks.last().unwrap(),
            &Err(BackendError::MidStream {
                backend: "sun".into(),
                message: "fake-llm: injected mid-stream error".into(),
            })
        );
    }

    fn decode(text: &str, cut: usize) -> Vec<Result<Chunk, WireError>> {
        let bytes = text.as_bytes();
        let mut decoder = SseDecoder::default();
        let mut splitter = wire::LineSplitter::default();
        let mut out = VecDeque::new();
        let mut results = Vec::new();
        for part in [&bytes[..cut], &bytes[cut..]] {
            if let Err(e) = splitter.push(part, |l| decoder.line(l, &mut out)) {
                results.push(Err(e));
            }
        }
        let ended = splitter
            .finish(|l| decoder.line(l, &mut out))
            .and_then(|()| decoder.end(&mut out));
        if let Err(e) = ended {
            results.push(Err(e));
        }
        out.into_iter().map(Ok).chain(results).collect()
    }

    #[test]
    fn decoder_merges_tool_calls_by_index_across_any_split() {
        let stream = concat!(
            ": keep-alive comment\n\n",
            "event: message\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning\":\"é\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"x\\\"\"}}]}}]}\r\n\r\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"name\":\"b\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n",
            "data: [DONE]\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"ignored after DONE\"}}]}\n\n",
        );
        let expected = vec![
            Ok(Chunk::Reasoning { text: "é".into() }),
            Ok(Chunk::ToolCalls {
                calls: vec![
                    ToolCall {
                        id: "c1".into(),
                        name: "a".into(),
                        arguments: r#"{"x":1}"#.into(),
                    },
                    ToolCall {
                        id: "call_1".into(),
                        name: "b".into(),
                        arguments: "{}".into(),
                    },
                ],
            }),
            Ok(Chunk::Done {
                finish_reason: FinishReason::ToolCalls,
                usage: Usage {
                    prompt_tokens: 7,
                    completion_tokens: 3,
                    backend_total_ms: None,
                },
            }),
        ];
        for cut in 0..=stream.len() {
            assert_eq!(decode(stream, cut), expected, "cut at {cut}");
        }
    }

    #[test]
    fn decoder_finishes_without_done_marker_and_reports_errors() {
        let no_done =
            "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"length\"}]}";
        assert_eq!(
            decode(no_done, 0),
            [
                Ok(Chunk::Content { text: "hi".into() }),
                Ok(Chunk::Done {
                    finish_reason: FinishReason::Length,
                    usage: Usage::default(),
                }),
            ]
        );
        let cut_off = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
        assert!(matches!(decode(cut_off, 0)[1], Err(WireError::Protocol(_))));
        let error = "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n";
        assert_eq!(
            decode(error, 0)[0],
            Err(WireError::MidStream("boom".into()))
        );
        let bare = "{\"error\":\"bare boom\"}\n";
        assert_eq!(
            decode(bare, 0)[0],
            Err(WireError::MidStream("bare boom".into()))
        );
        let garbage = "data: {not json\n\n";
        assert!(matches!(decode(garbage, 0)[0], Err(WireError::Protocol(_))));
    }
}
