//! The OpenAI- and Ollama-compatible front doors, driven by real client libraries and by
//! the request shapes Open WebUI sends.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessageArgs, ChatCompletionRequestMessage,
    ChatCompletionRequestToolMessageArgs, ChatCompletionRequestUserMessageArgs,
    ChatCompletionStreamOptions, ChatCompletionTool, ChatCompletionTools,
    CreateChatCompletionRequestArgs, FinishReason, FunctionCall, FunctionObject,
};

use coordinator::config::{BackendConfig, BackendKind, RoutingInfo};
use coordinator::testkit::fake_llm::{Failure, FakeLlm};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, spawn_app, spawn_app_with, spawn_fake};

const TOOL_MODEL: &str = "llama3.1:8b";

fn client(app: &TestApp) -> Client<OpenAIConfig> {
    Client::with_config(
        OpenAIConfig::new()
            .with_api_base(app.url("/v1"))
            .with_api_key("unused"),
    )
}

fn user(text: &str) -> ChatCompletionRequestMessage {
    ChatCompletionRequestUserMessageArgs::default()
        .content(text)
        .build()
        .unwrap()
        .into()
}

#[tokio::test]
async fn openai_sdk_non_streaming() {
    let app = spawn_app().await;
    let req = CreateChatCompletionRequestArgs::default()
        .model("auto")
        .messages([user("hello there")])
        .build()
        .unwrap();
    let res = client(&app).chat().create(req).await.unwrap();
    assert_eq!(res.model, MODEL);
    let choice = &res.choices[0];
    assert_eq!(
        choice.message.content.as_deref(),
        Some(format!("Echo from {MODEL}: hello there").as_str())
    );
    assert_eq!(choice.finish_reason, Some(FinishReason::Stop));
    let usage = res.usage.unwrap();
    assert!(usage.completion_tokens > 0);
}

#[tokio::test]
async fn openai_sdk_streaming_with_usage() {
    let app = spawn_app().await;
    let req = CreateChatCompletionRequestArgs::default()
        .model(MODEL)
        .messages([user("stream me please")])
        .stream(true)
        .stream_options(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        })
        .build()
        .unwrap();
    let mut stream = client(&app).chat().create_stream(req).await.unwrap();
    let mut text = String::new();
    let mut deltas = 0;
    let mut finish = None;
    let mut usage = None;
    while let Some(item) = stream.next().await {
        let chunk = item.unwrap();
        if let Some(u) = chunk.usage {
            usage = Some(u);
        }
        for c in chunk.choices {
            if let Some(t) = c.delta.content {
                if !t.is_empty() {
                    deltas += 1;
                }
                text.push_str(&t);
            }
            if c.finish_reason.is_some() {
                finish = c.finish_reason;
            }
        }
    }
    assert_eq!(text, format!("Echo from {MODEL}: stream me please"));
    assert!(deltas >= 5, "tokens arrive one by one: {deltas}");
    assert_eq!(finish, Some(FinishReason::Stop));
    assert!(usage.unwrap().completion_tokens > 0);
}

#[tokio::test]
async fn openai_sdk_tools_round_trip() {
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model_with_tools(TOOL_MODEL)
        .spawn()
        .await
        .unwrap();
    let app = spawn_app_with(fake, |_| {}).await;
    let tool = ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: "get_weather".into(),
            description: Some("Weather for a city".into()),
            parameters: Some(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
            strict: None,
        },
    });
    let ask = user(r#"call tool get_weather {"city":"Kashiwa"}"#);
    let req = CreateChatCompletionRequestArgs::default()
        .model(TOOL_MODEL)
        .messages([ask.clone()])
        .tools(vec![tool.clone()])
        .build()
        .unwrap();
    let res = client(&app).chat().create(req).await.unwrap();
    let choice = &res.choices[0];
    assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
    let calls = choice.message.tool_calls.clone().unwrap();
    let ChatCompletionMessageToolCalls::Function(call) = &calls[0] else {
        panic!("expected a function call: {calls:?}");
    };
    assert_eq!(call.function.name, "get_weather");
    let args: Value = serde_json::from_str(&call.function.arguments).unwrap();
    assert_eq!(args["city"], "Kashiwa");

    // Send the tool's result back: the model answers in text.
    let assistant: ChatCompletionRequestMessage =
        ChatCompletionRequestAssistantMessageArgs::default()
            .tool_calls(vec![ChatCompletionMessageToolCalls::Function(
                ChatCompletionMessageToolCall {
                    id: call.id.clone(),
                    function: FunctionCall {
                        name: "get_weather".into(),
                        arguments: call.function.arguments.clone(),
                    },
                },
            )])
            .build()
            .unwrap()
            .into();
    let result: ChatCompletionRequestMessage = ChatCompletionRequestToolMessageArgs::default()
        .tool_call_id(call.id.clone())
        .content("sunny, 24C")
        .build()
        .unwrap()
        .into();
    let req = CreateChatCompletionRequestArgs::default()
        .model(TOOL_MODEL)
        .messages([ask, assistant, result])
        .tools(vec![tool])
        .build()
        .unwrap();
    let res = client(&app).chat().create(req).await.unwrap();
    let text = res.choices[0].message.content.clone().unwrap();
    assert!(
        text.contains("get_weather") && text.contains("sunny, 24C"),
        "{text}"
    );
}

