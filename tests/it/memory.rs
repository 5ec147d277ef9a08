//! Memory management over HTTP: `GET /memory`, `DELETE /memory/{id}`,
//! `DELETE /memory?thread_id=`, against memories stored before the app started (so this
//! also shows the index is loaded from the store at start).

use chrono::Utc;
use coordinator::domain::TaskId;
use coordinator::memory::embed::HashEmbedder;
use coordinator::memory::{MemoryItem, store};
use serde_json::Value;
use uuid::Uuid;

use crate::helpers::{spawn_fake, start, test_config};

fn item(thread: &str, text: &str) -> MemoryItem {
    MemoryItem {
        id: Uuid::now_v7(),
        person: coordinator::domain::Person::default(),
        thread_id: thread.to_owned(),
        task_id: TaskId::new(),
        seq: 0,
        kind: coordinator::memory::store::ItemKind::Exchange,
        subject: None,
        superseded_by: None,
        text: text.to_owned(),
        embedder: HashEmbedder::ID.to_owned(),
        vector: HashEmbedder.embed(text),
        created_at: Utc::now(),
    }
}

#[tokio::test]
async fn list_search_and_forget_over_http() {
    let fake = spawn_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(&dir, &fake.base_url());
    let cat = item("A", "私の猫の名前はミケです\nかわいい名前ですね。");
    let dog = item("A", "My dog is called Max\nA classic name.");
    let bike = item("B", "My bike is a green Trek\nNice bike.");
    let memory_store = store::open(&config.store).await.unwrap();
    memory_store
        .insert(&[cat.clone(), dog.clone(), bike.clone()])
        .await
        .unwrap();
    let app = start(config, dir, fake).await;

    let list: Value = app.get("/memory").await.json().await.unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 3, "{list}");
    assert!(list["items"][0].get("vector").is_none());
    let a: Value = app.get("/memory?thread_id=A").await.json().await.unwrap();
    assert_eq!(a["items"].as_array().unwrap().len(), 2, "{a}");

    let url = format!("/memory?q={}", urlencode("猫の名前は何でしたっけ"));
    let found: Value = app.get(&url).await.json().await.unwrap();
    assert_eq!(found["items"][0]["id"], cat.id.to_string(), "{found}");
    assert!(
        found["items"][0]["score"].as_f64().unwrap() > 0.2,
        "{found}"
    );
    let limited: Value = app.get("/memory?limit=1").await.json().await.unwrap();
    assert_eq!(limited["items"].as_array().unwrap().len(), 1);

    let forget = |path: String| {
        let http = app.http.clone();
        let url = app.url(&path);
        async move { http.delete(url).send().await.unwrap() }
    };
    assert_eq!(forget(format!("/memory/{}", dog.id)).await.status(), 204);
    let again = forget(format!("/memory/{}", dog.id)).await;
    assert_eq!(again.status(), 404);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    assert_eq!(forget("/memory/not-a-uuid".into()).await.status(), 400);
    let no_thread = forget("/memory".into()).await;
    assert_eq!(
        no_thread.status(),
        400,
        "forgetting everything needs a thread"
    );
    assert_eq!(app.get("/memory?bogus=1").await.status(), 400);

    let gone: Value = forget("/memory?thread_id=A".into())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(gone["deleted"], 1, "{gone}");
    let left: Value = app.get("/memory").await.json().await.unwrap();
    let ids: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![bike.id.to_string()]);
    // Search no longer finds what was forgotten.
    let found: Value = app.get(&url).await.json().await.unwrap();
    assert!(
        found["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["thread_id"] == "B"),
        "{found}"
    );
    app.stop().await;
}

