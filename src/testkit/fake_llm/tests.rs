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

/// The body of a streamed `/api/chat` answer to "hello world".
async fn chat_stream(
    server: &FakeLlmServer,
) -> impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin + use<> {
    reqwest::Client::new()
        .post(format!("{}/api/chat", server.base_url()))
        .json(&hello("qwen2.5:7b"))
        .send()
        .await
        .unwrap()
        .bytes_stream()
}

#[tokio::test]
async fn shutdown_ends_a_stalled_stream() {
    let server = server().await;
    server.update_knobs(|k| k.stall_after = Some(1));
    let mut body = chat_stream(&server).await;
    let first = futures::StreamExt::next(&mut body).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"Echo\""));
    server.shutdown().await.unwrap();
    // The stalled stream ends once the server stops, without the `done` record.
    let rest: Vec<_> = futures::StreamExt::collect(body).await;
    assert!(rest.iter().all(|r| r.as_ref().map_or(true, |b| {
        !String::from_utf8_lossy(b).contains("done\":true")
    })));
}

/// A held server sends each stream's first token, then nothing until released; the rest
/// of the answer follows, to its `done` record.
#[tokio::test]
async fn a_held_stream_goes_on_when_released() {
    let server = server().await;
    server.update_knobs(|k| k.tokens = Some(8));
    server.hold();
    let mut body = chat_stream(&server).await;
    let first = futures::StreamExt::next(&mut body).await.unwrap().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&first)
            .matches("\"done\":false")
            .count(),
        1
    );
    // Held: whatever the wait, no second token (an absence, so a bounded look).
    let more = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        futures::StreamExt::next(&mut body),
    )
    .await;
    assert!(more.is_err(), "a held stream sent {more:?}");
    server.release();
    let rest: Vec<_> = futures::StreamExt::collect(body).await;
    let rest: String = rest
        .iter()
        .map(|b| String::from_utf8_lossy(b.as_ref().unwrap()).into_owned())
        .collect();
    assert_eq!(rest.matches("\"done\":false").count(), 7, "{rest}");
    assert!(rest.contains("\"done\":true"), "{rest}");
}

#[test]
fn tokens_keep_leading_spaces_and_handle_unicode() {
    let t: Vec<&str> = tokens("héllo wörld  x").map(|(_, t)| t).collect();
    assert_eq!(t, ["héllo", " wörld", " ", " x"]);
    assert_eq!(tokens("").count(), 0);
    // Japanese and Chinese: one token per character, as their tokenizers roughly give.
    let t: Vec<&str> = tokens("猫のミケ。ok 猫cat").map(|(_, t)| t).collect();
    assert_eq!(t, ["猫", "の", "ミ", "ケ", "。", "ok", " ", "猫", "cat"]);
}