#[tokio::test]
async fn models_list_auto_every_model_and_every_machine() {
    let app = spawn_app().await;
    let models: Value = app.get("/v1/models").await.json().await.unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["auto", MODEL, &format!("{MODEL}@moon")]);
    assert_eq!(models["object"], "list");

    let tags: Value = app.get("/api/tags").await.json().await.unwrap();
    for m in tags["models"].as_array().unwrap() {
        assert_eq!(m["name"], m["model"], "Open WebUI reads both: {m}");
    }
    let version: Value = app.get("/api/version").await.json().await.unwrap();
    assert!(version["version"].is_string());
}

#[tokio::test]
async fn ollama_chat_streams_ndjson_with_a_final_done_record() {
    let app = spawn_app().await;
    let res = app
        .post(
            "/api/chat",
            json!({"model": MODEL, "messages": [{"role": "user", "content": "こんにちは 世界"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/x-ndjson");
    let body = res.text().await.unwrap();
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 3, "{body}");
    let text: String = lines
        .iter()
        .filter(|l| l["done"] == false)
        .map(|l| l["message"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, format!("Echo from {MODEL}: こんにちは 世界"));
    let last = lines.last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "stop");
    assert!(last["eval_count"].as_u64().unwrap() > 0);

    let res = app
        .post("/api/chat", json!({"model": MODEL, "stream": false, "messages": [{"role": "user", "content": "once"}]}))
        .await;
    let one: Value = res.json().await.unwrap();
    assert_eq!(
        one["message"]["content"],
        format!("Echo from {MODEL}: once")
    );
    assert_eq!(one["done"], true);
}

#[tokio::test]
async fn errors_come_in_each_apis_own_shape() {
    let app = spawn_app().await;
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(res.status(), 404);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    assert!(body["error"]["message"].as_str().unwrap().contains(MODEL));
    assert!(body["error"]["type"].is_string());

    let res = app
        .post(
            "/api/chat",
            json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(res.status(), 404);
    let body: Value = res.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains(MODEL), "{body}");

    let bad = [
        (
            json!({"model": "auto", "messages": [{"role": "user", "content": 7}]}),
            "messages[0].content",
        ),
        (
            json!({"model": "auto", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}}),
            "response_format.type",
        ),
        (
            json!({"model": "auto", "messages": [{"role": "user", "content": "x"}],
                   "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always"}),
            "tool_choice",
        ),
    ];
    for (request, field) in bad {
        let res = app.post("/v1/chat/completions", request).await;
        assert_eq!(res.status(), 400);
        let body: Value = res.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{body}"
        );
    }

    let res = app
        .post(
            "/api/chat",
            json!({"model": MODEL, "messages": [{"role": "assistant", "content": "no user"}]}),
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(res.json::<Value>().await.unwrap()["error"].is_string());
}

#[tokio::test]
async fn a_backend_failure_before_the_first_token_is_an_http_error() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.fail_next = 1);
    let app = spawn_app_with(fake, |_| {}).await;
    let res = app.post("/v1/chat/completions", json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(res.status(), 502);
    let task_id = res.headers().get("x-coordinator-task-id").cloned();
    let body: Value = res.json().await.unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.ends_with("failed: moon answered 500"), "{msg}");
    let id = body["error"]["task_id"].as_str().unwrap();
    assert_eq!(
        task_id.unwrap().to_str().unwrap(),
        id,
        "the header names the task too"
    );
    let task: Value = app.get(&format!("/tasks/{id}")).await.json().await.unwrap();
    assert_eq!(task["status"], "failed");
}

#[tokio::test]
async fn a_failure_after_the_first_token_ends_the_stream_with_an_error_event() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.error_after = Some(2));
    let app = spawn_app_with(fake, |_| {}).await;
    let res = app.post("/v1/chat/completions", json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "a b c d e"}]})).await;
    assert_eq!(res.status(), 200);
    let body = res.text().await.unwrap();
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty()).collect();
    let error = events
        .iter()
        .find(|e| e.contains("\"error\""))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        error.contains("moon reported an error while answering"),
        "{error}"
    );
    assert_eq!(*events.last().unwrap(), "data: [DONE]");
}