fn urlencode(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// The end to end: a fact told in thread A is recalled in a new thread B. The
/// backend's prompt for B carries the memory; B's stored prompt is what the user typed.
#[tokio::test]
async fn a_fact_from_one_thread_is_recalled_in_another() {
    let app = crate::helpers::spawn_app().await;
    let told = app
        .route(serde_json::json!({"prompt": "私の猫の名前はミケです", "thread_id": "thread-A"}))
        .await;
    let a = app.finished_task(told["task_id"].as_str().unwrap()).await;
    assert_eq!(a["status"], "done");
    app.remembered("thread-A").await;

    app.fake.clear_requests();
    let question = "私の猫の名前は何でしたっけ？";
    let asked = app
        .route(serde_json::json!({"prompt": question, "thread_id": "thread-B"}))
        .await;
    let b = app.finished_task(asked["task_id"].as_str().unwrap()).await;
    let sent = app.fake.requests_to("/api/chat");
    let body = sent[0].body.as_ref().unwrap()["messages"].to_string();
    assert!(
        body.contains("ミケ"),
        "the worker's prompt carries the memory: {body}"
    );
    assert_eq!(
        b["prompt"], question,
        "the stored prompt is exactly what the user typed"
    );
    assert_eq!(b["thread_id"], "thread-B");
}

/// An Open WebUI chat turn: `messages` to `/v1/chat/completions` in chat `chat`, not
/// streamed, and not remembered (so that what memory holds stays as the test wrote it).
async fn owui_turn(app: &crate::helpers::TestApp, chat: &str, messages: Value) -> String {
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-OpenWebUI-Chat-Id", chat)
        .header("X-Coordinator-Remember", "false")
        .json(&serde_json::json!({"model": "qwen2.5:7b", "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let answer: Value = res.json().await.unwrap();
    answer["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Memory says what the conversation does not: a turn whose history holds an earlier
/// turn of its chat word for word gets no memory of that turn (it would only repeat it,
/// and make the prompt longer), while a fact from another chat still comes.
#[tokio::test]
async fn memory_the_history_already_shows_is_not_sent_again() {
    let fake = spawn_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(&dir, &fake.base_url());
    let cat = "私の猫の名前はミケです";
    let answer = "ミケはいい名前ですね。";
    let said = item("chat-T", &format!("{cat}\n{answer}"));
    let mut dog = item("chat-O", "私の猫は三歳でポチという犬と仲良しです");
    dog.kind = store::ItemKind::Fact;
    let memory_store = store::open(&config.store).await.unwrap();
    memory_store.insert(&[said, dog]).await.unwrap();
    let app = start(config, dir, fake).await;

    let question = "私の猫の名前は何でしたっけ？";
    let turn = |history: Value| {
        let mut messages = history.as_array().unwrap().clone();
        messages.push(serde_json::json!({"role": "user", "content": question}));
        owui_turn(&app, "chat-T", Value::Array(messages))
    };
    // Without the earlier turn in its history (a client that sends only the last
    // message), memory says it.
    turn(serde_json::json!([])).await;
    let alone = app.last_backend_body("/api/chat")["messages"].to_string();
    assert!(alone.contains("ミケ") && alone.contains("ポチ"), "{alone}");
    // With it, only the other chat's fact.
    turn(serde_json::json!([
        {"role": "user", "content": cat},
        {"role": "assistant", "content": answer},
    ]))
    .await;
    let sent = app.last_backend_body("/api/chat");
    let text = sent["messages"].to_string();
    assert!(
        text.contains("ポチ"),
        "the other chat's fact is recalled: {text}"
    );
    assert_eq!(
        text.matches("ミケ").count(),
        2,
        "the cat is said by the history, not again by memory: {text}"
    );
    let rows = app.rows().await;
    let row = rows.iter().rev().find(|r| r.prompt == question).unwrap();
    assert_eq!(row.context.memory_dropped, Some(0), "{row:?}");
}

/// Web, internal and opted-out turns never become memories.
#[tokio::test]
async fn web_and_internal_turns_are_never_remembered() {
    let app = crate::helpers::spawn_app().await;
    // A web turn (SearXNG is absent: it falls back, and is still a web task).
    let res = app
        .post("/v1/chat/completions", serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": "今日の柏市の天気は？"}]}))
        .await;
    assert_eq!(res.headers()["x-coordinator-queue"], "tasks:web");
    // An internal task answered by rules.
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-OpenWebUI-Task", "title_generation")
        .header("X-OpenWebUI-Chat-Id", "t-internal")
        .json(&serde_json::json!({"model": "auto", "stream": false, "messages": [{"role": "user", "content": "### Task:\nGenerate a concise title.\n<chat_history>\nUSER: 猫の話\n</chat_history>"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // A plain turn, as a control: it is remembered.
    let told = app
        .route(
            serde_json::json!({"prompt": "I keep my bike in the garage", "thread_id": "t-plain"}),
        )
        .await;
    app.finished_task(told["task_id"].as_str().unwrap()).await;
    only_thread_in_memory(&app, "t-plain").await;
}

/// A turn the user asked not to remember, or one from an Open WebUI temporary chat, is
/// recorded as such and never reaches memory.
#[tokio::test]
async fn opted_out_and_temporary_turns_are_not_remembered() {
    let app = crate::helpers::spawn_app().await;
    let a = app
        .route(
            serde_json::json!({"prompt": "my PIN is 1234", "thread_id": "t1", "remember": false}),
        )
        .await;
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-Coordinator-Remember", "false")
        .json(&serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": "secret plan"}]}))
        .send()
        .await
        .unwrap();
    let b = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-OpenWebUI-Chat-Id", "temporary:abc123")
        .json(&serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": "temporary chat"}]}))
        .send()
        .await
        .unwrap();
    let c = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    for id in [a["task_id"].as_str().unwrap(), &b, &c] {
        let task = app.finished_task(id).await;
        assert_eq!(task["status"], "done");
        assert_eq!(task["remember"], false, "{task}");
    }
    // A remembered control turn after them: once it is in memory, the others were skipped.
    let d = app
        .route(serde_json::json!({"prompt": "remember this one", "thread_id": "t2"}))
        .await;
    app.finished_task(d["task_id"].as_str().unwrap()).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let items: Value = app.get("/memory").await.json().await.unwrap();
        let all = items["items"].as_array().cloned().unwrap_or_default();
        if !all.is_empty() {
            assert!(all.iter().all(|i| i["thread_id"] == "t2"), "{items}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the control turn never reached memory"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A turn wrapped in Open WebUI's RAG template carries documents, not what the user said:
/// it neither reads nor becomes memory, and its row says so for a later backfill.
#[tokio::test]
async fn a_turn_carrying_retrieved_documents_is_not_remembered() {
    let app = crate::helpers::spawn_app().await;
    let rag = "### Task:\nAnswer the user query using the provided context, citing [id] where it applies.\n\
        ### Guidelines:\n- If unsure, say so.\n<context>\n<source id=\"1\" name=\"notes.md\">Our wifi password \
        is on the fridge.</source>\n</context>\n\nwhere is the wifi password?";
    let routed = app
        .route(serde_json::json!({"prompt": rag, "thread_id": "t-rag"}))
        .await;
    let rag_id = routed["task_id"].as_str().unwrap().to_owned();
    let row = app.finished_task(&rag_id).await;
    assert_eq!(row["status"], "done", "{row}");
    assert_eq!(row["remember"], false, "{row}");
    let told = app
        .route(serde_json::json!({"prompt": "my bike is blue", "thread_id": "t-plain"}))
        .await;
    app.finished_task(told["task_id"].as_str().unwrap()).await;
    only_thread_in_memory(&app, "t-plain").await;
}

/// Waits until memory holds something (written after delivery, so polled), then checks that
/// every item is of `thread`: a control turn there, written after the turns under test.
async fn only_thread_in_memory(app: &crate::helpers::TestApp, thread: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let items: Value = app.get("/memory").await.json().await.unwrap();
        let all = items["items"].as_array().cloned().unwrap_or_default();
        if !all.is_empty() {
            assert!(
                all.iter().all(|i| i["thread_id"] == thread),
                "only the turn of {thread}: {items}"
            );
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn of {thread} never reached memory"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
