//! The embedded coordinator end to end: `/route` → store → queue → worker → backend →
//! `GET /tasks/{id}`, with the failure modes a user meets.

use std::sync::Arc;
use std::time::Duration;

use coordinator::chat::ChatMessage;
use coordinator::dispatch::Dispatcher;
use coordinator::domain::{Lane, TaskId, WorkerName};
use coordinator::events::InProcessEvents;
use coordinator::queue::{Delivery, Job, Queue, QueueError, Takes};
use coordinator::routing::Decider;
use coordinator::service::{AppState, Services};
use coordinator::startup::{build_registry, open_store};
use coordinator::turn::{TurnInput, build_turn};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::helpers::{MODEL, TestApp, spawn_app, spawn_app_with, spawn_fake, start, test_config};

#[tokio::test]
async fn route_queues_a_task_that_a_worker_finishes() {
    let app = spawn_app().await;
    let prompt = "Ubuntuでpingコマンドが見つかりません。何をインストールすればいいですか？";
    let res = app.post("/route", json!({ "prompt": prompt })).await;
    assert_eq!(
        res.headers()["x-coordinator-queue"],
        format!("tasks:llm:{MODEL}")
    );
    let routed: Value = res.json().await.unwrap();
    assert_eq!(routed["model"], MODEL);
    assert_eq!(routed["worker_id"], "moon");
    assert_eq!(routed["queue"], format!("tasks:llm:{MODEL}"));
    // The seed's incident: this is a code question for the local model, not a web search.
    assert_eq!(routed["domain"], "code");
    assert_eq!(routed["web_search"], false);
    let id = routed["task_id"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);

    let task = app.finished_task(id).await;
    assert_eq!(task["status"], "done", "{task}");
    assert_eq!(task["prompt"], prompt);
    assert_eq!(task["response"], format!("Echo from {MODEL}: {prompt}"));
    assert_eq!(task["worker_id"], "moon");
    assert_eq!(task["attempts"], 1);
    assert!(task["total_ms"].as_i64().unwrap() >= 0);
    assert!(task["first_token_ms"].is_i64(), "{task}");
    assert!(task["queue_wait_ms"].is_i64(), "{task}");
}

#[tokio::test]
async fn stored_prompt_is_the_original_even_with_history() {
    let app = spawn_app().await;
    let history =
        "これまでの会話:\nユーザー: 千葉県柏市の今日の天気を教えて\nアシスタント: 晴れです";
    let prompt = "この市の特徴は何かある？";
    let routed = app
        .route(json!({ "prompt": prompt, "history": history, "thread_id": "thread-1" }))
        .await;
    let task = app.finished_task(routed["task_id"].as_str().unwrap()).await;
    assert_eq!(
        task["prompt"], prompt,
        "the stored prompt must be the user's text only"
    );
    assert_eq!(task["thread_id"], "thread-1");

    // The worker, and so the backend, did get the history.
    let chats = app.fake.requests_to("/api/chat");
    assert_eq!(chats.len(), 1);
    let sent = chats[0].body.as_ref().unwrap()["messages"].to_string();
    assert!(sent.contains("千葉県柏市"), "{sent}");
    assert!(sent.contains(prompt), "{sent}");

    // And in the database file itself, as `sqlite3 data/coordinator.db` would show.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", app.db_path.display()))
        .await
        .unwrap();
    let stored: String = sqlx::query_scalar("SELECT prompt FROM tasks WHERE task_id = ?")
        .bind(task["task_id"].as_str().unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, prompt);
}

#[tokio::test]
async fn events_stream_the_tokens_as_sse() {
    let fake = spawn_fake().await;
    // A backend that takes a while per token, so the task is still running when the
    // events are read (tokens already produced are replayed, so nothing is missed).
    fake.update_knobs(|k| k.token_delay = std::time::Duration::from_millis(50));
    let app = spawn_app_with(fake, |_| {}).await;
    let routed = app.route(json!({ "prompt": "one two three four" })).await;
    let id = routed["task_id"].as_str().unwrap();
    let events = app.events(id).await;
    let tokens: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "token")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert!(tokens.len() >= 5, "expected one event per word: {events:?}");
    assert_eq!(
        tokens.concat(),
        format!("Echo from {MODEL}: one two three four")
    );
    assert_eq!(events.last().unwrap().0, "done");
    // Read again after it ended: the stored answer is replayed.
    let again = app.events(id).await;
    assert_eq!(again.first().unwrap().1["text"], tokens.concat());
    assert_eq!(again.last().unwrap().0, "done");
}

