//! The Anthropic Messages front door (`POST /v1/messages`) end to end, against the fake as
//! an Ollama and as an OpenAI-compatible backend: whole and streamed answers, tool use and
//! results, `x-api-key`, Open WebUI's background tasks recognised, and errors in
//! Anthropic's shape without a row.

use coordinator::config::BackendKind;
use serde_json::{Value, json};

use crate::helpers::{MODEL, read_sse, spawn_app_with, spawn_fake};
use crate::people::household_keys;
use crate::responses::{TOOL_MODEL, app_of, backend_body, task_rows};

fn text_of(message: &Value) -> String {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect()
}

#[tokio::test]
async fn whole_and_streamed_messages_on_both_backend_kinds() {
    for kind in [BackendKind::Ollama, BackendKind::Openai] {
        let app = app_of(kind, |_| {}).await;
        let res = app
            .post(
                "/v1/messages",
                json!({"model": MODEL, "max_tokens": 200, "system": "be brief", "temperature": 0.3,
                       "stop_sequences": ["END"], "messages": [{"role": "user", "content": "hello there"}]}),
            )
            .await;
        assert_eq!(res.status(), 200, "{kind:?}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["type"], "message");
        assert_eq!(body["role"], "assistant");
        assert!(body["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(text_of(&body), format!("Echo from {MODEL}: hello there"));
        assert_eq!(body["stop_reason"], "end_turn");
        assert!(body["usage"]["output_tokens"].as_u64().unwrap() > 0);
        let sent = backend_body(&app, kind);
        assert_eq!(sent["messages"][0]["role"], "system", "{sent}");
        assert_eq!(sent["messages"][0]["content"], "be brief");
        let stop = match kind {
            BackendKind::Ollama => &sent["options"]["stop"],
            BackendKind::Openai => &sent["stop"],
        };
        assert_eq!(*stop, json!(["END"]), "{sent}");

        let res = app
            .post(
                "/v1/messages",
                json!({"model": MODEL, "max_tokens": 200, "stream": true,
                       "messages": [{"role": "user", "content": [{"type": "text", "text": "stream me please"}]}]}),
            )
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        let events = read_sse(res).await;
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[..3],
            ["message_start", "ping", "content_block_start"],
            "{kind:?}: {names:?}"
        );
        assert_eq!(
            names[names.len() - 3..],
            ["content_block_stop", "message_delta", "message_stop"],
            "{names:?}"
        );
        for (name, data) in &events {
            assert_eq!(data["type"], name.as_str());
        }
        let text: String = events
            .iter()
            .filter(|(n, _)| n == "content_block_delta")
            .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, format!("Echo from {MODEL}: stream me please"));
        let delta = &events[events.len() - 2].1;
        assert_eq!(delta["delta"]["stop_reason"], "end_turn");
        assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);
    }
}