#[tokio::test]
async fn fails_over_to_another_machine_before_the_first_token() {
    let bad = spawn_fake().await;
    bad.update_knobs(|k| {
        k.fail_next = 1000;
        k.failure = Failure::Status(500);
    });
    let good = spawn_fake().await;
    let good_url = good.base_url();
    let app = spawn_app_with(bad, |c| {
        c.backends[0].parallel = 1;
        c.backends.push(BackendConfig {
            name: "sun".into(),
            kind: BackendKind::Ollama,
            url: good_url,
            models: None,
            api_key_env: None,
            parallel: 1,
            max_loaded: None,
            keep_alive: Default::default(),
            context_length: None,
            model_context_length: Default::default(),
            max_num_ctx: None,
        });
    })
    .await;
    for i in 0..4 {
        let res = app.post("/v1/chat/completions", json!({"model": "auto", "messages": [{"role": "user", "content": format!("q{i}")}]})).await;
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
        let worker = res.headers()["x-coordinator-worker"]
            .to_str()
            .unwrap()
            .to_owned();
        let body: Value = res.json().await.unwrap();
        assert_eq!(
            body["choices"][0]["message"]["content"],
            format!("Echo from {MODEL}: q{i}")
        );
        assert_eq!(worker, "sun");
    }
    assert!(good.request_count() > 0);
    // The failing machine was taken out for a cool-down after its failure instead of
    // being handed every task.
    let tried_on_bad = app.fake.requests_to("/api/chat").len();
    assert!(
        tried_on_bad <= 1,
        "the failing backend kept taking tasks: {tried_on_bad}"
    );
}

#[tokio::test]
async fn a_wait_past_the_route_timeout_says_busy_and_names_the_task() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.latency = Duration::from_secs(3));
    let app = spawn_app_with(fake, |c| c.timeouts.route_s = 1).await;
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "slow"}]}),
        )
        .await;
    assert_eq!(res.status(), 504);
    let body: Value = res.json().await.unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("busy"), "{msg}");
    let id = body["error"]["task_id"].as_str().unwrap();
    assert!(msg.contains(id));
    // The task was queued all along and still finishes.
    let task = app.finished_task(id).await;
    assert_eq!(task["status"], "done");
}

/// A client that does not stream gets the answer in one piece, asked of the backend in
/// one piece: the route timeout covers the wait for a worker, not the generation.
#[tokio::test]
async fn a_whole_answer_is_asked_in_one_piece_and_may_outlast_the_route_timeout() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.latency = Duration::from_millis(1500));
    let app = spawn_app_with(fake, |c| c.timeouts.route_s = 1).await;
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "messages": [{"role": "user", "content": "take your time"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        format!("Echo from {MODEL}: take your time")
    );
    let sent = app.fake.requests_to("/api/chat");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body.as_ref().unwrap()["stream"], false);
    let task = app.finished_task(&id).await;
    assert_eq!(task["status"], "done");
    assert!(task["first_token_ms"].as_i64().unwrap() >= 1500, "{task}");

    // The Ollama front door too.
    app.fake.update_knobs(|k| k.latency = Duration::ZERO);
    app.fake.clear_requests();
    let res = app
        .post(
            "/api/chat",
            json!({"model": MODEL, "stream": false, "messages": [{"role": "user", "content": "once more"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["message"]["content"],
        format!("Echo from {MODEL}: once more")
    );
    let sent = app.fake.requests_to("/api/chat");
    assert_eq!(sent[0].body.as_ref().unwrap()["stream"], false);
}

/// A whole answer that no worker can start within the route timeout is "busy", like a
/// stream; the task stays queued and finishes.
#[tokio::test]
async fn a_whole_answer_that_no_worker_starts_in_time_says_busy() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| {
        k.tokens = Some(40);
        k.token_delay = Duration::from_millis(60);
    });
    let app = spawn_app_with(fake, |c| {
        c.timeouts.route_s = 1;
        c.backends[0].parallel = 1;
    })
    .await;
    // A long stream holds the backend's only slot (its first chunk says it runs).
    let long = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "a long story"}]}),
        )
        .await;
    assert_eq!(long.status(), 200);
    let mut long_body = long.bytes_stream();
    let _first = long_body.next().await.unwrap().unwrap();
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "messages": [{"role": "user", "content": "my turn"}]}),
        )
        .await;
    assert_eq!(res.status(), 504);
    let body: Value = res.json().await.unwrap();
    let id = body["error"]["task_id"].as_str().unwrap().to_owned();
    let task = app.finished_task(&id).await;
    assert_eq!(task["status"], "done");
    while long_body.next().await.is_some() {}
}