#[tokio::test]
async fn a_dead_backend_fails_the_task_naming_the_backend() {
    let fake = spawn_fake().await;
    let dir = tempfile::tempdir().unwrap();
    // Port 1 is never served: connections are refused at once.
    let mut config = test_config(&dir, "http://127.0.0.1:1");
    config.backends[0].models = Some(vec![MODEL.to_owned()]);
    let app = start(config, dir, fake).await;
    let routed = app.route(json!({ "prompt": "hello" })).await;
    let task = app.finished_task(routed["task_id"].as_str().unwrap()).await;
    assert_eq!(task["status"], "failed");
    let error = task["error"].as_str().unwrap();
    assert_eq!(error, "moon could not be reached");

    let ready = app.get("/readyz").await;
    assert_eq!(ready.status(), 503);
}

#[tokio::test]
async fn no_reachable_backend_and_no_models_is_a_clear_503() {
    let fake = spawn_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(&dir, "http://127.0.0.1:1");
    let app = start(config, dir, fake).await;
    let res = app.post("/route", json!({ "prompt": "hello" })).await;
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no model is available"),
        "{body}"
    );
}

#[tokio::test]
async fn unknown_model_lists_the_models_that_exist() {
    let app = spawn_app().await;
    let res = app
        .post("/route", json!({ "prompt": "hi", "model": "nope:1b" }))
        .await;
    assert_eq!(res.status(), 404);
    let body: Value = res.json().await.unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("nope:1b") && msg.contains(MODEL), "{msg}");
    assert_eq!(body["error"]["code"], "model_not_found");

    let res = app
        .post(
            "/route",
            json!({ "prompt": "hi", "model": format!("{MODEL}@mars") }),
        )
        .await;
    assert_eq!(res.status(), 404);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["error"]["message"].as_str().unwrap().contains("moon"),
        "{body}"
    );
}

