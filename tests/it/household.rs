//! Coordinator in front of realistic machines (the fake's realistic mode: one generation
//! per model at a time, one resident model, load times, a 4096-token window), for what
//! that makes visible. Machines run 100 times faster than life.

use std::time::{Duration, Instant};

use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, Realism, SimStats, Speed};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};

pub(crate) const CHAT: &str = "qwen2.5:7b";
pub(crate) const CODER: &str = "qwen2.5-coder:7b";

async fn one_model_machine(answer_tokens: (usize, usize)) -> FakeLlmServer {
    machine(answer_tokens, 50.0).await
}

pub(crate) async fn machine(answer_tokens: (usize, usize), eval_tps: f64) -> FakeLlmServer {
    FakeLlm::builder()
        .model(CHAT)
        .model(CODER)
        .realistic(Realism {
            time_scale: 100.0,
            speed: Speed {
                load: Duration::from_secs(3),
                prompt_tps: 1000.0,
                eval_tps,
            },
            answer_tokens,
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

async fn app_on(fake: FakeLlmServer) -> TestApp {
    spawn_app_with(fake, |c| c.backends[0].parallel = 1).await
}

async fn chat(app: &TestApp, model: &str, messages: Value) -> Value {
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": model, "messages": messages}),
        )
        .await;
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

/// Waits (bounded) until `check` holds for the machine's stats.
pub(crate) async fn stats_until(
    fake: &FakeLlmServer,
    check: impl Fn(&SimStats) -> bool,
) -> SimStats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = fake.stats();
        if check(&stats) {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "stats never got there: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn two_models_on_a_one_model_machine_cost_a_load_and_an_eviction() {
    let app = app_on(one_model_machine((20, 40)).await).await;
    let user = |text: &str| json!([{"role": "user", "content": text}]);
    chat(&app, CHAT, user("hello")).await;
    chat(&app, CHAT, user("hello again")).await;
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (1, 0), "{stats:?}");
    chat(&app, CODER, user("write a function")).await;
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 1), "{stats:?}");
    let g = app.fake.generations();
    assert!(g[0].load >= Duration::from_secs(3), "{:?}", g[0]);
    assert!(g[1].load < Duration::from_secs(1), "{:?}", g[1]);
    assert!(g[2].load >= Duration::from_secs(3), "{:?}", g[2]);
    app.stop().await;
}

/// An explicit cancel reaches the machine: the generation stops there, and the slot it
/// held serves the next task.
#[tokio::test]
async fn a_cancelled_task_stops_its_generation_on_the_machine() {
    // A laptop-slow answer: 1000 tokens at 10 tokens/s, 100 s of life (1 s here).
    let app = app_on(machine((1000, 1000), 10.0).await).await;
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": CHAT, "stream": true, "messages": [{"role": "user", "content": "a long story"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut body = res.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("\"content\":\"") || seen.matches("data:").count() < 3 {
        let chunk = body.next().await.expect("the answer started").unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let said: Value = app
        .post(&format!("/tasks/{id}/cancel"), json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(said["status"], "cancelled", "{said}");
    let stats = stats_until(&app.fake, |s| s.cancelled == 1).await;
    let g = app.fake.generations().pop().unwrap();
    assert!(g.cancelled && g.tokens < 1000, "{g:?}");
    assert_eq!(stats.tokens_generated, u64::from(g.tokens));
    let row = app.task_until(&id, |r| r["response"].is_string()).await;
    assert_eq!(row["status"], "cancelled", "{row}");
    assert!(
        row["error"]
            .as_str()
            .unwrap()
            .contains("cancelled: asked by the client"),
        "{row}"
    );
    let partial = row["response"].as_str().unwrap();
    let tokens = row["completion_tokens"].as_u64().unwrap();
    assert!(
        !partial.is_empty() && (1..=u64::from(g.tokens)).contains(&tokens),
        "{row} {g:?}"
    );

    chat(
        &app,
        CHAT,
        json!([{"role": "user", "content": "and a short one"}]),
    )
    .await;
    let next = app.fake.generations().pop().unwrap();
    // The rest of the abandoned answer would have held the slot for over a minute.
    assert!(next.waited < Duration::from_secs(30), "{next:?}");
    app.stop().await;
}

/// A pasted log longer than the machine's default window (4096 tokens) is sent with a
/// window that holds it, rounded to a stable size: the machine keeps all of it (the
/// question at its start too), and the row says what was estimated and sent.
#[tokio::test]
async fn a_prompt_longer_than_the_default_window_is_sent_with_a_window_that_holds_it() {
    let app = app_on(one_model_machine((20, 40)).await).await;
    let paste = "2026-11-30 03:00:01 backup: copied 1204 files to nas:/photos (ok)\n".repeat(300);
    let messages = json!([
        {"role": "user", "content": "Is my backup healthy?"},
        {"role": "assistant", "content": "Paste the log and I will look."},
        {"role": "user", "content": format!("Why did the last run fail? Here is the log:\n{paste}")},
    ]);
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": CHAT, "messages": messages}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer: Value = res.json().await.unwrap();
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens > 4096, "{answer}");
    let g = app.fake.generations().pop().unwrap();
    assert!(!g.truncated, "{g:?}");
    assert_eq!(app.fake.stats().truncated_prompts, 0);
    let sent = app.last_backend_body("/api/chat");
    assert_eq!(sent["options"]["num_ctx"], 16_384, "{sent}");
    let row = app.task(&id).await;
    let context = &row["context"];
    assert_eq!(context["num_ctx"], 16_384, "{row}");
    assert_eq!(context["history_dropped"], 0, "{row}");
    assert_eq!(context["memory_dropped"], 0, "{row}");
    // The estimate is the machine's own count here (same rule: a token per four characters).
    assert_eq!(
        context["estimated_prompt_tokens"].as_u64(),
        Some(prompt_tokens),
        "{row}"
    );
    app.stop().await;
}

