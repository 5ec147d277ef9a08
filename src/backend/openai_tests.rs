//! Tests of the openai client against the in-repo fake LLM server.
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::chat::SamplingParams;
use crate::domain::WorkerName;
use crate::testkit::chunks::{
    closed_port, collect_chunks as collect, content_text as text_of, done_of,
};
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
                backend_timings: None,
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
                    backend_timings: None,
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
        format: Some(AnswerFormat::JsonSchema {
            name: Some("haiku".into()),
            schema: json!({ "type": "object", "properties": { "lines": { "type": "array" } } }),
            strict: Some(true),
        }),
        // No such setting on OpenAI-compatible servers: not sent.
        keep_alive: Some(json!("10m")),
        think: Some(Think::Level("max".into())),
        tool_choice: None,
        // No window to set on OpenAI-compatible servers either.
        num_ctx: Some(8192),
        text: None,
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
            "response_format": { "type": "json_schema", "json_schema": {
                "name": "haiku", "strict": true,
                "schema": { "type": "object", "properties": { "lines": { "type": "array" } } },
            } },
            "reasoning_effort": "high",
        })
    );
}

#[tokio::test]
async fn tool_choice_is_sent_with_the_tools_only() {
    let (server, client) = setup().await;
    let sent_choice = |server: &FakeLlmServer| {
        server
            .requests_to("/v1/chat/completions")
            .pop()
            .unwrap()
            .body
            .unwrap()
            .get("tool_choice")
            .cloned()
    };
    let mut req = request("llama3.1:8b", vec![ChatMessage::user("weather?")]);
    req.tools = vec![weather_tool()];
    req.params.tool_choice = Some(ToolChoice::Function {
        name: "get_weather".into(),
    });
    collect(client.chat(&req).await.unwrap()).await;
    assert_eq!(
        sent_choice(&server),
        Some(json!({ "type": "function", "function": { "name": "get_weather" } }))
    );
    req.params.tool_choice = Some(ToolChoice::Required);
    collect(client.chat(&req).await.unwrap()).await;
    assert_eq!(sent_choice(&server), Some(json!("required")));
    req.params.tool_choice = Some(ToolChoice::Auto);
    collect(client.chat(&req).await.unwrap()).await;
    assert_eq!(sent_choice(&server), Some(json!("auto")));
    // Without tools, a choice means nothing and is not sent.
    req.tools.clear();
    collect(client.chat(&req).await.unwrap()).await;
    assert_eq!(sent_choice(&server), None);
}

#[tokio::test]
async fn a_json_answer_is_asked_as_json_object_and_an_unnamed_schema_gets_a_name() {
    let (server, client) = setup().await;
    let mut req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
    req.params.format = Some(AnswerFormat::Json);
    collect(client.complete(&req).await.unwrap()).await;
    req.params.format = Some(AnswerFormat::JsonSchema {
        name: None,
        schema: json!({ "type": "object" }),
        strict: None,
    });
    collect(client.complete(&req).await.unwrap()).await;
    let sent: Vec<Value> = server
        .requests_to("/v1/chat/completions")
        .into_iter()
        .map(|r| r.body.unwrap()["response_format"].clone())
        .collect();
    assert_eq!(
        sent,
        [
            json!({ "type": "json_object" }),
            json!({ "type": "json_schema", "json_schema": { "name": "answer", "schema": { "type": "object" } } }),
        ]
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
        answer_timeout: Duration::from_secs(2),
        look_timeout: Duration::from_secs(2),
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
            (|e| matches!(e, BackendError::Busy { status: 503, .. })) as fn(&BackendError) -> bool,
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
        if let Err(e) = splitter.push(part, |l| decoder.line(wire::line_text(l)?, &mut out)) {
            results.push(Err(e));
        }
    }
    let ended = splitter
        .finish(|l| decoder.line(wire::line_text(l)?, &mut out))
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
                backend_timings: None,
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

#[tokio::test]
async fn a_whole_answer_is_asked_for_and_read_in_one_piece() {
    let (server, client) = setup().await;
    let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
    let streamed = collect(client.chat(&req).await.unwrap()).await;
    server.clear_requests();
    let whole = collect(client.complete(&req).await.unwrap()).await;
    assert_eq!(text_of(&whole), "Echo from qwen2.5:7b: hello world");
    assert_eq!(whole.len(), 2, "one content chunk and the end: {whole:?}");
    assert_eq!(done_of(&whole), done_of(&streamed));
    assert_eq!(done_of(&whole), Some((FinishReason::Stop, 2, 5)));
    let sent = server.requests_to("/v1/chat/completions").pop().unwrap();
    let body = sent.body.unwrap();
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none(), "{body}");
}

