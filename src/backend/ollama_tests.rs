//! Tests of the ollama client against the in-repo fake LLM server.
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::chat::{ChatMessage, SamplingParams};
use crate::domain::WorkerName;
use crate::testkit::chunks::{
    closed_port, collect_chunks as collect, content_text as text_of, done_of,
};
use crate::testkit::fake_llm::{Failure, FakeLlm, FakeLlmServer, ModelSpec, Realism, Script};

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
                backend_timings: Some(BackendTimings {
                    load_s: 0.001,
                    prompt_eval_s: 0.0002,
                    eval_s: 0.005,
                }),
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

/// Ollama has no `tool_choice`: a named function is the only tool it is shown, and
/// `required` leaves every tool there.
#[tokio::test]
async fn a_named_tool_choice_narrows_the_tools() {
    let (server, client) = setup().await;
    let mut other = weather_tool();
    other.name = "get_time".into();
    let mut req = request("llama3.1:8b", vec![ChatMessage::user("weather?")]);
    req.tools = vec![other, weather_tool()];
    let sent_tools = |server: &FakeLlmServer| {
        let sent = server.requests_to("/api/chat").pop().unwrap().body.unwrap();
        assert_eq!(sent.get("tool_choice"), None);
        sent["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    req.params.tool_choice = Some(ToolChoice::Function {
        name: "get_weather".into(),
    });
    collect(client.chat(&req).await.unwrap()).await;
    assert_eq!(sent_tools(&server), ["get_weather"]);
    req.params.tool_choice = Some(ToolChoice::Required);
    collect(client.chat(&req).await.unwrap()).await;
    assert_eq!(sent_tools(&server), ["get_time", "get_weather"]);
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
        format: Some(AnswerFormat::JsonSchema {
            name: Some("haiku".into()),
            schema: json!({ "type": "object" }),
            strict: Some(true),
        }),
        keep_alive: Some(json!("10m")),
        think: Some(Think::Level("high".into())),
        tool_choice: None,
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
            "options": { "temperature": 0.5, "top_p": 0.9, "num_predict": 2, "stop": ["END"], "seed": 42, "num_ctx": 8192 },
            "format": { "type": "object" },
            "keep_alive": "10m",
            "think": "high",
        })
    );
}

#[tokio::test]
async fn a_json_answer_is_asked_with_format_json() {
    let (server, client) = setup().await;
    let mut req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
    req.params.format = Some(AnswerFormat::Json);
    req.params.keep_alive = Some(json!(0));
    req.params.think = Some(Think::On(false));
    collect(client.complete(&req).await.unwrap()).await;
    let sent = server.requests_to("/api/chat").pop().unwrap().body.unwrap();
    assert_eq!(sent["format"], "json");
    assert_eq!(sent["stream"], false);
    assert_eq!(sent["keep_alive"], 0);
    assert_eq!(sent["think"], false);
}

#[tokio::test]
async fn lists_models_with_tools_windows_sizes_and_loaded_models() {
    let (_server, client) = setup().await;
    let models = client.list_models().await.unwrap();
    let summary: Vec<_> = models
        .iter()
        .map(|m| (m.name.as_str(), m.tools, m.context_length, m.size))
        .collect();
    // The fake's default size: a 7-8B model at 4-bit, as `/api/tags` reports it.
    assert_eq!(
        summary,
        [
            ("qwen2.5:7b", Some(false), Some(32_768), Some(4_683_087_332)),
            ("llama3.1:8b", Some(true), Some(32_768), Some(4_683_087_332))
        ]
    );
    assert!(client.loaded_models().await.unwrap().is_empty());
    let req = request("llama3.1:8b", vec![ChatMessage::user("hi")]);
    collect(client.chat(&req).await.unwrap()).await;
    let loaded = client.loaded_models().await.unwrap();
    let model = ModelName::parse("llama3.1:8b").unwrap();
    // The fake's plain mode does not say which window a model was loaded with; it keeps
    // a model Ollama's default five minutes after its last use.
    assert_eq!(loaded.len(), 1, "{loaded:?}");
    assert_eq!((&loaded[0].model, loaded[0].num_ctx), (&model, None));
    let left = loaded[0].expires_at.unwrap() - chrono::Utc::now();
    assert!(
        left > chrono::Duration::minutes(4) && left <= chrono::Duration::minutes(5),
        "{loaded:?}"
    );
}

