//! Text completions: Ollama's `POST /api/generate` and OpenAI's legacy `POST
//! /v1/completions`, as chat turns (routing, recording, cancellation) that each backend
//! kind is asked in its own form: `/api/generate` on Ollama; the legacy `completions` on
//! an OpenAI-compatible server when a suffix or a raw prompt needs it, else a chat.

use std::time::Duration;

use coordinator::config::BackendKind;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, read_sse, spawn_app, spawn_app_with, spawn_fake, task_id};

async fn openai_backend_app() -> TestApp {
    let fake = spawn_fake().await;
    let url = fake.openai_base_url();
    spawn_app_with(fake, |c| {
        c.backends[0].kind = BackendKind::Openai;
        c.backends[0].url = url;
    })
    .await
}

fn ndjson(body: &str) -> Vec<Value> {
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn generate_streams_ndjson_and_an_ollama_backend_gets_api_generate() {
    let app = spawn_app().await;
    let res = app
        .post(
            "/api/generate",
            json!({"model": MODEL, "prompt": "def add(a, b):", "suffix": "return c",
                   "system": "You complete code.", "keep_alive": "10m", "think": false,
                   "options": {"temperature": 0.1}}),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/x-ndjson");
    let id = task_id(&res);
    let lines = ndjson(&res.text().await.unwrap());
    let text: String = lines
        .iter()
        .filter(|l| l["done"] == false)
        .map(|l| l["response"].as_str().unwrap())
        .collect();
    assert_eq!(
        text,
        format!("Echo from {MODEL}: def add(a, b): [suffix: return c]")
    );
    let last = lines.last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "stop");
    assert!(last["eval_count"].as_u64().unwrap() > 0, "{last}");
    let sent = app.last_backend_body("/api/generate");
    assert_eq!(sent["prompt"], "def add(a, b):");
    assert_eq!(sent["suffix"], "return c");
    assert_eq!(sent["system"], "You complete code.");
    crate::helpers::assert_keep_alive(&sent["keep_alive"], 600);
    assert_eq!(sent["think"], false);
    assert_eq!(sent["options"]["temperature"], 0.1);
    assert_eq!(sent["stream"], true);
    assert!(sent.get("raw").is_none(), "{sent}");
    assert!(app.fake.requests_to("/api/chat").is_empty());
    let row = app.finished_task(&id).await;
    assert_eq!(
        row["prompt"], "def add(a, b):",
        "the stored prompt is as typed"
    );
    assert_eq!(row["status"], "done");

    let res = app
        .post(
            "/api/generate",
            json!({"model": MODEL, "prompt": "2 + 2 =", "raw": true, "stream": false}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let one: Value = res.json().await.unwrap();
    assert_eq!(one["response"], format!("Echo from {MODEL}: 2 + 2 ="));
    assert_eq!(one["done"], true);
    assert_eq!(one["model"], MODEL);
    let sent = app.last_backend_body("/api/generate");
    assert_eq!(sent["raw"], true);
    assert_eq!(sent["stream"], false);
}

#[tokio::test]
async fn generate_on_an_openai_backend_is_a_chat_unless_a_suffix_or_raw_needs_completions() {
    let app = openai_backend_app().await;
    let res = app
        .post(
            "/api/generate",
            json!({"model": MODEL, "prompt": "hello", "system": "Be brief.", "stream": false}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let one: Value = res.json().await.unwrap();
    assert_eq!(one["response"], format!("Echo from {MODEL}: hello"));
    let chat = app.last_backend_body("/v1/chat/completions");
    assert_eq!(chat["messages"][0]["role"], "system");
    assert_eq!(chat["messages"][0]["content"], "Be brief.");
    assert_eq!(chat["messages"][1]["content"], "hello");
    assert!(app.fake.requests_to("/v1/completions").is_empty());

    let res = app
        .post(
            "/api/generate",
            json!({"model": MODEL, "prompt": "fn main() {", "suffix": "}", "system": "Rust."}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let lines = ndjson(&res.text().await.unwrap());
    let text: String = lines
        .iter()
        .filter(|l| l["done"] == false)
        .map(|l| l["response"].as_str().unwrap())
        .collect();
    assert_eq!(
        text,
        format!("Echo from {MODEL}: fn main() {{ [suffix: }}]")
    );
    assert_eq!(lines.last().unwrap()["done"], true);
    let sent = app.last_backend_body("/v1/completions");
    assert_eq!(sent["prompt"], "fn main() {", "the prompt as written");
    assert_eq!(sent["suffix"], "}");
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn legacy_completions_continue_the_prompt_on_both_backend_kinds() {
    for app in [spawn_app().await, openai_backend_app().await] {
        let ollama = app.fake.requests_to("/v1/models").is_empty();
        let res = app
            .post(
                "/v1/completions",
                json!({"model": MODEL, "prompt": "Once upon", "max_tokens": 50}),
            )
            .await;
        assert_eq!(res.status(), 200);
        let id = task_id(&res);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["object"], "text_completion");
        assert_eq!(body["id"], format!("cmpl-{id}"));
        assert_eq!(
            body["choices"][0]["text"],
            format!("Echo from {MODEL}: Once upon")
        );
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert!(body["usage"]["completion_tokens"].as_u64().unwrap() > 0);
        let sent = if ollama {
            app.last_backend_body("/api/generate")
        } else {
            app.last_backend_body("/v1/completions")
        };
        assert_eq!(sent["prompt"], "Once upon");
        if ollama {
            assert_eq!(sent["raw"], true, "continued as written: {sent}");
            assert_eq!(sent["options"]["num_predict"], 50);
        } else {
            assert_eq!(sent["max_tokens"], 50);
        }

        let res = app
            .post(
                "/v1/completions",
                json!({"model": MODEL, "prompt": ["let x ="], "suffix": ";", "stream": true,
                       "stream_options": {"include_usage": true}}),
            )
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        let events = read_sse(res).await;
        let text: String = events
            .iter()
            .filter_map(|(_, e)| e["choices"][0]["text"].as_str())
            .collect();
        assert_eq!(text, format!("Echo from {MODEL}: let x = [suffix: ;]"));
        let finish: Vec<&Value> = events
            .iter()
            .map(|(_, e)| &e["choices"][0]["finish_reason"])
            .filter(|f| f.is_string())
            .collect();
        assert_eq!(finish, [&json!("stop")]);
        let usage = events.iter().find(|(_, e)| e["usage"].is_object()).unwrap();
        assert_eq!(usage.1["choices"], json!([]));
        assert_eq!(events.last().unwrap().1, "[DONE]");
        let sent = if ollama {
            app.last_backend_body("/api/generate")
        } else {
            app.last_backend_body("/v1/completions")
        };
        assert_eq!(sent["suffix"], ";");
        assert!(
            sent.get("raw").is_none(),
            "a suffix needs the template: {sent}"
        );
    }
}

#[tokio::test]
async fn an_empty_generate_prompt_loads_without_a_turn() {
    let app = spawn_app().await;
    for (keep_alive, reason) in [(json!(null), "load"), (json!(0), "unload")] {
        let res = app
            .post(
                "/api/generate",
                json!({"model": MODEL, "keep_alive": keep_alive}),
            )
            .await;
        assert_eq!(res.status(), 200);
        let one: Value = res.json().await.unwrap();
        assert_eq!(one["done"], true);
        assert_eq!(one["done_reason"], reason);
        assert_eq!(one["response"], "");
    }
    assert!(app.fake.requests_to("/api/generate").is_empty());
    crate::embeddings::assert_no_rows(&app).await;
}

#[tokio::test]
async fn a_generate_task_template_is_recognised_as_a_background_task() {
    let app = spawn_app().await;
    let res = app
        .http
        .post(app.url("/api/generate"))
        .header("X-OpenWebUI-Task", "title_generation")
        .json(&json!({"model": MODEL, "stream": false,
                      "prompt": "### Task:\nGenerate a concise title.\n### Chat History:\n<chat_history>\nUSER: how do I bake bread\n</chat_history>"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let id = task_id(&res);
    let row = app.finished_task(&id).await;
    assert_eq!(row["internal_task"], "title_generation", "{row}");
}

#[tokio::test]
async fn a_completion_whose_client_goes_away_is_cancelled() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.token_delay = Duration::from_millis(20));
    let app = spawn_app_with(fake, |_| {}).await;
    for (path, body) in [
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": "one two three four five six"}),
        ),
        (
            "/v1/completions",
            json!({"model": MODEL, "stream": true, "prompt": "one two three four five six"}),
        ),
    ] {
        let res = app.post(path, body).await;
        assert_eq!(res.status(), 200);
        let id = task_id(&res);
        let mut stream = res.bytes_stream();
        let _first = stream.next().await.unwrap().unwrap();
        drop(stream);
        let task = app.finished_task(&id).await;
        assert_eq!(task["status"], "cancelled", "{path}: {task}");
    }
}

/// Memory a completion recalls goes beside its prompt as system text, never into it: the
/// prompt is continued (or filled in) exactly as written, and a raw one gets none.
#[tokio::test]
async fn recalled_memory_never_changes_a_completions_prompt() {
    use chrono::Utc;
    use coordinator::memory::embed::HashEmbedder;
    use coordinator::memory::{MemoryItem, store};

    let fake = spawn_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let config = crate::helpers::test_config(&dir, &fake.base_url());
    let text = "私の猫の名前はミケです\nかわいい名前ですね。";
    let cat = MemoryItem {
        id: uuid::Uuid::now_v7(),
        person: coordinator::domain::Person::default(),
        thread_id: "A".to_owned(),
        task_id: coordinator::domain::TaskId::new(),
        seq: 0,
        kind: store::ItemKind::Exchange,
        subject: None,
        superseded_by: None,
        text: text.to_owned(),
        embedder: HashEmbedder::ID.to_owned(),
        vector: HashEmbedder.embed(text),
        created_at: Utc::now(),
    };
    store::open(&config.store)
        .await
        .unwrap()
        .insert(&[cat])
        .await
        .unwrap();
    let app = crate::helpers::start(config, dir, fake).await;
    let question = "私の猫の名前は何でしたっけ？";

    let res = post_in_a(
        &app,
        "/api/generate",
        json!({"model": MODEL, "prompt": question, "stream": false}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let sent = app.last_backend_body("/api/generate");
    assert_eq!(sent["prompt"], question);
    assert!(
        sent["system"].as_str().is_some_and(|s| s.contains("ミケ")),
        "{sent}"
    );

    let res = post_in_a(
        &app,
        "/api/generate",
        json!({"model": MODEL, "prompt": question, "raw": true, "stream": false}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let sent = app.last_backend_body("/api/generate");
    assert_eq!(sent["prompt"], question);
    assert!(sent.get("system").is_none(), "{sent}");

    // A chat turn still carries it in its prompt, as before.
    let res = post_in_a(
            &app,
            "/api/chat", json!({"model": MODEL, "stream": false, "messages": [{"role": "user", "content": question}]}))
        .await;
    assert_eq!(res.status(), 200);
    let sent = app.last_backend_body("/api/chat");
    assert!(sent["messages"].to_string().contains("ミケ"), "{sent}");
}

/// `POST` in thread `A` (the thread a test's memory is in).
async fn post_in_a(app: &TestApp, path: &str, body: Value) -> reqwest::Response {
    app.http
        .post(app.url(path))
        .header("X-OpenWebUI-Chat-Id", "A")
        .json(&body)
        .send()
        .await
        .unwrap()
}
