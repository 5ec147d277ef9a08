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
        thread_id: thread.to_owned(),
        task_id: TaskId::new(),
        seq: 0,
        kind: "exchange".to_owned(),
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