#[tokio::test]
async fn tool_use_and_tool_result_go_round_on_both_backend_kinds() {
    for kind in [BackendKind::Ollama, BackendKind::Openai] {
        let app = app_of(kind, |_| {}).await;
        let tools = json!([{"name": "get_weather", "description": "Weather for a city",
                            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
        let ask = json!({"role": "user", "content": r#"call tool get_weather {"city":"Kashiwa"}"#});
        let res = app
            .post(
                "/v1/messages",
                json!({"model": TOOL_MODEL, "max_tokens": 100, "tools": tools, "messages": [ask]}),
            )
            .await;
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["stop_reason"], "tool_use", "{kind:?}: {body}");
        let used = body["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_use")
            .unwrap()
            .clone();
        assert_eq!(used["name"], "get_weather");
        assert_eq!(used["input"], json!({"city": "Kashiwa"}));

        let res = app
            .post(
                "/v1/messages",
                json!({"model": TOOL_MODEL, "max_tokens": 100, "tools": tools, "stream": true, "messages": [
                    ask,
                    {"role": "assistant", "content": [used]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": used["id"], "content": "sunny, 24C"}]}
                ]}),
            )
            .await;
        let events = read_sse(res).await;
        let text: String = events
            .iter()
            .filter_map(|(_, d)| d["delta"]["text"].as_str())
            .collect();
        assert!(
            text.contains("get_weather") && text.contains("sunny, 24C"),
            "{kind:?}: {text}"
        );
        let sent = backend_body(&app, kind);
        assert_eq!(sent["messages"][2]["role"], "tool", "{sent}");
    }
}

#[tokio::test]
async fn a_streamed_tool_use_is_a_block_with_its_input() {
    let app = app_of(BackendKind::Ollama, |_| {}).await;
    let res = app
        .post(
            "/v1/messages",
            json!({"model": TOOL_MODEL, "max_tokens": 100, "stream": true, "tools": [{"name": "look"}],
                   "messages": [{"role": "user", "content": "call tool look {\"x\":1}"}]}),
        )
        .await;
    let events = read_sse(res).await;
    let start = events
        .iter()
        .find(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(start.1["content_block"]["name"], "look");
    let partial = events
        .iter()
        .find_map(|(_, d)| d["delta"]["partial_json"].as_str())
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(partial).unwrap(),
        json!({"x": 1})
    );
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn the_key_may_come_as_x_api_key_and_refusals_are_anthropic_shaped() {
    let app = app_of(BackendKind::Ollama, household_keys).await;
    let body =
        json!({"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]});
    let res = app
        .http
        .post(app.url("/v1/messages"))
        .header("x-api-key", "bob-user-key-0000002")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let task = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", app.db_path.display()))
        .await
        .unwrap();
    let person: String = sqlx::query_scalar("SELECT person FROM tasks WHERE task_id = ?")
        .bind(&task)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(person, "bob", "the x-api-key names its person");

    let res = app
        .http
        .post(app.url("/v1/messages"))
        .header("x-api-key", "not-a-key-at-all-00")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "authentication_error");
}

#[tokio::test]
async fn open_webui_background_tasks_are_recognised() {
    let app = spawn_app_with(spawn_fake().await, |_| {}).await;
    let res = app
        .http
        .post(app.url("/v1/messages"))
        .header("X-OpenWebUI-Task", "title_generation")
        .json(&json!({"model": MODEL, "max_tokens": 50,
                      "messages": [{"role": "user", "content": "### Task:\nGenerate a concise title for the chat"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let task = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let row = app.finished_task(&task).await;
    assert_eq!(row["internal_task"], "title_generation", "{row}");
}

#[tokio::test]
async fn bad_bodies_get_anthropic_errors_naming_the_field_and_write_no_row() {
    let app = spawn_app_with(spawn_fake().await, |_| {}).await;
    let bad = [
        (
            json!({"model": MODEL, "messages": [{"role": "user", "content": "x"}]}),
            "max_tokens",
        ),
        (
            json!({"max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x"}}]}]}),
            "messages[0].content[0].source",
        ),
        (
            json!({"max_tokens": 5, "system": 1, "messages": []}),
            "system",
        ),
        (
            json!({"max_tokens": 5, "messages": [{"role": "assistant", "content": "x"}]}),
            "messages",
        ),
        (
            json!({"max_tokens": 5, "model": "nope", "messages": [{"role": "user", "content": "x"}]}),
            "nope",
        ),
    ];
    for (request, says) in bad {
        let res = app.post("/v1/messages", request.clone()).await;
        assert!(res.status().is_client_error(), "{request}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["type"], "error", "{body}");
        assert!(
            body["error"]["type"].as_str().unwrap().ends_with("_error"),
            "{body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    let res = app.get("/v1/messages").await;
    assert_eq!(res.status(), 405);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(task_rows(&app).await, 0);
}

#[tokio::test]
async fn backend_failures_are_an_anthropic_error_before_the_first_token_and_an_error_event_after() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.fail_next = 1);
    let app = spawn_app_with(fake, |_| {}).await;
    let ask = json!({"model": MODEL, "max_tokens": 50, "stream": true,
                     "messages": [{"role": "user", "content": "a b c d e"}]});
    let res = app.post("/v1/messages", ask.clone()).await;
    assert_eq!(res.status(), 502);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error", "{body}");

    app.fake.update_knobs(|k| k.error_after = Some(2));
    let res = app.post("/v1/messages", ask).await;
    assert_eq!(res.status(), 200);
    let events = read_sse(res).await;
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "error", "{events:?}");
    assert_eq!(last["error"]["type"], "api_error");
    let message = last["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("moon reported an error while answering"),
        "{message}"
    );
}