/// Waits (bounded) for task `id`'s row to end; returns it.
async fn row_ended(app: &TestApp, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = app.task(id).await;
        if row["status"] != "queued" && row["status"] != "running" {
            return row;
        }
        assert!(Instant::now() < deadline, "the task never ended: {row}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What an NDJSON answer (Ollama's `/api/chat`) holds: its text and how many token lines.
pub(crate) fn ndjson_text(bytes: &[u8]) -> (String, u64) {
    let mut text = String::new();
    let mut tokens = 0;
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let value: Value = serde_json::from_slice(line).unwrap();
        if let Some(t) = value["message"]["content"]
            .as_str()
            .filter(|t| !t.is_empty())
        {
            text.push_str(t);
            tokens += 1;
        }
    }
    (text, tokens)
}

/// Stop means stop: Open WebUI's Stop button closes the stream, and the generation on the
/// machine ends with it, within 100 ms; the row ends cancelled with the reason and the
/// answer as far as it went, which begins with what the client had read.
#[tokio::test]
async fn a_client_that_closes_its_stream_stops_the_generation() {
    let app = app_on(machine((1000, 1000), 10.0).await).await;
    let res = app
        .post(
            "/api/chat",
            json!({"model": CHAT, "messages": [{"role": "user", "content": "a long story, please"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut body = res.bytes_stream();
    let first = body.next().await.expect("the answer started").unwrap();
    let (read, read_tokens) = ndjson_text(&first);
    assert!(read_tokens > 0, "{first:?}");
    let closed = Instant::now();
    drop(body);
    let stats = stats_until(&app.fake, |s| s.cancelled == 1).await;
    let stopped_after = closed.elapsed();
    let g = app.fake.generations().pop().unwrap();
    // A token every millisecond here: what the machine made after the client left.
    eprintln!(
        "stop: generation ended {stopped_after:?} after the close; {} tokens made, {read_tokens} read",
        g.tokens
    );
    assert!(
        stopped_after < Duration::from_millis(100),
        "the backend call was dropped {stopped_after:?} after the client left"
    );
    assert!(g.tokens < 1000, "{g:?}");
    assert_eq!(stats.tokens_generated, u64::from(g.tokens));
    let row = app.task_until(&id, |r| r["response"].is_string()).await;
    assert_eq!(row["status"], "cancelled", "{row}");
    let error = row["error"].as_str().unwrap();
    assert!(error.contains("cancelled: the client went away"), "{row}");
    let partial = row["response"].as_str().unwrap();
    assert!(partial.starts_with(&read), "{row} / {read:?}");
    let tokens = row["completion_tokens"].as_u64().unwrap();
    assert!(
        (read_tokens..=u64::from(g.tokens)).contains(&tokens),
        "{row} {g:?}"
    );
    assert!(row["first_token_ms"].is_u64(), "{row}");
    assert_eq!(row["worker_id"], "moon", "{row}");
    app.stop().await;
}

/// Ollama runs one answer per resident model, and as many models side by side as the
/// machine keeps: on a machine that keeps two, a coder turn runs beside a chat turn at
/// once, while a second chat turn waits in Coordinator's queue (not in Ollama's) until the
/// first chat answer is done.
#[tokio::test]
async fn a_machine_that_keeps_two_models_answers_one_turn_of_each_at_once() {
    let fake = FakeLlm::builder()
        .model(CHAT)
        .model(CODER)
        .realistic(Realism {
            time_scale: 100.0,
            max_loaded: 2,
            answer_tokens: (200, 200),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap();
    let app = spawn_app_with(fake, |c| {
        c.backends[0].parallel = 1;
        c.backends[0].max_loaded = Some(2);
    })
    .await;
    // Every answer holds after its first token until released.
    app.fake.hold();
    let open = |model: &'static str, text: &'static str| {
        let url = app.url("/api/chat");
        async move {
            let res = reqwest::Client::new()
                .post(url)
                .json(&json!({"model": model, "messages": [{"role": "user", "content": text}]}))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{text}");
            let mut body = res.bytes_stream();
            body.next().await.expect("the answer started").unwrap();
            body
        }
    };
    let (chat, coder) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(open(CHAT, "a chat turn"), open(CODER, "a coder turn"))
    })
    .await
    .expect("the coder turn starts beside the held chat turn");
    assert_eq!(app.fake.stats().requests, 2, "{:?}", app.fake.stats());

    let second = app
        .route(json!({"prompt": "another chat turn", "model": CHAT}))
        .await;
    let second_id = second["task_id"].as_str().unwrap().to_owned();
    let waiting = app.task(&second_id).await;
    assert_eq!(waiting["status"], "queued", "{waiting}");
    assert_eq!(
        app.fake.stats().requests,
        2,
        "nothing waits in Ollama's queue"
    );

    app.fake.release();
    for mut body in [chat, coder] {
        while let Some(chunk) = body.next().await {
            chunk.unwrap();
        }
    }
    let done = app.finished_task(&second_id).await;
    assert_eq!(done["status"], "done", "{done}");
    let ran: Vec<(String, String)> = app
        .fake
        .generations()
        .into_iter()
        .map(|g| (g.model, g.last_user))
        .collect();
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert_eq!(
        ran[2],
        (CHAT.to_owned(), "another chat turn".to_owned()),
        "{ran:?}"
    );
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 0), "{stats:?}");
    app.stop().await;
}

/// A client waiting for a whole answer that hangs up while its task is queued: the task
/// never reaches the machine.
#[tokio::test]
async fn a_queued_task_whose_client_left_never_starts() {
    let app = app_on(machine((1000, 1000), 10.0).await).await;
    let busy = app
        .post(
            "/api/chat",
            json!({"model": CHAT, "messages": [{"role": "user", "content": "hold the machine"}]}),
        )
        .await;
    assert_eq!(busy.status(), 200);
    let mut busy = busy.bytes_stream();
    busy.next()
        .await
        .expect("the first answer started")
        .unwrap();

    let url = app.url("/v1/chat/completions");
    let leaver = tokio::spawn(async move {
        let _ = reqwest::Client::new()
            .post(url)
            .json(&json!({"model": CHAT, "messages": [{"role": "user", "content": "never mind"}]}))
            .send()
            .await;
    });
    // The second task is recorded and waits for the one slot.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", app.db_path.display()))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let queued_id = loop {
        let queued: Option<String> =
            sqlx::query_scalar("SELECT task_id FROM tasks WHERE status = 'queued'")
                .fetch_optional(&pool)
                .await
                .unwrap();
        if let Some(id) = queued {
            break id;
        }
        assert!(Instant::now() < deadline, "no queued task");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    leaver.abort();
    let _ = leaver.await;
    let row = row_ended(&app, &queued_id).await;
    assert_eq!(row["status"], "cancelled", "{row}");
    assert!(
        row["error"]
            .as_str()
            .unwrap()
            .contains("the client went away"),
        "{row}"
    );
    assert!(row["response"].is_null(), "{row}");
    // The first answer goes on to its end, and nothing else ever ran.
    while let Some(chunk) = busy.next().await {
        chunk.unwrap();
    }
    let ran: Vec<String> = app
        .fake
        .generations()
        .into_iter()
        .map(|g| g.last_user)
        .collect();
    assert_eq!(ran, ["hold the machine"]);
    app.stop().await;
}

/// Three machines, none of which has run anything: the first in the config gets the first
/// task (the household lists its best machine first), not whichever worker wakes first.
#[tokio::test]
async fn with_nothing_learned_the_first_configured_machine_answers() {
    let moon = one_model_machine((20, 40)).await;
    let ai_core = one_model_machine((20, 40)).await;
    let laptop = one_model_machine((20, 40)).await;
    let (ai_core_url, laptop_url) = (ai_core.base_url(), laptop.base_url());
    let app = spawn_app_with(moon, |c| {
        c.backends[0].parallel = 1;
        for (name, url) in [("ai-core", ai_core_url), ("laptop", laptop_url)] {
            let mut b = c.backends[0].clone();
            b.name = name.to_owned();
            b.url = url;
            c.backends.push(b);
        }
    })
    .await;
    for text in ["first question", "second question"] {
        let res = app
            .post(
                "/v1/chat/completions",
                json!({"model": CHAT, "messages": [{"role": "user", "content": text}]}),
            )
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["x-coordinator-worker"], "moon", "{text}");
    }
    assert_eq!(ai_core.stats().requests + laptop.stats().requests, 0);
    app.stop().await;
}
