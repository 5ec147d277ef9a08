//! The OpenAI Responses front door (`POST /v1/responses`) end to end, against the fake as
//! an Ollama and as an OpenAI-compatible backend: whole and streamed answers, function
//! calls, Open WebUI as a Responses connection, backend failures, and bad bodies refused in
//! OpenAI's shape without a row (`previous_response_id` is in `responses_previous.rs`).

use coordinator::config::{BackendKind, Config};
use coordinator::testkit::fake_llm::FakeLlm;
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, read_sse, spawn_app_with, spawn_fake};

pub const TOOL_MODEL: &str = "llama3.1:8b";

/// The app with its one backend speaking `kind`, serving `MODEL` and `TOOL_MODEL`.
pub async fn app_of(kind: BackendKind, tweak: impl FnOnce(&mut Config)) -> TestApp {
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model_with_tools(TOOL_MODEL)
        .spawn()
        .await
        .unwrap();
    let openai_url = fake.openai_base_url();
    spawn_app_with(fake, |c| {
        if kind == BackendKind::Openai {
            c.backends[0].kind = BackendKind::Openai;
            c.backends[0].url = openai_url;
        }
        tweak(c);
    })
    .await
}

/// The body the backend got last, whichever kind it is.
pub fn backend_body(app: &TestApp, kind: BackendKind) -> Value {
    app.last_backend_body(match kind {
        BackendKind::Ollama => "/api/chat",
        BackendKind::Openai => "/v1/chat/completions",
    })
}

/// The messages the backend got last.
pub fn sent_messages(app: &TestApp, kind: BackendKind) -> Vec<Value> {
    backend_body(app, kind)["messages"]
        .as_array()
        .cloned()
        .unwrap()
}

/// How many task rows the app's store holds.
pub async fn task_rows(app: &TestApp) -> i64 {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", app.db_path.display()))
        .await
        .unwrap();
    sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(&pool)
        .await
        .unwrap()
}

pub fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap())
        .filter_map(|p| p["text"].as_str())
        .collect()
}

#[tokio::test]
async fn whole_and_streamed_responses_on_both_backend_kinds() {
    for kind in [BackendKind::Ollama, BackendKind::Openai] {
        let app = app_of(kind, |_| {}).await;
        let res = app
            .post(
                "/v1/responses",
                json!({"model": MODEL, "input": "hello there", "instructions": "be brief"}),
            )
            .await;
        assert_eq!(res.status(), 200, "{kind:?}");
        let task_id = res.headers()["x-coordinator-task-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["object"], "response");
        assert_eq!(body["id"], format!("resp_{task_id}"));
        assert_eq!(body["status"], "completed");
        assert_eq!(body["model"], MODEL);
        assert_eq!(body["instructions"], "be brief");
        assert_eq!(
            output_text(&body),
            format!("Echo from {MODEL}: hello there")
        );
        assert!(
            body["usage"]["output_tokens"].as_u64().unwrap() > 0,
            "{body}"
        );
        let sent = sent_messages(&app, kind);
        assert_eq!(sent[0]["role"], "system", "{kind:?}: {sent:?}");
        assert_eq!(sent[0]["content"], "be brief");

        let res = app
            .post(
                "/v1/responses",
                json!({"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_text", "text": "stream me please"}]}], "stream": true}),
            )
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        let events = read_sse(res).await;
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[..4],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added"
            ],
            "{kind:?}: {names:?}"
        );
        assert_eq!(
            names[names.len() - 4..],
            [
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed"
            ],
            "{names:?}"
        );
        for (i, (name, data)) in events.iter().enumerate() {
            assert_eq!(data["type"], name.as_str());
            assert_eq!(data["sequence_number"], i, "numbered in order");
        }
        let deltas: String = events
            .iter()
            .filter(|(n, _)| n == "response.output_text.delta")
            .map(|(_, d)| d["delta"].as_str().unwrap())
            .collect();
        let expected = format!("Echo from {MODEL}: stream me please");
        assert_eq!(deltas, expected);
        let completed = &events.last().unwrap().1["response"];
        assert_eq!(output_text(completed), expected);
        assert!(completed["usage"]["output_tokens"].as_u64().unwrap() > 0);
    }
}