#[tokio::test]
async fn a_resident_models_window_is_read_from_api_ps() {
    let server = FakeLlm::builder()
        .model_spec(ModelSpec::new("qwen2.5:7b").with_context_length(8192))
        .realistic(Realism {
            time_scale: 1000.0,
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap();
    let client = client(&server, Duration::from_secs(10));
    assert_eq!(
        client.list_models().await.unwrap()[0].context_length,
        Some(8192)
    );
    let mut req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
    req.params.num_ctx = Some(6144);
    collect(client.chat(&req).await.unwrap()).await;
    let loaded = client.loaded_models().await.unwrap();
    let model = ModelName::parse("qwen2.5:7b").unwrap();
    assert_eq!(loaded.len(), 1, "{loaded:?}");
    assert_eq!((&loaded[0].model, loaded[0].num_ctx), (&model, Some(6144)));
    // Five minutes of life at a thousand times: 300 ms of wall clock from now.
    let left = loaded[0].expires_at.unwrap() - chrono::Utc::now();
    assert!(
        left > chrono::Duration::zero() && left <= chrono::Duration::milliseconds(300),
        "{loaded:?}"
    );
}

#[test]
fn an_expiry_from_api_ps_is_read_in_any_offset_and_nothing_else_is() {
    let utc = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
    // Ollama writes its local time with nanoseconds and the offset.
    assert_eq!(
        super::parse_expiry("2026-12-02T14:05:00.123456789+09:00"),
        Some(utc("2026-12-02T05:05:00.123456789Z"))
    );
    assert_eq!(
        super::parse_expiry("2026-12-02T05:05:00Z"),
        Some(utc("2026-12-02T05:05:00Z"))
    );
    // A model kept forever (`keep_alive: -1`) expires centuries away: still a time.
    assert!(super::parse_expiry("2318-03-24T01:05:00.5-07:00").is_some());
    // Go's zero time, and what is not a time, say nothing.
    assert_eq!(super::parse_expiry("0001-01-01T00:00:00Z"), None);
    for bad in ["", "soon", "2026-12-02 14:05", "2026-13-02T14:05:00Z"] {
        assert_eq!(super::parse_expiry(bad), None, "{bad}");
    }
}

#[tokio::test]
async fn refused_connection_is_connect_naming_the_backend() {
    let addr = closed_port().unwrap();
    let settings = ClientSettings {
        name: WorkerName::parse("moon").unwrap(),
        base_url: reqwest::Url::parse(&format!("http://{addr}/")).unwrap(),
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(2),
        answer_timeout: Duration::from_secs(2),
        look_timeout: Duration::from_secs(2),
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
        if let Err(e) = splitter.push(part, |l| decoder.line(wire::line_text(l)?, out)) {
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
                backend_timings: None,
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
    let sent = server.requests_to("/api/chat").pop().unwrap();
    assert_eq!(sent.body.unwrap()["stream"], false);
}

#[tokio::test]
async fn a_whole_answer_keeps_tool_calls() {
    let (_server, client) = setup().await;
    let mut req = request(
        "llama3.1:8b",
        vec![ChatMessage::user(
            r#"call tool get_weather {"city":"Paris"}"#,
        )],
    );
    req.tools = vec![weather_tool()];
    let streamed = collect(client.chat(&req).await.unwrap()).await;
    let whole = collect(client.complete(&req).await.unwrap()).await;
    assert_eq!(done_of(&whole), done_of(&streamed));
    assert_eq!(
        whole.first(),
        streamed.first(),
        "a tool call is one chunk either way"
    );
    assert!(matches!(&whole[0], Ok(Chunk::ToolCalls { calls }) if calls[0].name == "get_weather"));
}

#[tokio::test]
async fn a_whole_answer_may_take_longer_than_a_stream_may_stay_silent() {
    let (server, _) = setup().await;
    // Real short timeouts: this tests the timeouts themselves, nothing races with them.
    server.update_knobs(|k| k.latency = Duration::from_millis(600));
    let mut settings = server
        .ollama_settings(WorkerName::parse("moon").unwrap())
        .unwrap();
    settings.idle_timeout = Duration::from_millis(200);
    settings.answer_timeout = Duration::from_secs(10);
    let patient = OllamaClient::new(settings.clone()).unwrap();
    let req = request("qwen2.5:7b", vec![ChatMessage::user("hello world")]);
    let whole = collect(patient.complete(&req).await.unwrap()).await;
    assert_eq!(text_of(&whole), "Echo from qwen2.5:7b: hello world");

    settings.answer_timeout = Duration::from_millis(300);
    let hasty = OllamaClient::new(settings).unwrap();
    assert!(matches!(
        hasty.complete(&req).await,
        Err(BackendError::Timeout { after_ms: 300, .. })
    ));
}

/// A machine whose clock reads 30 s ahead (a Windows box a few weeks from its last sync)
/// says so in its answers' `Date`; the client reads its expiries on this machine's
/// clock, and tells how far ahead it found it.
#[tokio::test]
async fn expiries_from_a_machine_whose_clock_is_ahead_are_read_on_this_clock() {
    let ahead = chrono::TimeDelta::seconds(30);
    let server = FakeLlm::builder()
        .model("qwen2.5:7b")
        .clock_ahead(ahead)
        .spawn()
        .await
        .unwrap();
    let client = client(&server, Duration::from_secs(10));
    assert_eq!(client.clock_ahead(), None, "no look yet");
    let req = request("qwen2.5:7b", vec![ChatMessage::user("hi")]);
    collect(client.chat(&req).await.unwrap()).await;
    let loaded = client.loaded_models().await.unwrap();
    // One answer's whole-second `Date` places the clock within about half a second.
    let found = client.clock_ahead().unwrap();
    assert!(
        (found - ahead).abs() <= chrono::TimeDelta::milliseconds(600),
        "{found}"
    );
    // The fake's plain mode keeps a model five minutes after its last use, by its clock.
    let left = loaded[0].expires_at.unwrap() - chrono::Utc::now();
    assert!(
        left > chrono::Duration::seconds(298) && left <= chrono::Duration::seconds(301),
        "{loaded:?}"
    );
}

/// A machine whose clock agrees with this one's reads as zero.
#[tokio::test]
async fn a_machine_whose_clock_agrees_reads_as_zero() {
    let (_server, client) = setup().await;
    for _ in 0..3 {
        client.loaded_models().await.unwrap();
    }
    assert_eq!(client.clock_ahead(), Some(chrono::TimeDelta::zero()));
}

/// A machine that takes connections but never answers (a hung server) holds a look at it
/// (its models, what it holds loaded) for `look_timeout`, not for the stream's idle
/// timeout: start-up and discovery wait seconds for it, not minutes.
#[tokio::test]
async fn a_server_that_never_answers_holds_a_look_for_the_look_timeout_only() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Takes every connection and keeps it, reading nothing and answering nothing.
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            open.push(tcp);
        }
    });
    let settings = ClientSettings {
        name: WorkerName::parse("moon").unwrap(),
        base_url: reqwest::Url::parse(&format!("http://{addr}/")).unwrap(),
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(120),
        answer_timeout: Duration::from_secs(120),
        look_timeout: Duration::from_millis(300),
        api_key: None,
    };
    let ollama = OllamaClient::new(settings.clone()).unwrap();
    let openai = crate::backend::openai::OpenAiClient::new(settings).unwrap();
    let patience = Duration::from_secs(30);
    let looks = [
        tokio::time::timeout(patience, ollama.list_models())
            .await
            .map(|r| r.map(drop)),
        tokio::time::timeout(patience, ollama.loaded_models())
            .await
            .map(|r| r.map(drop)),
        tokio::time::timeout(patience, openai.list_models())
            .await
            .map(|r| r.map(drop)),
    ];
    for look in looks {
        let err = look.expect("the look ended long before the idle timeout");
        assert!(
            matches!(err, Err(BackendError::Timeout { after_ms: 300, .. })),
            "{err:?}"
        );
    }
    held.abort();
}