/// A chat client that goes away mid-answer (Open WebUI's Stop) cancels its task: the row
/// ends with the reason instead of an answer nobody reads.
#[tokio::test]
async fn a_chat_whose_client_goes_away_is_cancelled_and_recorded() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.token_delay = Duration::from_millis(20));
    let app = spawn_app_with(fake, |_| {}).await;
    let res = app.post("/v1/chat/completions", json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "one two three four five six"}]})).await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut body = res.bytes_stream();
    let _first = body.next().await.unwrap().unwrap();
    drop(body);
    let task = app.finished_task(&id).await;
    assert_eq!(task["status"], "cancelled", "{task}");
    let error = task["error"].as_str().unwrap();
    assert!(
        error.contains("was cancelled: the client went away"),
        "{task}"
    );
}

/// The seed's second note: turn 2 "この市" must reach the model with turn 1 as history,
/// cleaned of our decorations, while the stored prompt stays exactly what the user typed.
#[tokio::test]
async fn follow_up_gets_clean_history_and_the_same_thread() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.server.routing_info = RoutingInfo::HeaderFooter
    })
    .await;
    let q1 = "今日の千葉県柏市の天気を教えて";
    let q2 = "この市の特産物をおしえて";
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "messages": [{"role": "user", "content": q1}]}),
        )
        .await;
    let id1 = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    for h in ["domain", "model", "worker", "queue"] {
        assert!(
            res.headers()
                .contains_key(format!("x-coordinator-{h}").as_str()),
            "{h}"
        );
    }
    let a1: Value = res.json().await.unwrap();
    let decorated = a1["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let model_text = format!("Echo from {MODEL}: {q1}");
    assert!(
        decorated.contains("ルーティング")
            && decorated.contains(&model_text)
            && decorated.len() > model_text.len(),
        "{decorated}"
    );

    app.fake.clear_requests();
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "messages": [
                {"role": "user", "content": q1},
                {"role": "assistant", "content": decorated},
                {"role": "user", "content": q2},
            ]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let id2 = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let sent = app.fake.requests_to("/api/chat");
    let messages = sent[0].body.as_ref().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["user", "assistant", "user"]);
    assert_eq!(messages[0]["content"], q1);
    // Turn 1 went to the web lane (no SearXNG here, so the answer carries the fallback
    // note); what comes back as history is that answer without our header and footer.
    let history_answer = messages[1]["content"].as_str().unwrap();
    assert!(history_answer.ends_with(&model_text), "{history_answer}");
    assert!(
        !history_answer.contains("ルーティング") && !history_answer.contains("*domain:"),
        "our header and footer are stripped: {history_answer}"
    );
    assert_eq!(decorated.matches(history_answer).count(), 1);
    assert_eq!(messages[2]["content"], q2);

    let t1: Value = app
        .get(&format!("/tasks/{id1}"))
        .await
        .json()
        .await
        .unwrap();
    let t2: Value = app
        .get(&format!("/tasks/{id2}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        t2["prompt"], q2,
        "the stored prompt is exactly what the user typed"
    );
    assert_eq!(
        t1["thread_id"], t2["thread_id"],
        "one conversation, one thread"
    );

    // With Open WebUI's chat-id header, that id is the thread.
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-OpenWebUI-Chat-Id", "owui-chat-42")
        .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let id3 = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let t3: Value = app
        .get(&format!("/tasks/{id3}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(t3["thread_id"], "owui-chat-42");
}

#[tokio::test]
async fn a_turn_with_tools_goes_to_a_model_that_supports_them_or_gets_a_clear_error() {
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model_with_tools(TOOL_MODEL)
        .spawn()
        .await
        .unwrap();
    let app = spawn_app_with(fake, |c| c.routing.default_model = Some(MODEL.into())).await;
    let tools = json!([{"type": "function", "function": {"name": "get_current_timestamp", "parameters": {"type": "object"}}}]);
    let res = app
        .post("/v1/chat/completions", json!({"model": "auto", "tools": tools, "messages": [{"role": "user", "content": "hello"}]}))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-coordinator-model"], TOOL_MODEL);

    // Only a model without tools: a clear 400, and the backend never sees the request.
    let app = spawn_app_with(spawn_fake().await, |_| {}).await;
    for model in ["auto", MODEL] {
        let res = app
            .post("/v1/chat/completions", json!({"model": model, "tools": tools, "messages": [{"role": "user", "content": "hello"}]}))
            .await;
        assert_eq!(res.status(), 400, "{model}");
        let body: Value = res.json().await.unwrap();
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.contains("tools"), "{msg}");
    }
    assert_eq!(app.fake.requests_to("/api/chat").len(), 0);
}

#[tokio::test]
async fn errors_shown_in_a_chat_follow_the_prompts_language() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.latency = Duration::from_secs(3));
    let app = spawn_app_with(fake, |c| c.timeouts.route_s = 1).await;
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "遅い質問です"}]}),
        )
        .await;
    assert_eq!(res.status(), 504);
    let body: Value = res.json().await.unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("クラスタが混雑しています")
            && msg.contains(body["error"]["task_id"].as_str().unwrap()),
        "{msg}"
    );

    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.error_after = Some(2));
    let app = spawn_app_with(fake, |_| {}).await;
    let res = app.post("/v1/chat/completions", json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "一 二 三 四 五"}]})).await;
    let body = res.text().await.unwrap();
    assert!(body.contains("回答の途中でエラーが発生しました"), "{body}");
}