#[test]
fn an_answer_sent_back_as_history_is_about_as_many_prompt_tokens_as_it_was_generated() {
    // A real model's answer, tokenized again in the next turn's prompt, is about as long
    // as it was to generate; a fake whose Japanese tokens were whole clauses made chats
    // ten times longer than life.
    let model = Model {
        spec: ModelSpec::new("m"),
        digest: String::new(),
        loaded: std::sync::atomic::AtomicBool::new(false),
        used_at_ms: std::sync::atomic::AtomicI64::new(0),
    };
    for text in [JA_PROMPT, EN_PROMPT] {
        for n in [40, 327] {
            let prompt = reply::Prompt {
                last: reply::Last::User(text.to_owned()),
                prompt_tokens: 1,
                tools: Vec::new(),
                max_tokens: None,
            };
            let content =
                reply::plan(&model, prompt, None, Some(n), None, Answers::Realistic).content;
            assert_eq!(tokens(&content).count(), n, "{content}");
            let again = f64::from(super::sim::estimate_tokens(&content));
            let ratio = again / n as f64;
            assert!(
                (0.8..=1.6).contains(&ratio),
                "{n} tokens came back as {again}: {content}"
            );
        }
    }
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

// ---- realistic answers ------------------------------------------------------------------

async fn realistic_server() -> FakeLlmServer {
    FakeLlm::builder()
        .model("qwen2.5:7b")
        .model_with_tools("llama3.1:8b")
        .realistic_answers()
        .spawn()
        .await
        .unwrap()
}

fn ask(text: &str) -> Value {
    json!({
        "model": "qwen2.5:7b",
        "stream": false,
        "messages": [{ "role": "user", "content": text }],
    })
}

/// The non-streamed Ollama answer's content.
async fn answer(server: &FakeLlmServer, text: &str) -> String {
    let (status, _, body) = post(format!("{}/api/chat", server.base_url()), ask(text)).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["message"]["content"].as_str().unwrap().to_owned()
}

const JA_PROMPT: &str = "私の猫の名前はミケです。最近は窓際でよく寝ています。";
const EN_PROMPT: &str = "My dog Biscuit keeps chewing the sofa cushions, what should I do?";

fn sentence_count(text: &str) -> usize {
    text.chars()
        .filter(|c| matches!(c, '.' | '!' | '?' | '。'))
        .count()
}

#[tokio::test]
async fn realistic_answers_a_japanese_prompt_in_japanese_prose() {
    let server = realistic_server().await;
    let text = answer(&server, JA_PROMPT).await;
    assert_eq!(crate::lang::detect_language(&text), crate::lang::Lang::Ja);
    assert!(
        (3..=6).contains(&text.matches('。').count()),
        "not 3 to 6 sentences: {text}"
    );
    assert!(!text.is_ascii() && !text.contains(' '), "{text}");
    assert!((80..=400).contains(&text.chars().count()), "{text}");
    for word in ["猫", "ミケ", "名前", "窓際", "寝て"] {
        assert!(!text.contains(word), "{word:?} restated in {text}");
    }
    assert!(!text.contains("Echo"));
}

#[tokio::test]
async fn realistic_answers_an_english_prompt_in_english_prose() {
    let server = realistic_server().await;
    let text = answer(&server, EN_PROMPT).await;
    assert_eq!(crate::lang::detect_language(&text), crate::lang::Lang::En);
    assert!(text.is_ascii(), "{text}");
    assert!((3..=6).contains(&sentence_count(&text)), "{text}");
    assert!((80..=400).contains(&text.chars().count()), "{text}");
    for word in ["Biscuit", "dog", "chewing", "sofa", "cushions"] {
        assert!(!text.contains(word), "{word:?} restated in {text}");
    }
    assert!(!text.starts_with("Echo from"));
}

#[tokio::test]
async fn realistic_answers_are_deterministic_per_prompt() {
    let server = realistic_server().await;
    for prompt in [JA_PROMPT, EN_PROMPT] {
        assert_eq!(answer(&server, prompt).await, answer(&server, prompt).await);
    }
    // Across servers too.
    let other = realistic_server().await;
    assert_eq!(
        answer(&server, EN_PROMPT).await,
        answer(&other, EN_PROMPT).await
    );
}

#[tokio::test]
async fn realistic_answers_usually_differ_between_prompts() {
    let server = realistic_server().await;
    let mut answers = std::collections::HashSet::new();
    for i in 0..20 {
        answers.insert(answer(&server, &format!("Question number {i} about my garden")).await);
        answers.insert(answer(&server, &format!("庭について{i}番目の質問です")).await);
    }
    assert!(answers.len() >= 30, "only {} of 40 differ", answers.len());
}

#[test]
fn realistic_answers_stay_within_their_bounds() {
    let model = Model {
        spec: ModelSpec::new("m"),
        digest: String::new(),
        loaded: std::sync::atomic::AtomicBool::new(false),
        used_at_ms: std::sync::atomic::AtomicI64::new(0),
    };
    for i in 0..500 {
        for text in [format!("question {i}"), format!("質問{i}")] {
            let prompt = reply::Prompt {
                last: reply::Last::User(text.clone()),
                prompt_tokens: 1,
                tools: Vec::new(),
                max_tokens: None,
            };
            let r = reply::plan(&model, prompt, None, None, None, Answers::Realistic);
            let content = r.content;
            assert!(
                (80..=400).contains(&content.chars().count()),
                "{} chars: {content}",
                content.chars().count()
            );
            assert!((3..=6).contains(&sentence_count(&content)), "{content}");
            assert_eq!(r.finish, reply::Finish::Stop);
        }
    }
}

#[tokio::test]
async fn default_answers_are_still_the_echo() {
    assert_eq!(Knobs::default().answers, Answers::Echo);
    let server = server().await;
    assert_eq!(
        answer(&server, EN_PROMPT).await,
        format!("Echo from qwen2.5:7b: {EN_PROMPT}")
    );
    // Switching at run time, both ways.
    server.update_knobs(|k| k.answers = Answers::Realistic);
    assert!(!answer(&server, EN_PROMPT).await.starts_with("Echo from"));
    server.update_knobs(|k| k.answers = Answers::Echo);
    assert!(answer(&server, EN_PROMPT).await.starts_with("Echo from"));
}

#[tokio::test]
async fn max_tokens_cuts_a_realistic_answer() {
    let server = realistic_server().await;
    let whole = answer(&server, EN_PROMPT).await;
    let mut req = ask(EN_PROMPT);
    req["options"] = json!({ "num_predict": 4 });
    let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    let cut = v["message"]["content"].as_str().unwrap();
    assert_eq!(tokens(cut).count(), 4);
    assert!(whole.starts_with(cut) && cut.len() < whole.len());
    assert_eq!(v["done_reason"], "length");
    assert_eq!(v["eval_count"], 4);

    let mut req = ask(EN_PROMPT);
    req["max_tokens"] = json!(4);
    let (_, _, body) = post(
        format!("{}/chat/completions", server.openai_base_url()),
        req,
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], cut);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn realistic_answers_keep_the_task_template_json() {
    let server = realistic_server().await;
    let template = "### Task:\nGenerate a concise title.\n### Output:\nJSON format: { \"title\": \"your title\" }\n### Chat History:\n<chat_history>\nUSER: 猫の名前\n</chat_history>";
    let text = answer(&server, template).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["title"].is_string(), "{text}");
}