#[tokio::test]
async fn a_streamed_function_call_is_an_output_item_with_its_arguments() {
    let app = app_of(BackendKind::Ollama, |_| {}).await;
    let res = app
        .post(
            "/v1/responses",
            json!({"model": TOOL_MODEL, "stream": true, "input": "call tool look {\"x\":1}",
                   "tools": [{"type": "function", "name": "look"}]}),
        )
        .await;
    let events = read_sse(res).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"response.function_call_arguments.delta")
            && names.contains(&"response.function_call_arguments.done"),
        "{names:?}"
    );
    let done = events
        .iter()
        .find(|(n, d)| n == "response.output_item.done" && d["item"]["type"] == "function_call")
        .unwrap();
    assert_eq!(done.1["item"]["name"], "look");
    assert_eq!(done.1["item"]["arguments"], r#"{"x":1}"#);
}

#[tokio::test]
async fn bad_bodies_get_openai_errors_naming_the_field_and_write_no_row() {
    let app = spawn_app_with(spawn_fake().await, |_| {}).await;
    let bad = [
        (json!({"model": MODEL}), "input"),
        (
            json!({"input": [{"role": "robot", "content": "x"}]}),
            "input[0].role",
        ),
        (
            json!({"input": [{"type": "file_search_call"}]}),
            "input[0].type",
        ),
        (
            json!({"input": "x", "tools": [{"type": "web_search_preview"}]}),
            "tools[0].type",
        ),
        (json!({"input": "x", "stream": "yes"}), "stream"),
        (
            json!({"input": [{"role": "assistant", "content": "only me"}]}),
            "input",
        ),
    ];
    for (request, field) in bad {
        let res = app.post("/v1/responses", request.clone()).await;
        assert_eq!(res.status(), 400, "{request}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["param"], field, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{body}"
        );
    }
    assert_eq!(task_rows(&app).await, 0);
}

/// Open WebUI as a Responses connection: its chat arrives as items with the system prompt
/// as `instructions` and its headers as on a chat-completions connection; the chat keeps
/// its thread, and a background task (here the title) is recognised as one.
#[tokio::test]
async fn open_webui_as_a_responses_connection() {
    let app = spawn_app_with(spawn_fake().await, |_| {}).await;
    let chat = json!({
        "model": MODEL, "stream": true, "seed": 1,
        "instructions": "You are a helpful assistant.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi!"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "how are you?"}]}
        ]
    });
    let res = app
        .http
        .post(app.url("/v1/responses"))
        .header("X-OpenWebUI-Chat-Id", "owui-chat-1")
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let task = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let events = read_sse(res).await;
    assert_eq!(events.last().unwrap().0, "response.completed");
    let row = app.finished_task(&task).await;
    assert_eq!(row["thread_id"], "owui-chat-1");
    assert_eq!(row["prompt"], "how are you?");
    assert_eq!(row["internal_task"], Value::Null);

    let title = json!({
        "model": MODEL, "stream": false,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text",
            "text": "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Chat History:\n<chat_history>\nUSER: hello\n</chat_history>"}]}]
    });
    let res = app
        .http
        .post(app.url("/v1/responses"))
        .header("X-OpenWebUI-Chat-Id", "owui-chat-1")
        .header("X-OpenWebUI-Task", "title_generation")
        .json(&title)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let task = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], "completed");
    assert!(!output_text(&body).is_empty(), "{body}");
    let row = app.finished_task(&task).await;
    assert_eq!(row["internal_task"], "title_generation", "{row}");
}

#[tokio::test]
async fn backend_failures_are_an_http_error_before_the_first_token_and_response_failed_after() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.fail_next = 1);
    let app = spawn_app_with(fake, |_| {}).await;
    let ask = json!({"model": MODEL, "stream": true, "input": "a b c d e"});
    let res = app.post("/v1/responses", ask.clone()).await;
    assert_eq!(res.status(), 502);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "backend_error", "{body}");

    app.fake.update_knobs(|k| k.error_after = Some(2));
    let res = app.post("/v1/responses", ask).await;
    assert_eq!(res.status(), 200);
    let events = read_sse(res).await;
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "response.failed", "{events:?}");
    assert_eq!(last["response"]["status"], "failed");
    let message = last["response"]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("moon reported an error while answering"),
        "{message}"
    );
    assert_eq!(last["response"]["output"][0]["status"], "incomplete");
}