/// Structured output: the client's JSON request reaches the backend in the backend's own
/// terms (OpenAI `response_format` → Ollama `format`), and the answer comes back as the
/// model wrote it, without the routing header and footer that would break the JSON.
#[tokio::test]
async fn structured_output_reaches_the_backend_and_comes_back_undecorated() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.server.routing_info = RoutingInfo::HeaderFooter
    })
    .await;
    let schema = json!({ "type": "object", "properties": { "city": { "type": "string" } } });
    let res = app
        .post(
            "/v1/chat/completions",
            json!({
                "model": "auto",
                "messages": [{ "role": "user", "content": "name a city" }],
                "response_format": { "type": "json_schema", "json_schema": { "name": "city", "schema": schema } },
            }),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        format!("Echo from {MODEL}: name a city"),
        "no routing header or footer around structured output"
    );
    let sent = app.last_backend_body("/api/chat");
    assert_eq!(sent["format"], schema);

    // Ollama's own door, streaming: `format: "json"` goes through as is.
    let res = app
        .post(
            "/api/chat",
            json!({ "model": MODEL, "format": "json", "messages": [{ "role": "user", "content": "a city" }] }),
        )
        .await;
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    assert!(
        !text.contains("ルーティング") && !text.contains("Routing"),
        "{text}"
    );
    let sent = app.last_backend_body("/api/chat");
    assert_eq!(sent["format"], "json");
}

/// Open WebUI's Ollama connection sends a model's Keep Alive and Think settings at the
/// root of the body: they reach the Ollama backend as sent (the keep-alive stamped, so
/// that Ollama pushes out the least recently used model: `backend::keep_alive`).
#[tokio::test]
async fn keep_alive_and_think_reach_an_ollama_backend() {
    let app = spawn_app().await;
    let res = app
        .post(
            "/api/chat",
            json!({ "model": MODEL, "stream": false, "keep_alive": "30m", "think": false,
                    "messages": [{ "role": "user", "content": "hi" }] }),
        )
        .await;
    assert_eq!(res.status(), 200);
    let sent = app.last_backend_body("/api/chat");
    crate::helpers::assert_keep_alive(&sent["keep_alive"], 1800);
    assert_eq!(sent["think"], json!(false));
}

/// A client that names the tool the model must call: the OpenAI door takes it, and an
/// Ollama backend (its API has no `tool_choice`) is shown that tool alone.
#[tokio::test]
async fn a_named_tool_choice_reaches_an_ollama_backend_as_that_tool_alone() {
    let fake = FakeLlm::builder()
        .model_with_tools(MODEL)
        .spawn()
        .await
        .unwrap();
    let app = spawn_app_with(fake, |_| {}).await;
    let tool = |name: &str| json!({ "type": "function", "function": { "name": name, "parameters": { "type": "object" } } });
    let res = app
        .post(
            "/v1/chat/completions",
            json!({ "model": MODEL, "messages": [{ "role": "user", "content": "use the right tool" }],
                    "tools": [tool("get_time"), tool("get_weather")],
                    "tool_choice": { "type": "function", "function": { "name": "get_weather" } } }),
        )
        .await;
    assert_eq!(res.status(), 200);
    let sent = app.last_backend_body("/api/chat");
    let names: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_weather"]);
}
