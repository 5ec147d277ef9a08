//! People: a household of several people on one endpoint. Each person's tasks, event
//! streams and memories are theirs; an Open WebUI key vouches for its users; an admin sees
//! everyone's. The introduction of issue 17, replayed: what one person told Coordinator
//! never reaches another.

use std::time::{Duration, Instant};

use coordinator::config::{Config, KeyConfig, KeyRole};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{spawn_app_with, spawn_fake};

const ALICE: &str = "alice-admin-key-0001";
const BOB: &str = "bob-user-key-0000002";
const WEBUI: &str = "open-webui-key-00003";

/// Alice (admin), Bob, and the Open WebUI connection's key, trusted to name its users.
pub fn household_keys(c: &mut Config) {
    let key = |name: &str, key: &str| KeyConfig {
        name: name.into(),
        key: Some(key.into()),
        ..Default::default()
    };
    c.server.keys = vec![
        KeyConfig {
            role: KeyRole::Admin,
            ..key("alice", ALICE)
        },
        key("bob", BOB),
        KeyConfig {
            trusted_frontend: true,
            ..key("webui", WEBUI)
        },
    ];
}

/// The endpoint, as each person's client reaches it.
pub struct Household {
    pub base: String,
    pub http: reqwest::Client,
}

/// Who is calling: a key, and the Open WebUI user it names (if any).
#[derive(Clone, Copy)]
pub struct As(pub &'static str, pub Option<&'static str>);

pub const U1: As = As(WEBUI, Some("u1"));
pub const U2: As = As(WEBUI, Some("u2"));
pub const ADMIN: As = As(ALICE, None);
pub const BOB_: As = As(BOB, None);

impl Household {
    pub fn request(&self, who: As, method: Method, path: &str) -> RequestBuilder {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(who.0);
        if let Some(user) = who.1 {
            req = req.header("X-OpenWebUI-User-Id", user);
        }
        req
    }