#[tokio::test]
async fn malformed_requests_get_a_400_naming_the_field_and_record_nothing() {
    let app = spawn_app().await;
    for (body, needle) in [
        (r#"{"prompt": 5}"#, "prompt"),
        (r#"{"history": "x"}"#, "prompt"),
        (r#"{"prompt": "x", "model": "two words"}"#, "model"),
        (r#"{"prompt": "#, "malformed"),
        ("", "empty"),
    ] {
        let res = app
            .http
            .post(app.url("/route"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.unwrap();
        let msg = err["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{body} -> {msg}");
    }
    let res = app.get("/tasks/not-a-uuid").await;
    assert_eq!(res.status(), 400);
    let res = app.get(&format!("/tasks/{}", uuid::Uuid::now_v7())).await;
    assert_eq!(res.status(), 404);
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", app.db_path.display()))
        .await
        .unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "bad input must change nothing");
}

#[tokio::test]
async fn health_readiness_and_workers() {
    let app = spawn_app().await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    let ready = app.get("/readyz").await;
    assert_eq!(ready.status(), 200);
    let workers: Value = app.get("/workers").await.json().await.unwrap();
    let w = &workers["workers"][0];
    assert_eq!(w["name"], "moon");
    assert_eq!(w["healthy"], true);
    assert_eq!(w["models"][0], MODEL);
    assert_eq!(w["in_flight"], 0);
}

#[tokio::test]
async fn a_task_interrupted_by_shutdown_is_queued_again_at_restart() {
    let fake = spawn_fake().await;
    // The first run's backend stalls after one token, so the task is mid-answer at shutdown.
    fake.update_knobs(|k| k.stall_after = Some(1));
    let app = spawn_app_with(fake, |c| c.server.shutdown_grace_s = 0).await;
    let routed = app.route(json!({ "prompt": "survive a restart" })).await;
    let id = routed["task_id"].as_str().unwrap().to_owned();
    // Wait until the worker has it (its first token arrives as an event).
    let res = app.get(&format!("/tasks/{id}/events")).await;
    let mut body = res.bytes_stream();
    use futures::StreamExt;
    let first = body.next().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("started"),
        "{first:?}"
    );
    drop(body);
    let running: Value = app.get(&format!("/tasks/{id}")).await.json().await.unwrap();
    assert_eq!(running["status"], "running");

    let (dir, fake) = app.stop().await;
    fake.update_knobs(|k| k.stall_after = None);
    let config = test_config(&dir, &fake.base_url());
    let app = start(config, dir, fake).await;
    let task = app.finished_task(&id).await;
    assert_eq!(task["status"], "done", "{task}");
    assert_eq!(task["attempts"], 2);
    assert_eq!(
        task["response"],
        format!("Echo from {MODEL}: survive a restart")
    );
}

/// Asks `child` to stop, as systemd or Ctrl-C does.
fn sigterm(child: &tokio::process::Child) {
    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
}

/// `coordinator serve` in `dir` on a free loopback port, with `fake` as its one machine
/// (moon) and its log on a pipe of the test's.
fn serve_binary(
    dir: &std::path::Path,
    fake: &coordinator::testkit::fake_llm::FakeLlmServer,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_coordinator"));
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir)
        .env("COORDINATOR_BACKENDS__0__NAME", "moon")
        .env("COORDINATOR_BACKENDS__0__KIND", "ollama")
        .env("COORDINATOR_BACKENDS__0__URL", fake.base_url())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// The README's binary: `coordinator serve` answers, and SIGTERM lets the running task
/// finish before the process exits.
#[tokio::test]
async fn the_binary_serves_and_drains_on_sigterm() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.token_delay = std::time::Duration::from_millis(100));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/coordinator.db");
    let mut child = serve_binary(dir.path(), &fake).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = crate::helpers::listen_addr(&mut lines).await;
    let http = reqwest::Client::new();
    let routed: Value = http
        .post(format!("http://{addr}/route"))
        .json(&json!({ "prompt": "one two three four five" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = routed["task_id"].as_str().unwrap().to_owned();
    // Wait until the worker is answering, then ask the process to stop.
    let res = http
        .get(format!("http://{addr}/tasks/{id}/events"))
        .send()
        .await
        .unwrap();
    let mut events = res.bytes_stream();
    use futures::StreamExt;
    loop {
        let chunk = events.next().await.unwrap().unwrap();
        if String::from_utf8_lossy(&chunk).contains("token") {
            break;
        }
    }
    sigterm(&child);
    let mut log = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        log.push_str(&line);
        log.push('\n');
    }
    let exit = child.wait().await.unwrap();
    assert!(exit.success(), "{exit:?}\n{log}");
    assert!(log.contains("coordinator stopped"), "{log}");
    // The task that was running finished and is recorded, as sqlite3 would show.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    let (status, prompt): (String, String) =
        sqlx::query_as("SELECT status, prompt FROM tasks WHERE task_id = ?")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(status, "done");
    assert_eq!(prompt, "one two three four five");
}

/// A log nobody reads (a terminal paused with Ctrl-S, a pipe whose reader stalled) does
/// not stop the service: with stderr unread far past what a pipe holds and past the lines
/// held for it, every request is answered, and once stderr is read again the lines dropped
/// meanwhile are told.
#[tokio::test]
async fn the_binary_keeps_answering_while_nobody_reads_its_log() {
    use futures::StreamExt;
    use tokio::io::{AsyncBufReadExt, BufReader};
    let fake = spawn_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = serve_binary(dir.path(), &fake)
        // About fifteen lines a request: a 64 KiB pipe is full within a few dozen, the
        // lines held for it within about six hundred.
        .env("RUST_LOG", "trace")
        .env("COORDINATOR_LIMITS__REQUESTS_PER_MINUTE", "0")
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = crate::helpers::listen_addr(&mut lines).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let url = format!("http://{addr}/v1/chat/completions");
    let chat = |n: usize| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let res = http
                .post(url)
                .json(&json!({"model": MODEL, "messages": [{"role": "user", "content": format!("question {n}")}]}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("request {n} was not answered: {e}"));
            assert_eq!(res.status(), 200, "request {n}");
            res.headers()["x-coordinator-task-id"]
                .to_str()
                .unwrap()
                .to_owned()
        }
    };
    let answered = futures::stream::iter(0..800)
        .map(chat)
        .buffer_unordered(8)
        .count()
        .await;
    assert_eq!(answered, 800);

    // stderr is read again: a task's line comes through once the lines held before it
    // have, then the process stops.
    let (seen, mut log) = tokio::sync::mpsc::unbounded_channel::<String>();
    let reading = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if seen.send(line).is_err() {
                break;
            }
        }
    });
    let marker = chat(800).await;
    let mut text = String::new();
    while !text.contains(&marker) {
        let line = tokio::time::timeout(Duration::from_secs(20), log.recv())
            .await
            .expect("the log flows again")
            .expect("the log is still open");
        text.push_str(&line);
        text.push('\n');
    }
    let metrics = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("coordinator_log_lines_dropped_total "))
        .expect("the count of dropped lines is shown")
        .parse()
        .unwrap();
    assert!(dropped > 0, "{metrics}");
    sigterm(&child);
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the process stops")
        .unwrap();
    reading.await.unwrap();
    while let Ok(line) = log.try_recv() {
        text.push_str(&line);
        text.push('\n');
    }
    assert!(exit.success(), "{exit:?}");
    assert!(text.contains("coordinator stopped"));
    let told = text
        .lines()
        .find(|l| l.contains("log lines were dropped"))
        .expect("the dropped lines are told");
    assert!(told.contains("total="), "{told}");
}

