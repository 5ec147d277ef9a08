//! Tests of the fake LLM server itself: exact wire bytes, reply rules, knobs, recording.

use serde_json::{Value, json};

use super::reply::{self, tokens};
use super::*;

async fn server() -> FakeLlmServer {
    FakeLlm::builder()
        .model("qwen2.5:7b")
        .model_with_tools("llama3.1:8b")
        .spawn()
        .await
        .unwrap()
}

async fn post(url: String, body: Value) -> (u16, String, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, resp.text().await.unwrap())
}

fn hello(model: &str) -> Value {
    json!({ "model": model, "messages": [{ "role": "user", "content": "hello world" }] })
}

#[tokio::test]
async fn ollama_stream_wire_bytes_are_pinned() {
    let server = server().await;
    let (status, content_type, body) = post(
        format!("{}/api/chat", server.base_url()),
        hello("qwen2.5:7b"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "application/x-ndjson");
    let token = |t: &str| {
        format!(
            r#"{{"model":"qwen2.5:7b","created_at":"2025-01-01T00:00:00Z","message":{{"role":"assistant","content":"{t}"}},"done":false}}"#
        ) + "\n"
    };
    let expected = [
        token("Echo"),
        token(" from"),
        token(" qwen2.5:7b:"),
        token(" hello"),
        token(" world"),
        concat!(
            r#"{"model":"qwen2.5:7b","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":""},"#,
            r#""done":true,"done_reason":"stop","total_duration":6200000,"load_duration":1000000,"#,
            r#""prompt_eval_count":2,"prompt_eval_duration":200000,"eval_count":5,"eval_duration":5000000}"#,
            "\n"
        )
        .to_owned(),
    ]
    .concat();
    assert_eq!(body, expected);
}

#[tokio::test]
async fn openai_stream_wire_bytes_are_pinned() {
    let server = server().await;
    let mut req = hello("qwen2.5:7b");
    req["stream"] = json!(true);
    req["stream_options"] = json!({ "include_usage": true });
    let (status, content_type, body) = post(
        format!("{}/chat/completions", server.openai_base_url()),
        req,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "text/event-stream");
    let prefix = r#"data: {"id":"chatcmpl-fake-1","object":"chat.completion.chunk","created":1735689600,"model":"qwen2.5:7b","#;
    let delta = |d: &str| {
        format!(r#"{prefix}"choices":[{{"index":0,"delta":{d},"finish_reason":null}}]}}"#) + "\n\n"
    };
    let content = |t: &str| delta(&format!(r#"{{"content":"{t}"}}"#));
    let expected = [
        delta(r#"{"role":"assistant","content":""}"#),
        content("Echo"),
        content(" from"),
        content(" qwen2.5:7b:"),
        content(" hello"),
        content(" world"),
        format!(r#"{prefix}"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}"#)
            + "\n\n",
        format!(
            r#"{prefix}"choices":[],"usage":{{"prompt_tokens":2,"completion_tokens":5,"total_tokens":7}}}}"#
        ) + "\n\n",
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    assert_eq!(body, expected);
}

#[tokio::test]
async fn non_stream_answers_in_both_formats() {
    let server = server().await;
    let mut req = hello("qwen2.5:7b");
    req["stream"] = json!(false);
    let (status, _, body) = post(format!("{}/api/chat", server.base_url()), req.clone()).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["message"]["content"], "Echo from qwen2.5:7b: hello world");
    assert_eq!(v["done"], true);
    assert_eq!(v["eval_count"], 5);

    let (status, content_type, body) = post(
        format!("{}/chat/completions", server.openai_base_url()),
        req,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "application/json");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Echo from qwen2.5:7b: hello world"
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["total_tokens"], 7);
}

fn tool_request(model: &str, text: &str) -> Value {
    json!({
        "model": model,
        "stream": false,
        "messages": [{ "role": "user", "content": text }],
        "tools": [{ "type": "function", "function": { "name": "get_weather", "parameters": {} } }],
    })
}

#[tokio::test]
async fn tool_marker_gives_a_tool_call_in_both_formats() {
    let server = server().await;
    let req = tool_request(
        "llama3.1:8b",
        r#"please call tool get_weather {"city":"Paris"}"#,
    );
    let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req.clone()).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["message"]["tool_calls"],
        json!([{ "function": { "name": "get_weather", "arguments": { "city": "Paris" } } }])
    );

    let (_, _, body) = post(
        format!("{}/chat/completions", server.openai_base_url()),
        req,
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], r#"{"city":"Paris"}"#);
    assert_eq!(call["id"], "call_2_0");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(v["choices"][0]["message"]["content"], Value::Null);
}

#[tokio::test]
async fn tool_result_gets_a_text_answer_naming_it() {
    let server = server().await;
    let req = json!({
        "model": "llama3.1:8b",
        "stream": false,
        "messages": [
            { "role": "user", "content": "call tool get_weather" },
            { "role": "assistant", "content": null, "tool_calls": [
                { "id": "call_9", "type": "function", "function": { "name": "get_weather", "arguments": "{}" } }
            ] },
            { "role": "tool", "tool_call_id": "call_9", "content": "sunny" },
        ],
    });
    let (_, _, body) = post(
        format!("{}/chat/completions", server.openai_base_url()),
        req,
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Tool get_weather returned: sunny"
    );
}

#[tokio::test]
async fn tools_for_a_model_without_them_is_a_400_in_each_shape() {
    let server = server().await;
    let req = tool_request("qwen2.5:7b", "call tool get_weather");
    let (status, _, body) = post(format!("{}/api/chat", server.base_url()), req.clone()).await;
    assert_eq!(status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({ "error": "registry.ollama.ai/library/qwen2.5:7b does not support tools" })
    );
    let (status, _, body) = post(
        format!("{}/chat/completions", server.openai_base_url()),
        req,
    )
    .await;
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["error"]["message"],
        "registry.ollama.ai/library/qwen2.5:7b does not support tools"
    );
}

#[tokio::test]
async fn unknown_model_is_a_404_in_each_shape() {
    let server = server().await;
    let (status, _, body) = post(format!("{}/api/chat", server.base_url()), hello("nope")).await;
    assert_eq!(status, 404);
    assert!(serde_json::from_str::<Value>(&body).unwrap()["error"].is_string());
    let (status, _, body) = post(
        format!("{}/chat/completions", server.openai_base_url()),
        hello("nope"),
    )
    .await;
    assert_eq!(status, 404);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "model_not_found");
}

#[tokio::test]
async fn fixed_length_and_max_tokens() {
    let server = server().await;
    server.update_knobs(|k| k.tokens = Some(32));
    let mut req = hello("qwen2.5:7b");
    req["stream"] = json!(false);
    let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req.clone()).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["eval_count"], 32);
    assert_eq!(
        tokens(v["message"]["content"].as_str().unwrap()).count(),
        32
    );

    req["options"] = json!({ "num_predict": 3 });
    let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["message"]["content"], "Echo from qwen2.5:7b:");
    assert_eq!(v["done_reason"], "length");
}