    pub async fn get(&self, who: As, path: &str) -> (StatusCode, Value) {
        let res = self.request(who, Method::GET, path).send().await.unwrap();
        let status = res.status();
        let text = res.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// `POST path` with a JSON body, as `who`.
    pub async fn post(&self, who: As, path: &str, body: Value) -> (StatusCode, Value) {
        let res = self
            .request(who, Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or_default())
    }

    /// Waits until `who`'s task `id` is done, failing at `deadline`.
    pub async fn done(&self, who: As, id: &str, deadline: Instant) {
        loop {
            let (_, task) = self.get(who, &format!("/tasks/{id}")).await;
            if task["status"] == "done" {
                return;
            }
            assert!(Instant::now() < deadline, "task {id} never ran: {task}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A whole (non-streamed) chat turn in Open WebUI chat `chat`; the task id.
    pub async fn chat(&self, who: As, chat: &str, prompt: &str) -> String {
        let res = self
            .request(who, Method::POST, "/v1/chat/completions")
            .header("X-OpenWebUI-Chat-Id", chat)
            .json(&json!({"model": "auto", "messages": [{"role": "user", "content": prompt}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let id = res.headers()["x-coordinator-task-id"]
            .to_str()
            .unwrap()
            .to_owned();
        res.bytes().await.unwrap();
        id
    }

    /// The memories `who` can list (from the store), optionally with a query string.
    pub async fn memories(&self, who: As, query: &str) -> Vec<Value> {
        let (status, body) = self.get(who, &format!("/memory{query}")).await;
        assert_eq!(status, 200, "{body}");
        body["items"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until `who` has a memory of `thread` (written once the answer is out): in
    /// the store, and when `indexed`, in this process's index too (a search finds it).
    pub async fn remembered(&self, who: As, thread: &str, indexed: bool) -> Vec<Value> {
        let query = if indexed {
            format!("?thread_id={thread}&q=anything")
        } else {
            format!("?thread_id={thread}")
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let items = self.memories(who, &query).await;
            if !items.is_empty() {
                return items;
            }
            assert!(Instant::now() < deadline, "{thread} was never remembered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Everything of u1's is out of u2's and Bob's reach, whatever they ask for; the admin
/// sees it. Shared by the embedded and the cluster test.
pub async fn others_cannot_reach_u1s_things(h: &Household, u1_task: &str) {
    // Memory: neither listed, nor searched, nor under its thread.
    for who in [U2, BOB_] {
        for query in ["", "?q=PIN", "?q=bank%20PIN%204321", "?thread_id=c1"] {
            let items = h.memories(who, query).await;
            assert!(
                items.iter().all(|i| !i.to_string().contains("4321")),
                "{query}: {items:?}"
            );
        }
        let (status, body) = h.get(who, "/memory?person=webui/u1").await;
        assert_eq!(status, 403, "{body}");
    }
    // The task, its events and its cancel look exactly like an unknown task's.
    let unknown = uuid::Uuid::now_v7().to_string();
    for who in [U2, BOB_, As(BOB, Some("u1"))] {
        for path in ["", "/events"] {
            let (status, body) = h.get(who, &format!("/tasks/{u1_task}{path}")).await;
            assert_eq!(status, 404, "{path}: {body}");
            let (_, other) = h.get(who, &format!("/tasks/{unknown}{path}")).await;
            assert_eq!(
                body["error"]["code"], other["error"]["code"],
                "no difference to probe"
            );
        }
        let res = h
            .request(who, Method::POST, &format!("/tasks/{u1_task}/cancel"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404);
        // Forgetting: nothing of u1's goes.
        let res = h
            .request(who, Method::DELETE, "/memory?thread_id=c1")
            .send()
            .await
            .unwrap();
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["deleted"], 0, "{body}");
    }
    let u1_items = h.memories(U1, "?thread_id=c1").await;
    assert!(!u1_items.is_empty(), "u1's memory is still there");
    let item = u1_items[0]["id"].as_str().unwrap();
    let res = h
        .request(U2, Method::DELETE, &format!("/memory/{item}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(h.memories(U1, "?thread_id=c1").await.len(), u1_items.len());

    // The admin sees both people, and one of them on asking.
    let (status, task) = h.get(ADMIN, &format!("/tasks/{u1_task}")).await;
    assert_eq!(status, 200);
    assert_eq!(task["person"], "webui/u1");
    let all = h.memories(ADMIN, "").await;
    for person in ["webui/u1", "webui/u2"] {
        assert!(all.iter().any(|i| i["person"] == person), "{all:?}");
    }
    let u2s = h.memories(ADMIN, "?person=webui/u2").await;
    assert!(!u2s.is_empty() && u2s.iter().all(|i| i["person"] == "webui/u2"));
}

#[tokio::test]
async fn one_persons_memories_and_tasks_are_theirs_alone() {
    let app = spawn_app_with(spawn_fake().await, household_keys).await;
    let h = Household {
        base: format!("http://{}", app.addr),
        http: reqwest::Client::new(),
    };
    let told = h.chat(U1, "c1", "Remember this: my bank PIN is 4321").await;
    h.remembered(U1, "c1", true).await;

    // u2 asks in a chat of their own: their backend prompt carries nothing of u1's.
    h.chat(U2, "c2", "What is my bank PIN?").await;
    let prompt = app.last_backend_body("/api/chat").to_string();
    assert!(!prompt.contains("4321"), "{prompt}");
    h.remembered(U2, "c2", true).await;

    // The same question from u1 in a new chat recalls it: memory works, for its owner.
    h.chat(U1, "c3", "What is my bank PIN?").await;
    let prompt = app.last_backend_body("/api/chat").to_string();
    assert!(prompt.contains("4321"), "{prompt}");

    others_cannot_reach_u1s_things(&h, &told).await;

    // Bob's own task is his; Bob cannot pass for u1 by naming them.
    let res = h
        .request(As(BOB, Some("u1")), Method::POST, "/route")
        .json(&json!({"prompt": "hello from bob"}))
        .send()
        .await
        .unwrap();
    let routed: Value = res.json().await.unwrap();
    let bobs = routed["task_id"].as_str().unwrap();
    let (status, task) = h.get(BOB_, &format!("/tasks/{bobs}")).await;
    assert_eq!(
        (status, task["person"].as_str()),
        (StatusCode::OK, Some("bob"))
    );
    let (status, _) = h.get(U1, &format!("/tasks/{bobs}")).await;
    assert_eq!(status, 404);

    // The machines are everyone's to see; their addresses and errors are the admin's.
    let (_, workers) = h.get(BOB_, "/workers").await;
    let moon = &workers["workers"][0];
    assert_eq!(moon["name"], "moon");
    assert!(
        moon.get("url").is_none() && moon.get("last_error").is_none(),
        "{moon}"
    );
    let (_, workers) = h.get(ADMIN, "/workers").await;
    assert!(
        workers["workers"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with("http://")
    );
}

#[tokio::test]
async fn keys_are_checked_case_insensitively_and_refusals_are_counted() {
    let app = spawn_app_with(spawn_fake().await, household_keys).await;
    let http = reqwest::Client::new();
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let res = http
            .get(app.url("/v1/models"))
            .header("Authorization", format!("{scheme} {BOB}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{scheme}");
    }
    for bad in ["Bearer nope-nope-nope-nope", "Basic Ym9iOmJvYg==", BOB] {
        let res = http
            .get(app.url("/v1/models"))
            .header("Authorization", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{bad}");
    }
    let res = http.get(app.url("/v1/models")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("coordinator_unauthorized_total 4\n"),
        "{metrics}"
    );
    // A trusted front end's user id must be a valid person.
    let res = http
        .get(app.url("/v1/models"))
        .bearer_auth(WEBUI)
        .header("X-OpenWebUI-User-Id", "two words")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);

    // Guessing: past a burst of wrong keys, this address is refused with 429 whatever key
    // it sends, so the answers stop telling a right key from a wrong one.
    let mut refused = None;
    for n in 0..50 {
        let res = http
            .get(app.url("/v1/models"))
            .bearer_auth(format!("guess-{n:016}"))
            .send()
            .await
            .unwrap();
        if res.status() == 429 {
            refused = Some(n);
            break;
        }
        assert_eq!(res.status(), 401);
    }
    let refused = refused.expect("50 wrong keys in a row were all answered 401");
    assert!(
        refused <= coordinator::limits::GUESS_BURST as usize,
        "{refused}"
    );
    let res = http
        .get(app.url("/v1/models"))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        429,
        "a right key from a guessing address is refused too"
    );
    assert!(res.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn short_keys_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::helpers::test_config(&dir, "http://127.0.0.1:9");
    config.server.api_keys = vec!["sk-short".into()];
    let Err(e) = coordinator::startup::Application::build(config).await else {
        panic!("a key of 8 characters was accepted");
    };
    let message = format!("{e:#}");
    assert!(
        message.contains("server.api_keys[0]: a key must be at least 16 characters"),
        "{message}"
    );
    assert!(!message.contains("sk-short"), "{message}");
}