#[tokio::test]
async fn api_keys_guard_everything_but_health() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.server.api_keys = vec!["sk-home-0123456789".into()]
    })
    .await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    for path in ["/v1/models", "/api/tags", "/workers", "/metrics"] {
        let res = app.get(path).await;
        if path == "/metrics" {
            assert_eq!(res.status(), 200, "metrics stay readable for scrapers");
            continue;
        }
        assert_eq!(res.status(), 401, "{path}");
        let body: Value = res.json().await.unwrap();
        if path.starts_with("/api/") {
            assert_eq!(
                body["error"], "missing or invalid API key",
                "Ollama's shape"
            );
        } else {
            assert_eq!(body["error"]["code"], "invalid_api_key");
        }
    }
    let res = app
        .http
        .post(app.url("/route"))
        .bearer_auth("wrong")
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let res = app
        .http
        .post(app.url("/route"))
        .bearer_auth("sk-home-0123456789")
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// A queue whose consumers live in another process: when a job is queued, that process
/// must already find the task's row in the database file (a separate connection sees only
/// what is committed), or it would skip the job as unknown.
struct OtherProcessQueue {
    db: std::path::PathBuf,
    queued: std::sync::Mutex<Vec<(String, bool)>>,
    enqueued: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl Queue for OtherProcessQueue {
    async fn enqueue(&self, job: Job) -> Result<(), QueueError> {
        let url = format!("sqlite://{}", self.db.display());
        let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let found: Option<i64> = sqlx::query_scalar("SELECT 1 FROM tasks WHERE task_id = ?")
            .bind(job.task_id.to_string())
            .fetch_optional(&mut other)
            .await
            .unwrap();
        self.queued
            .lock()
            .unwrap()
            .push((job.task_id.to_string(), found.is_some()));
        self.enqueued.notify_one();
        Ok(())
    }
    async fn dequeue_from(&self, _: &Takes, _: &WorkerName) -> Result<Delivery, QueueError> {
        std::future::pending().await
    }
    async fn awaited(&self, _: &[Lane]) -> Result<Vec<Lane>, QueueError> {
        Ok(Vec::new())
    }
    async fn ack(&self, _: &Delivery) -> Result<(), QueueError> {
        Ok(())
    }
    async fn class_depths(
        &self,
    ) -> Result<Vec<(Lane, coordinator::domain::Priority, usize)>, QueueError> {
        Ok(Vec::new())
    }
    async fn ahead(
        &self,
        _: &Lane,
        _: coordinator::domain::Priority,
        _: &coordinator::domain::Person,
    ) -> Result<coordinator::placement::Ahead, QueueError> {
        Ok(coordinator::placement::Ahead::NONE)
    }
    async fn position(&self, _: &Lane, _: TaskId) -> Result<Option<usize>, QueueError> {
        Ok(None)
    }
    async fn ping(&self) -> Result<(), QueueError> {
        Ok(())
    }
    async fn task_ids(&self) -> Result<std::collections::HashSet<TaskId>, QueueError> {
        Ok(Default::default())
    }
}

#[tokio::test]
async fn a_job_for_another_process_is_queued_only_once_its_row_is_durable() {
    let fake = spawn_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir, &fake.base_url());
    config.memory.enabled = false;
    let db = dir.path().join("coordinator.db");
    let store = open_store(&config).await.unwrap();
    let registry = build_registry(&config, None).unwrap();
    registry.refresh_all().await;
    let queue = Arc::new(OtherProcessQueue {
        db: db.clone(),
        queued: Default::default(),
        enqueued: tokio::sync::Notify::new(),
    });
    let events: Arc<dyn coordinator::events::EventBus> = Arc::new(InProcessEvents::new());
    let service = AppState::from(Services {
        decider: Decider::new(config.routing.clone(), config.internal_tasks.clone()),
        config: Arc::new(config),
        dispatch: Dispatcher::cluster(store.clone(), queue.clone(), events.clone(), None),
        store,
        events,
        directory: Arc::new(registry),
        started_at: chrono::Utc::now(),
        metrics: Arc::default(),
        keys: Arc::default(),
        limits: Arc::default(),
        shutdown: Default::default(),
        memory: None,
        rag: None,
    });
    // Another process holds the database's write lock, so the task's row cannot be
    // committed yet.
    let mut blocker = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut blocker)
        .await
        .unwrap();
    let input = TurnInput {
        messages: vec![ChatMessage::user("a question for another machine")],
        ..Default::default()
    };
    let turn = build_turn(input, &service.config.history).unwrap();
    let submitting = tokio::spawn({
        let service = service.clone();
        async move { service.submit(turn).await.map(|s| s.task_id) }
    });
    // The job must not leave while its row is not committed: give a wrong order the
    // time to show (it would queue at once), then let the row be written.
    let early = tokio::time::timeout(Duration::from_millis(300), queue.enqueued.notified()).await;
    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    let task_id = submitting.await.unwrap().unwrap();
    let queued = queue.queued.lock().unwrap().clone();
    assert_eq!(queued, vec![(task_id.to_string(), true)]);
    assert!(
        early.is_err(),
        "the job was queued while its row was not committed"
    );
}