#[tokio::test]
async fn fail_next_counts_down_and_failure_rate_is_seeded() {
    let server = server().await;
    server.update_knobs(|k| {
        k.fail_next = 2;
        k.failure = Failure::Status(503);
    });
    let url = format!("{}/api/chat", server.base_url());
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(post(url.clone(), hello("qwen2.5:7b")).await.0);
    }
    assert_eq!(statuses, [503, 503, 200]);
    assert_eq!(server.knobs().fail_next, 0);

    let pattern = |seed| {
        let mut state = seed;
        (0..64)
            .map(|_| super::next_unit(&mut state) < 0.5)
            .collect::<Vec<_>>()
    };
    assert_eq!(pattern(7), pattern(7));
    assert_ne!(pattern(7), pattern(8));
    let failures = pattern(7).iter().filter(|f| **f).count();
    assert!((16..=48).contains(&failures), "{failures} of 64 failed");
}

#[tokio::test]
async fn records_requests_with_headers_and_bodies() {
    let server = server().await;
    reqwest::Client::new()
        .post(format!("{}/api/chat", server.base_url()))
        .header("X-OpenWebUI-Chat-Id", "chat-1")
        .bearer_auth("secret")
        .json(&hello("qwen2.5:7b"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(server.request_count(), 1);
    let r = &requests[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/api/chat"));
    assert_eq!(r.header("x-openwebui-chat-id"), Some("chat-1"));
    assert_eq!(r.header("authorization"), Some("Bearer secret"));
    assert_eq!(
        r.body.as_ref().unwrap()["messages"][0]["content"],
        "hello world"
    );
    server.clear_requests();
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn discovery_routes_answer() {
    let server = server().await;
    let get = |path: &str| {
        let url = format!("{}{path}", server.base_url());
        async move {
            reqwest::get(url)
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let tags = get("/api/tags").await;
    assert_eq!(tags["models"][1]["model"], "llama3.1:8b");
    assert_eq!(tags["models"][1]["details"]["parameter_size"], "8B");
    assert_eq!(get("/api/ps").await["models"], json!([]));
    assert!(get("/api/version").await["version"].is_string());
    assert_eq!(get("/v1/models").await["data"][0]["id"], "qwen2.5:7b");
    let (_, _, body) = post(
        format!("{}/api/show", server.base_url()),
        json!({ "model": "llama3.1:8b" }),
    )
    .await;
    let show: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(show["capabilities"], json!(["completion", "tools"]));
    post(
        format!("{}/api/chat", server.base_url()),
        hello("qwen2.5:7b"),
    )
    .await;
    assert_eq!(get("/api/ps").await["models"][0]["name"], "qwen2.5:7b");
}

#[tokio::test]
async fn embeddings_are_deterministic_unit_vectors() {
    let server = server().await;
    let body =
        json!({ "model": "qwen2.5:7b", "input": ["the cat sat", "the cat sat", "quantum flux"] });
    let (_, _, text) = post(format!("{}/api/embed", server.base_url()), body.clone()).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    let e = v["embeddings"].as_array().unwrap();
    assert_eq!(e.len(), 3);
    assert_eq!(e[0].as_array().unwrap().len(), reply::EMBED_DIM);
    assert_eq!(e[0], e[1]);
    assert_ne!(e[0], e[2]);
    let norm: f64 = e[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap().powi(2))
        .sum();
    assert!((norm - 1.0).abs() < 1e-4);

    let (_, _, text) = post(format!("{}/embeddings", server.openai_base_url()), body).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["data"][2]["index"], 2);
    assert_eq!(v["data"][0]["embedding"], e[0]);
}

#[tokio::test]
async fn shutdown_ends_a_stalled_stream() {
    let server = server().await;
    server.update_knobs(|k| k.stall_after = Some(1));
    let resp = reqwest::Client::new()
        .post(format!("{}/api/chat", server.base_url()))
        .json(&hello("qwen2.5:7b"))
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let first = futures::StreamExt::next(&mut body).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"Echo\""));
    server.shutdown().await.unwrap();
    // The stalled stream ends once the server stops, without the `done` record.
    let rest: Vec<_> = futures::StreamExt::collect(body).await;
    assert!(rest.iter().all(|r| r.as_ref().map_or(true, |b| {
        !String::from_utf8_lossy(b).contains("done\":true")
    })));
}

#[test]
fn tokens_keep_leading_spaces_and_handle_unicode() {
    let t: Vec<&str> = tokens("héllo wörld  x").map(|(_, t)| t).collect();
    assert_eq!(t, ["héllo", " wörld", " ", " x"]);
    assert_eq!(tokens("").count(), 0);
}

#[tokio::test]
async fn failure_rate_repeats_per_seed_across_servers() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let server = server().await;
        server.update_knobs(|k| {
            k.failure_rate = 0.5;
            k.seed = 11;
            k.failure = Failure::Status(500);
        });
        let url = format!("{}/api/chat", server.base_url());
        let mut statuses = Vec::new();
        for _ in 0..16 {
            statuses.push(post(url.clone(), hello("qwen2.5:7b")).await.0);
        }
        runs.push(statuses);
    }
    assert_eq!(runs[0], runs[1]);
    assert!(
        runs[0].contains(&500) && runs[0].contains(&200),
        "{:?}",
        runs[0]
    );
}

#[tokio::test]
async fn empty_messages_load_the_model() {
    let server = server().await;
    let req = json!({ "model": "qwen2.5:7b", "messages": [], "stream": false });
    let (status, _, body) = post(format!("{}/api/chat", server.base_url()), req).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["done"].clone(), v["done_reason"].clone()),
        (json!(true), json!("load"))
    );
}

#[tokio::test]
async fn tool_marker_needs_an_offered_tool_and_a_capable_model() {
    let server = server().await;
    // Not offered: the model answers with text.
    let mut req = tool_request("llama3.1:8b", "call tool other_tool");
    let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req.clone()).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["message"]["content"],
        "Echo from llama3.1:8b: call tool other_tool"
    );
    assert!(v["message"]["tool_calls"].is_null());
    // Arguments right after the name, without a space.
    req["messages"][0]["content"] = json!(r#"call tool get_weather{"days":3}"#);
    let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["message"]["tool_calls"][0]["function"]["arguments"],
        json!({ "days": 3 })
    );
}