#[tokio::test]
async fn a_whole_answer_keeps_reasoning_and_tool_calls() {
    let (server, client) = setup().await;
    let mut req = request(
        "llama3.1:8b",
        vec![ChatMessage::user(
            r#"call tool get_weather {"city":"Paris"}"#,
        )],
    );
    req.tools = vec![weather_tool()];
    let streamed = collect(client.chat(&req).await.unwrap()).await;
    let whole = collect(client.complete(&req).await.unwrap()).await;
    assert_eq!(
        whole.len(),
        streamed.len(),
        "a tool call is one chunk either way"
    );
    assert_eq!(done_of(&whole), done_of(&streamed));
    let Some(Ok(Chunk::ToolCalls { calls })) = whole.first() else {
        panic!("{whole:?}")
    };
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("get_weather", r#"{"city":"Paris"}"#)
    );
    assert!(!calls[0].id.is_empty());

    server.set_script(
        "qwen2.5:7b",
        Some(Script::text("Yes.").with_reasoning("Hmm ok")),
    );
    let req = request("qwen2.5:7b", vec![ChatMessage::user("ok?")]);
    let whole = collect(client.complete(&req).await.unwrap()).await;
    assert_eq!(
        whole[..2],
        [
            Ok(Chunk::Reasoning {
                text: "Hmm ok".into()
            }),
            Ok(Chunk::Content {
                text: "Yes.".into()
            }),
        ]
    );
}

#[tokio::test]
async fn a_whole_answer_may_take_longer_than_a_stream_may_stay_silent() {
    let (server, _) = setup().await;
    // Real short timeouts: this tests the timeouts themselves, nothing races with them.
    server.update_knobs(|k| k.latency = Duration::from_millis(600));
    let mut settings = server
        .openai_settings(WorkerName::parse("sun").unwrap())
        .unwrap();
    settings.idle_timeout = Duration::from_millis(200);
    settings.answer_timeout = Duration::from_secs(10);
    let patient = OpenAiClient::new(settings.clone()).unwrap();
    let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
    let whole = collect(patient.complete(&req).await.unwrap()).await;
    assert_eq!(text_of(&whole), "Echo from qwen2.5:7b: hello world");

    settings.answer_timeout = Duration::from_millis(300);
    let hasty = OpenAiClient::new(settings).unwrap();
    assert!(matches!(
        hasty.complete(&req).await,
        Err(BackendError::Timeout { after_ms: 300, .. })
    ));
}

#[test]
fn a_pretty_printed_whole_answer_is_decoded() {
    let body = "{\n  \"choices\": [{\n    \"message\": {\"role\": \"assistant\", \"content\": \"Hi there\"},\n    \"finish_reason\": \"length\"\n  }],\n  \"usage\": {\"prompt_tokens\": 3, \"completion_tokens\": 2}\n}\n";
    let mut decoder = CompletionDecoder::default();
    let mut splitter = wire::LineSplitter::default();
    let mut out = VecDeque::new();
    splitter
        .push(body.as_bytes(), |l| {
            decoder.line(wire::line_text(l)?, &mut out)
        })
        .unwrap();
    splitter
        .finish(|l| decoder.line(wire::line_text(l)?, &mut out))
        .and_then(|()| decoder.end(&mut out))
        .unwrap();
    assert_eq!(
        Vec::from(out),
        [
            Chunk::Content {
                text: "Hi there".into()
            },
            Chunk::Done {
                finish_reason: FinishReason::Length,
                usage: Usage {
                    prompt_tokens: 3,
                    completion_tokens: 2,
                    backend_total_ms: None,
                    backend_timings: None,
                },
            },
        ]
    );
    let mut broken = CompletionDecoder::default();
    broken
        .line("{\"choices\": []}", &mut VecDeque::new())
        .unwrap();
    assert!(matches!(
        broken.end(&mut VecDeque::new()),
        Err(WireError::Protocol(_))
    ));
}