#[tokio::test]
async fn realistic_answers_leave_tool_calls_and_results_alone() {
    let server = realistic_server().await;
    let (_, _, body) = post(
        format!("{}/api/chat", server.base_url()),
        tool_request("llama3.1:8b", "call tool get_weather"),
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
    let req = json!({
        "model": "llama3.1:8b",
        "stream": false,
        "messages": [
            { "role": "user", "content": "call tool get_weather" },
            { "role": "tool", "content": "sunny" },
        ],
    });
    let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(
        v["message"]["content"]
            .as_str()
            .unwrap()
            .ends_with("returned: sunny"),
        "{body}"
    );
}

#[tokio::test]
async fn realistic_answers_are_the_same_on_both_apis_streamed_or_not() {
    let server = realistic_server().await;
    for prompt in [JA_PROMPT, EN_PROMPT] {
        let whole = answer(&server, prompt).await;

        let mut req = ask(prompt);
        req["stream"] = json!(true);
        let (_, _, body) = post(format!("{}/api/chat", server.base_url()), req.clone()).await;
        let records: Vec<Value> = body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let streamed: String = records
            .iter()
            .map(|r| r["message"]["content"].as_str().unwrap())
            .collect();
        assert_eq!(streamed, whole);
        let done = records.last().unwrap();
        assert_eq!(done["done_reason"], "stop");
        assert_eq!(done["eval_count"], tokens(&whole).count());

        req["stream_options"] = json!({ "include_usage": true });
        let url = format!("{}/chat/completions", server.openai_base_url());
        let (_, _, body) = post(url.clone(), req).await;
        let chunks: Vec<Value> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let streamed: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(streamed, whole);
        let usage = &chunks.last().unwrap()["usage"];
        assert_eq!(usage["completion_tokens"], tokens(&whole).count());

        let (_, _, body) = post(url, ask(prompt)).await;
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], whole.as_str());
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
    }
}

#[test]
fn slow_prose_follows_the_prompts_language_with_exact_token_counts() {
    let model = Model {
        spec: ModelSpec::new("m"),
        digest: String::new(),
        loaded: std::sync::atomic::AtomicBool::new(false),
        used_at_ms: std::sync::atomic::AtomicI64::new(0),
    };
    let plan = |text: &str| {
        let prompt = reply::Prompt {
            last: reply::Last::User(text.to_owned()),
            prompt_tokens: 1,
            tools: Vec::new(),
            max_tokens: None,
        };
        reply::plan(&model, prompt, None, None, Some((30, 60)), Answers::Echo).content
    };
    for text in [JA_PROMPT, "猫", EN_PROMPT, "cat"] {
        let content = plan(text);
        let n = tokens(&content).count();
        assert!((30..=60).contains(&n), "{n} tokens: {content}");
        assert_eq!(
            crate::lang::detect_language(&content),
            crate::lang::detect_language(text),
            "{content}"
        );
        assert_eq!(content, plan(text));
    }
    let ja = plan(JA_PROMPT);
    assert!(!ja.contains("猫") && !ja.contains("ミケ"), "{ja}");
}

#[tokio::test]
async fn realistic_answers_take_the_exact_length_knob() {
    let server = realistic_server().await;
    server.update_knobs(|k| k.tokens = Some(40));
    for prompt in [JA_PROMPT, EN_PROMPT] {
        let text = answer(&server, prompt).await;
        assert_eq!(tokens(&text).count(), 40, "{text}");
        assert_eq!(
            crate::lang::detect_language(&text),
            crate::lang::detect_language(prompt)
        );
        assert!(!text.contains("Echo") && !text.contains("猫"), "{text}");
    }
}