/// Waits until task `id` has started on a worker (its `started` event), then returns its
/// row as `GET /tasks/{id}` shows it.
async fn once_started(app: &TestApp, id: &str) -> Value {
    use futures::StreamExt;
    let res = app.get(&format!("/tasks/{id}/events")).await;
    let mut body = res.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("started") {
        let chunk = body
            .next()
            .await
            .expect("events ended before the start")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    app.get(&format!("/tasks/{id}")).await.json().await.unwrap()
}

/// A fresh task whose worker has a free slot skips the queue: its row is written already
/// running on that worker, with no separate claim. Without a free slot it waits in the
/// queue, and the backend's limit holds across both ways in; once a slot is free, the
/// worker claims it from the queue.
#[tokio::test]
async fn a_task_goes_straight_to_a_free_worker_and_waits_in_the_queue_when_none_is() {
    let fake = spawn_fake().await;
    // Every answer stalls after its first token: each task keeps its slot.
    fake.update_knobs(|k| k.stall_after = Some(1));
    // Two slots, and a worker loop that holds none while it waits for the queue.
    let app = spawn_app_with(fake, |c| c.backends[0].parallel = 2).await;

    let mut running = Vec::new();
    for prompt in ["first", "second"] {
        let task = app.route(json!({ "prompt": prompt })).await;
        let task = once_started(&app, task["task_id"].as_str().unwrap()).await;
        assert_eq!(task["status"], "running", "{task}");
        assert_eq!(task["worker_id"], "moon");
        assert_eq!(task["attempts"], 1);
        assert_eq!(
            task["updated_at"], task["created_at"],
            "handed over with its row, never claimed: {task}"
        );
        running.push(task["task_id"].as_str().unwrap().to_owned());
    }

    // Both slots are busy: the third task waits, neither handed over nor taken.
    let third = app.route(json!({ "prompt": "third" })).await;
    let id = third["task_id"].as_str().unwrap();
    let third: Value = app.get(&format!("/tasks/{id}")).await.json().await.unwrap();
    assert_eq!(third["status"], "queued", "{third}");
    assert_eq!(third["attempts"], 0);
    assert_eq!(app.fake.requests_to("/api/chat").len(), 2);

    // A slot frees: the worker claims the third task from the queue.
    let res = app
        .post(&format!("/tasks/{}/cancel", running[0]), json!({}))
        .await;
    assert_eq!(res.status(), 200);
    let third = once_started(&app, id).await;
    assert_eq!(third["status"], "running", "{third}");
    assert_eq!(third["attempts"], 1);
    assert_ne!(
        third["updated_at"], third["created_at"],
        "claimed from the queue: {third}"
    );
    assert_eq!(app.fake.requests_to("/api/chat").len(), 3);
    app.stop().await;
}

/// `POST /tasks/{id}/cancel`: a queued task never reaches the backend; a running one stops,
/// its client hears why and its backend slot is free again; a finished or unknown task is
/// left as it is.
#[tokio::test]
async fn a_cancelled_task_stops_where_it_is() {
    let fake = spawn_fake().await;
    // Every answer stalls after its first token; one slot, which the running task holds.
    fake.update_knobs(|k| k.stall_after = Some(1));
    let app = spawn_app_with(fake, |c| c.backends[0].parallel = 1).await;

    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "tell me a long story"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let running = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut body = res.bytes_stream();
    use futures::StreamExt;
    let first = body.next().await.unwrap().unwrap();
    assert!(!first.is_empty(), "the answer started");

    let queued = app.route(json!({ "prompt": "and another one" })).await;
    let queued = queued["task_id"].as_str().unwrap().to_owned();
    let row: Value = app.task(&queued).await;
    assert_eq!(row["status"], "queued", "{row}");

    let cancel = |id: String| {
        let app = &app;
        async move {
            let res = app.post(&format!("/tasks/{id}/cancel"), json!({})).await;
            let status = res.status();
            (status, res.json::<Value>().await.unwrap())
        }
    };
    let (status, said) = cancel(queued.clone()).await;
    assert_eq!(status, 200, "{said}");
    assert_eq!(said["status"], "cancelled");
    let row: Value = app.task(&queued).await;
    assert_eq!(row["status"], "cancelled", "{row}");
    assert!(
        row["error"].as_str().unwrap().contains("cancelled"),
        "{row}"
    );
    assert!(row["response"].is_null(), "never started: {row}");

    app.fake.update_knobs(|k| k.stall_after = None);
    let (status, said) = cancel(running.clone()).await;
    assert_eq!(
        (status.as_u16(), said["status"].as_str()),
        (200, Some("cancelled"))
    );
    let mut rest = String::new();
    while let Some(chunk) = body.next().await {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(rest.contains("cancelled"), "the client hears why: {rest}");
    // The one token the client had is the partial answer on the cancelled row.
    let row = app
        .task_until(&running, |r| r["response"].is_string())
        .await;
    assert_eq!(row["status"], "cancelled", "{row}");
    let partial = row["response"].as_str().unwrap();
    assert!(
        !partial.is_empty() && String::from_utf8_lossy(&first).contains(partial),
        "{row}"
    );
    assert_eq!(row["completion_tokens"], 1, "{row}");
    // Its stored events replay the partial answer and why it stopped.
    let events = app.events(&running).await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["token", "error"], "{events:?}");

    // The slot is free again: a new task runs to its end, and the cancelled queued task
    // never reached the backend.
    let next = app.route(json!({ "prompt": "a short one" })).await;
    let next = next["task_id"].as_str().unwrap().to_owned();
    let done = once_done(&app, &next).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(
        app.fake.requests_to("/api/chat").len(),
        2,
        "the queued task never ran"
    );
    let row: Value = app.task(&queued).await;
    assert_eq!(
        row["status"], "cancelled",
        "a cancelled task stays cancelled: {row}"
    );
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("coordinator_tasks_cancelled_total 2\n"),
        "{metrics}"
    );

    let (status, said) = cancel(next).await;
    assert_eq!(
        (status.as_u16(), said["status"].as_str()),
        (200, Some("already_ended"))
    );
    let (status, _) = cancel(TaskId::new().to_string()).await;
    assert_eq!(status, 404);
    app.stop().await;
}

/// Waits for task `id`'s events to end, then returns its row.
async fn once_done(app: &TestApp, id: &str) -> Value {
    use futures::StreamExt;
    let res = app.get(&format!("/tasks/{id}/events")).await;
    let mut body = res.bytes_stream();
    while let Some(chunk) = body.next().await {
        chunk.unwrap();
    }
    app.task(id).await
}

/// `coordinator --version` names the commit the binary was built from (build.rs), the way
/// the benchmarks' reports name what they measured.
#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let prefix = concat!("coordinator ", env!("CARGO_PKG_VERSION"), " (commit ");
    let commit = text
        .trim()
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    let hash = commit.strip_suffix("+dirty").unwrap_or(commit);
    assert!(
        hash == "unknown" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
}
