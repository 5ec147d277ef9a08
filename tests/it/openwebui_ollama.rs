//! Open WebUI with Coordinator as an Ollama connection, end to end, as it calls an Ollama
//! URL (`src/testkit/owui.rs`): the model list, a user's streamed chat turn, the
//! background tasks after it (recognised as such), and document embeddings for its
//! retrieval (`RAG_EMBEDDING_ENGINE=ollama`: `POST /api/embed` with `truncate`).

use coordinator::chat::ChatMessage;
use coordinator::testkit::fake_llm::FakeLlm;
use coordinator::testkit::owui::{Forwarded, Task, chat_body, task_body};
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, spawn_app_with};

const EMBEDDER: &str = "nomic-embed-text";

fn who() -> Forwarded {
    Forwarded {
        user_id: "u-1".into(),
        user_name: "Hana".into(),
        chat_id: "owui-chat-7".into(),
    }
}

async fn send(app: &TestApp, path: &str, body: &Value, task: Option<Task>) -> reqwest::Response {
    let mut req = app.http.post(app.url(path)).json(body);
    for (name, value) in who().headers(task) {
        req = req.header(name, value);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn open_webui_as_an_ollama_connection_chats_runs_its_tasks_and_embeds_documents() {
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model(EMBEDDER)
        .spawn()
        .await
        .unwrap();
    let app = spawn_app_with(fake, |_| {}).await;

    // The connection check and the model list.
    assert_eq!(app.get("/api/version").await.status(), 200);
    let tags: Value = app.get("/api/tags").await.json().await.unwrap();
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&MODEL) && names.contains(&EMBEDDER),
        "{names:?}"
    );
    assert_eq!(app.get("/api/ps").await.status(), 200);

    // A user's turn, streamed.
    let mut chat = vec![ChatMessage::user("パンの焼き方を教えて")];
    let res = send(&app, "/api/chat", &chat_body(MODEL, &chat, true), None).await;
    assert_eq!(res.status(), 200);
    let turn_id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer: String = res
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|l| l["message"]["content"].as_str().map(str::to_owned))
        .collect();
    assert!(answer.contains("パンの焼き方を教えて"), "{answer}");
    let row = app.finished_task(&turn_id).await;
    assert_eq!(row["internal_task"], Value::Null);
    assert_eq!(row["thread_id"], "owui-chat-7");
    chat.push(ChatMessage::assistant(answer));

    // The background tasks after the first answer: each recognised, none a user turn.
    for task in Task::after_answer(true) {
        let res = send(
            &app,
            "/api/chat",
            &task_body(MODEL, *task, &chat),
            Some(*task),
        )
        .await;
        assert_eq!(res.status(), 200, "{task:?}");
        let id = res.headers()["x-coordinator-task-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["done"], true, "{body}");
        let row = app.finished_task(&id).await;
        assert_eq!(row["internal_task"], task.header_value(), "{row}");
    }

    // A document's chunks embedded for retrieval, as Open WebUI asks.
    let chunks = [
        "強力粉 300g を用意する。",
        "一次発酵は 60 分。",
        "220℃ で 20 分焼く。",
    ];
    let res = send(
        &app,
        "/api/embed",
        &json!({"model": EMBEDDER, "input": chunks, "truncate": true}),
        None,
    )
    .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["embeddings"].as_array().unwrap().len(), 3);
    assert_eq!(app.last_backend_body("/api/embed")["input"][2], chunks[2]);
}
