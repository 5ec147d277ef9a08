//! The Ollama client: model discovery (`/api/tags`, `/api/show`, `/api/ps`) and streamed
//! chat over `/api/chat` (NDJSON), mapped to and from the internal chat model.
//!
//! Workers reach it through [`super::Backend`]; transport and error mapping live in
//! [`super::wire`].

use std::collections::VecDeque;

use futures::StreamExt;
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::wire::{self, Decoder, WireError};
use super::{BackendError, BackendRequest, ChunkStream, ClientSettings, ModelInfo};
use crate::chat::{ChatMessage, Chunk, FinishReason, Role, ToolCall, ToolSpec, Usage};
use crate::domain::ModelName;

/// How many `/api/show` calls run at once during discovery.
const SHOW_CONCURRENCY: usize = 8;

#[derive(Debug, Clone)]
pub struct OllamaClient {
    settings: ClientSettings,
    http: reqwest::Client,
    urls: Urls,
}

#[derive(Debug, Clone)]
struct Urls {
    tags: Url,
    show: Url,
    ps: Url,
    chat: Url,
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
            embed: wire::endpoint(&settings, "api/embed")?,
        };
        Ok(Self {
            settings,
            http,
            urls,
        })
    }

    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// `GET /api/tags`, then `POST /api/show` per model to learn whether it takes tools.
    /// A failed `show` leaves that model's capability unknown instead of failing the list.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, BackendError> {
        let url = &self.urls.tags;
        let tags: ModelList = wire::fetch_json(&self.settings, url, self.get(url)).await?;
        let names: Vec<ModelName> = tags.models.iter().filter_map(ModelEntry::name).collect();
        let infos = futures::stream::iter(names)
            .map(|name| async move {
                let tools = self.supports_tools(&name).await;
                ModelInfo { name, tools }
            })
            .buffered(SHOW_CONCURRENCY)
            .collect()
            .await;
        Ok(infos)
    }

    /// `GET /api/ps`: the models loaded in memory right now.
    pub async fn loaded_models(&self) -> Result<Vec<ModelName>, BackendError> {
        let url = &self.urls.ps;
        let ps: ModelList = wire::fetch_json(&self.settings, url, self.get(url)).await?;
        Ok(ps.models.iter().filter_map(ModelEntry::name).collect())
    }

    /// `POST /api/chat` with `stream: true`; resolves once the first chunk has arrived.
    pub async fn chat(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        let url = &self.urls.chat;
        let body = ChatRequest::from_request(req);
        let builder = wire::authorize(&self.settings, self.http.post(url.clone())).json(&body);
        let resp = wire::send(&self.settings, url, builder).await?;
        wire::decode_stream(&self.settings, resp, NdjsonDecoder::default()).await
    }

    /// `POST /api/embed` `{"model","input":[...]}`: one vector per input, in order.
    pub async fn embed(
        &self,
        model: &ModelName,
        inputs: &[String],
    ) -> Result<Vec<Vec<f32>>, BackendError> {
        #[derive(Deserialize)]
        struct EmbedResponse {
            embeddings: Vec<Vec<f32>>,
        }
        let url = &self.urls.embed;
        let body = serde_json::json!({ "model": model.as_str(), "input": inputs });
        let builder = wire::authorize(&self.settings, self.http.post(url.clone())).json(&body);
        let resp: EmbedResponse = wire::fetch_json(&self.settings, url, builder).await?;
        wire::check_embedding_count(&self.settings, inputs.len(), resp.embeddings)
    }

    fn get(&self, url: &Url) -> reqwest::RequestBuilder {
        wire::authorize(&self.settings, self.http.get(url.clone()))
    }

    async fn supports_tools(&self, model: &ModelName) -> Option<bool> {
        let url = &self.urls.show;
        let builder = wire::authorize(&self.settings, self.http.post(url.clone()))
            .json(&serde_json::json!({ "model": model.as_str() }));
        match wire::fetch_json::<ShowResponse>(&self.settings, url, builder).await {
            Ok(show) => show
                .capabilities
                .map(|caps| caps.iter().any(|c| c == "tools")),
            Err(e) => {
                tracing::debug!(backend = %self.settings.name, model = %model, error = %e, "api/show failed; tools capability unknown");
                None
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
}

impl Options<'_> {
    fn is_empty(&self) -> bool {
        self.temperature.is_none()
            && self.top_p.is_none()
            && self.num_predict.is_none()
            && self.stop.is_empty()
            && self.seed.is_none()
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
            tools: req
                .tools
                .iter()
                .map(|t| Tool {
                    r#type: "function",
                    function: t,
                })
                .collect(),
            options: Options {
                temperature: p.temperature,
                top_p: p.top_p,
                num_predict: p.max_tokens,
                stop: &p.stop,
                seed: p.seed,
            },
        }
    }
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

/// One NDJSON line of an `/api/chat` stream.
#[derive(Deserialize)]
struct Record {
    message: Option<RecordMessage>,
    #[serde(default)]
    done: bool,
    done_reason: Option<String>,
    prompt_eval_count: Option<u32>,
    eval_count: Option<u32>,
    total_duration: Option<u64>,
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
struct NdjsonDecoder {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::chat::{ChatMessage, SamplingParams};
    use crate::domain::WorkerName;
    use crate::testkit::chunks::{closed_port, collect_chunks as collect, content_text as text_of};
    use crate::testkit::fake_llm::{Failure, FakeLlm, FakeLlmServer, Script};

    async fn setup() -> (FakeLlmServer, OllamaClient) {
        let server = FakeLlm::builder()
            .model("qwen2.5:7b")
            .model_with_tools("llama3.1:8b")
            .spawn()
            .await
            .unwrap();
        let client = client(&server, Duration::from_secs(10));
        (server, client)
    }

    fn client(server: &FakeLlmServer, idle: Duration) -> OllamaClient {
        let mut settings = server
            .ollama_settings(WorkerName::parse("moon").unwrap())
            .unwrap();
        settings.idle_timeout = idle;
        OllamaClient::new(settings).unwrap()
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
            description: Some("Weather for a city".into()),
            parameters: json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
        }
    }

    #[tokio::test]
    async fn streams_text_and_ends_with_done() {
        let (_server, client) = setup().await;
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Echo from qwen2.5:7b: hello world");
        assert_eq!(chunks.len(), 6, "five tokens and done: {chunks:?}");
        assert_eq!(
            chunks.last().unwrap(),
            &Ok(Chunk::Done {
                finish_reason: FinishReason::Stop,
                usage: Usage {
                    prompt_tokens: 2,
                    completion_tokens: 5,
                    backend_total_ms: Some(6),
                },
            })
        );
    }

    #[tokio::test]
    async fn thinking_becomes_reasoning_chunks() {
        let (server, client) = setup().await;
        let script = Script::text("Yes.").with_reasoning("Let me think");
        server.set_script("qwen2.5:7b", Some(script));
        let req = request("qwen2.5:7b", vec![ChatMessage::user("ok?")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        let kinds: Vec<Chunk> = chunks.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            kinds[..4],
            [
                Chunk::Reasoning { text: "Let".into() },
                Chunk::Reasoning { text: " me".into() },
                Chunk::Reasoning {
                    text: " think".into()
                },
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
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        };
        assert_eq!(
            chunks[0],
            Ok(Chunk::ToolCalls {
                calls: vec![call.clone()]
            })
        );
        assert!(matches!(
            chunks.last(),
            Some(Ok(Chunk::Done {
                finish_reason: FinishReason::ToolCalls,
                ..
            }))
        ));

        let mut assistant = ChatMessage::assistant("");
        assistant.tool_calls = vec![call];
        let mut result = ChatMessage::new(Role::Tool, "18 degrees");
        result.tool_call_id = Some("call_0".into());
        req.messages.push(assistant);
        req.messages.push(result);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Tool get_weather returned: 18 degrees");

        // What Ollama received: arguments as an object, the tool name on the tool message.
        let sent = server.requests_to("/api/chat").pop().unwrap().body.unwrap();
        assert_eq!(
            sent["messages"][1]["tool_calls"],
            json!([{ "function": { "name": "get_weather", "arguments": { "city": "Paris" } } }])
        );
        assert_eq!(sent["messages"][2]["tool_name"], "get_weather");
        assert_eq!(
            sent["tools"][0],
            json!({ "type": "function", "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": { "type": "object", "properties": { "city": { "type": "string" } } },
            } })
        );
    }

    #[tokio::test]
    async fn options_and_images_are_mapped() {
        let (server, client) = setup().await;
        let mut user = ChatMessage::user("look");
        user.images = vec!["iVBORw0KGgo=".into()];
        let mut req = request("qwen2.5:7b", vec![ChatMessage::system("be brief"), user]);
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
        let sent = server.requests_to("/api/chat").pop().unwrap().body.unwrap();
        assert_eq!(
            sent,
            json!({
                "model": "qwen2.5:7b",
                "messages": [
                    { "role": "system", "content": "be brief" },
                    { "role": "user", "content": "look", "images": ["iVBORw0KGgo="] },
                ],
                "stream": true,
                "options": { "temperature": 0.5, "top_p": 0.9, "num_predict": 2, "stop": ["END"], "seed": 42 },
            })
        );
    }

    #[tokio::test]
    async fn lists_models_with_tools_and_loaded_models() {
        let (_server, client) = setup().await;
        let models = client.list_models().await.unwrap();
        let summary: Vec<(&str, Option<bool>)> =
            models.iter().map(|m| (m.name.as_str(), m.tools)).collect();
        assert_eq!(
            summary,
            [("qwen2.5:7b", Some(false)), ("llama3.1:8b", Some(true))]
        );
        assert!(client.loaded_models().await.unwrap().is_empty());
        let req = request("llama3.1:8b", vec![ChatMessage::user("hi")]);
        collect(client.chat(&req).await.unwrap()).await;
        let loaded = client.loaded_models().await.unwrap();
        assert_eq!(loaded, [ModelName::parse("llama3.1:8b").unwrap()]);
    }

    #[tokio::test]
    async fn refused_connection_is_connect_naming_the_backend() {
        let addr = closed_port().unwrap();
        let settings = ClientSettings {
            name: WorkerName::parse("moon").unwrap(),
            base_url: reqwest::Url::parse(&format!("http://{addr}/")).unwrap(),
            connect_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(2),
            api_key: None,
        };
        let client = OllamaClient::new(settings).unwrap();
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
        let err = client.chat(&req).await.err().unwrap();
        let BackendError::Connect { backend, url, .. } = &err else {
            panic!("expected Connect, got {err:?}");
        };
        assert_eq!(backend, "moon");
        assert_eq!(url, &format!("http://{addr}/api/chat"));
        assert!(err.to_string().contains("moon"), "{err}");
        assert!(matches!(
            client.list_models().await,
            Err(BackendError::Connect { .. })
        ));
    }

    #[tokio::test]
    async fn http_failures_map_to_busy_server_and_protocol() {
        let (server, client) = setup().await;
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
        server.update_knobs(|k| {
            k.fail_next = 1;
            k.failure = Failure::Status(503);
        });
        let err = client.chat(&req).await.err().unwrap();
        assert!(
            matches!(&err, BackendError::Busy { status: 503, message, .. } if message.contains("server busy")),
            "{err:?}"
        );
        server.update_knobs(|k| {
            k.fail_next = 1;
            k.failure = Failure::Status(500);
        });
        let err = client.chat(&req).await.err().unwrap();
        assert!(
            matches!(err, BackendError::Server { status: 500, .. }),
            "{err:?}"
        );
        server.update_knobs(|k| {
            k.fail_next = 1;
            k.failure = Failure::Drop;
        });
        let err = client.chat(&req).await.err().unwrap();
        assert!(matches!(err, BackendError::Protocol { .. }), "{err:?}");
        // The server is fine again afterwards.
        assert!(client.chat(&req).await.is_ok());
    }

    #[tokio::test]
    async fn tools_for_a_model_without_them_is_rejected_with_the_message() {
        let (_server, client) = setup().await;
        let mut req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
        req.tools = vec![weather_tool()];
        let err = client.chat(&req).await.err().unwrap();
        assert_eq!(
            err,
            BackendError::Rejected {
                backend: "moon".into(),
                status: 400,
                message: "registry.ollama.ai/library/qwen2.5:7b does not support tools".into(),
            }
        );
        assert!(!err.is_retryable());
    }

    #[tokio::test]
    async fn silence_mid_stream_is_stalled_and_before_it_a_timeout() {
        let (server, _) = setup().await;
        // A short real timeout: this tests the timeout itself, nothing races with it.
        let client = client(&server, Duration::from_millis(500));
        server.update_knobs(|k| k.stall_after = Some(2));
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(text_of(&chunks), "Echo from");
        assert!(
            matches!(chunks.last(), Some(Err(BackendError::Stalled { backend, .. })) if backend == "moon"),
            "{chunks:?}"
        );
        server.update_knobs(|k| k.stall_after = Some(0));
        let err = client.chat(&req).await.err().unwrap();
        assert!(
            matches!(err, BackendError::Timeout { after_ms: 500, .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn error_line_mid_stream_is_midstream() {
        let (server, client) = setup().await;
        server.update_knobs(|k| k.error_after = Some(1));
        let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
        let chunks = collect(client.chat(&req).await.unwrap()).await;
        assert_eq!(chunks.len(), 2, "{chunks:?}");
        assert_eq!(
            chunks[1],
            Err(BackendError::MidStream {
                backend: "moon".into(),
                message: "fake-llm: injected mid-stream error".into(),
            })
        );
    }

    fn decode(bytes: &[u8], cut: usize) -> Vec<Result<Chunk, WireError>> {
        let mut decoder = NdjsonDecoder::default();
        let mut splitter = wire::LineSplitter::default();
        let mut out = VecDeque::new();
        let mut results = Vec::new();
        let mut feed = |part: &[u8], results: &mut Vec<_>, out: &mut VecDeque<Chunk>| {
            if let Err(e) = splitter.push(part, |l| decoder.line(l, out)) {
                results.push(Err(e));
            }
        };
        feed(&bytes[..cut], &mut results, &mut out);
        feed(&bytes[cut..], &mut results, &mut out);
        if let Err(e) = decoder.end(&mut out) {
            results.push(Err(e));
        }
        out.into_iter().map(Ok).chain(results).collect()
    }

    #[test]
    fn decoder_handles_any_split_ids_and_unicode() {
        let stream = concat!(
            r#"{"message":{"role":"assistant","content":"","thinking":"ü"},"done":false}"#,
            "\n",
            r#"{"message":{"role":"assistant","content":"日本"},"done":false}"#,
            "\r\n",
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"a","arguments":{}}},{"id":"x","function":{"name":"b","arguments":{"k":1}}}]},"done":false}"#,
            "\n",
            r#"{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":2500000,"prompt_eval_count":3,"eval_count":4}"#,
            "\n"
        )
        .as_bytes();
        let expected = vec![
            Ok(Chunk::Reasoning { text: "ü".into() }),
            Ok(Chunk::Content {
                text: "日本".into(),
            }),
            Ok(Chunk::ToolCalls {
                calls: vec![
                    ToolCall {
                        id: "call_0".into(),
                        name: "a".into(),
                        arguments: "{}".into(),
                    },
                    ToolCall {
                        id: "x".into(),
                        name: "b".into(),
                        arguments: r#"{"k":1}"#.into(),
                    },
                ],
            }),
            Ok(Chunk::Done {
                finish_reason: FinishReason::ToolCalls,
                usage: Usage {
                    prompt_tokens: 3,
                    completion_tokens: 4,
                    backend_total_ms: Some(2),
                },
            }),
        ];
        for cut in 0..=stream.len() {
            assert_eq!(decode(stream, cut), expected, "cut at {cut}");
        }
    }

    #[test]
    fn decoder_reports_errors_and_truncation() {
        let error = b"{\"error\":\"out of memory\"}\n";
        assert_eq!(
            decode(error, 0)[0],
            Err(WireError::MidStream("out of memory".into()))
        );
        let truncated = b"{\"message\":{\"content\":\"a\"},\"done\":false}\n";
        let out = decode(truncated, 3);
        assert_eq!(out[0], Ok(Chunk::Content { text: "a".into() }));
        assert!(matches!(out[1], Err(WireError::Protocol(_))));
        assert!(matches!(
            decode(b"not json\n", 0)[0],
            Err(WireError::Protocol(_))
        ));
        let length = b"{\"done\":true,\"done_reason\":\"length\"}\n";
        assert!(matches!(
            decode(length, 0)[0],
            Ok(Chunk::Done {
                finish_reason: FinishReason::Length,
                ..
            })
        ));
    }
}
