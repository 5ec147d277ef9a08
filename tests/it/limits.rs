//! Bounded work: a person who sends too much, and a lane that holds too much, are refused
//! with 429 and `Retry-After` in the front door's own error shape, and nothing is recorded.

use coordinator::limits::LimitsConfig;
use serde_json::{Value, json};

use crate::helpers::{MODEL, spawn_app_with, spawn_fake};

async fn tasks_in_store(db: &std::path::Path) -> i64 {
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query_scalar("SELECT count(*) FROM tasks")
        .fetch_one(&mut c)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_person_past_their_rate_gets_429_with_retry_after_in_each_shape() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.limits = LimitsConfig {
            requests_per_minute: 1,
            burst: 3,
            queued_per_lane: 0,
        };
    })
    .await;
    for n in 0..3 {
        app.route(json!({"prompt": format!("hello {n}")})).await;
    }
    let before = tasks_in_store(&app.db_path).await;

    let res = app.post("/route", json!({"prompt": "one more"})).await;
    assert_eq!(res.status(), 429);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");

    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "もう一つ質問です"}]}),
        )
        .await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("リクエストが多すぎます"), "{message}");

    let res = app
        .post(
            "/api/chat",
            json!({"model": MODEL, "messages": [{"role": "user", "content": "and another"}]}),
        )
        .await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("too many requests"),
        "Ollama's shape: {body}"
    );
    assert_eq!(
        tasks_in_store(&app.db_path).await,
        before,
        "nothing recorded"
    );
}

#[tokio::test]
async fn a_full_lane_refuses_new_work_until_it_drains() {
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.stall_after = Some(1));
    let app = spawn_app_with(fake, |c| {
        c.backends[0].parallel = 1;
        c.limits.queued_per_lane = 2;
    })
    .await;
    // One runs (stalled), two wait: the lane is full.
    let running = app.route(json!({"prompt": "first"})).await;
    let first = running["task_id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while app.task(&first).await["status"] != "running" {
        assert!(
            std::time::Instant::now() < deadline,
            "the first task never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let waiting = [
        app.route(json!({"prompt": "second"})).await,
        app.route(json!({"prompt": "third"})).await,
    ];
    let res = app.post("/route", json!({"prompt": "fourth"})).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "10");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "queue_full", "{body}");
    assert_eq!(tasks_in_store(&app.db_path).await, 3);

    // Once the backend answers again the lane drains and takes work again.
    app.fake.update_knobs(|k| k.stall_after = None);
    let said: Value = app
        .post(&format!("/tasks/{first}/cancel"), json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(said["status"], "cancelled");
    for w in &waiting {
        let done = app.finished_task(w["task_id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "done", "{done}");
    }
    app.route(json!({"prompt": "fourth, again"})).await;
}

/// Another program holds the database's write lock (the `sqlite3` shell in a transaction,
/// a backup): once the writer has waited for it a moment, `/readyz` says the store cannot
/// write and new turns are refused at once with 503 `store_unavailable`, nothing recorded;
/// when the lock goes, the waiting turn is recorded and answered and new turns go through.
#[tokio::test]
async fn a_locked_store_refuses_new_turns_at_once_and_readyz_says_so() {
    use sqlx::Connection;
    let app = crate::helpers::spawn_app().await;
    app.route(json!({"prompt": "before the lock"})).await;
    let mut holder =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}", app.db_path.display()))
            .await
            .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .unwrap();

    // This turn's row waits for the lock.
    let waiting = {
        let http = app.http.clone();
        let url = app.url("/v1/chat/completions");
        tokio::spawn(async move {
            http.post(url)
                .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "during the lock"}]}))
                .send()
                .await
                .unwrap()
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    let ready = loop {
        let res = app.get("/readyz").await;
        if res.status() == 503 {
            break res.json::<Value>().await.unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "readyz never saw the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(ready["store"], false, "{ready}");
    assert!(
        ready["problems"][0]
            .as_str()
            .unwrap()
            .contains("task store"),
        "{ready}"
    );

    for (path, body) in [
        ("/route", json!({"prompt": "refused"})),
        (
            "/v1/chat/completions",
            json!({"model": "auto", "messages": [{"role": "user", "content": "記録できますか"}]}),
        ),
    ] {
        let res = app.post(path, body).await;
        assert_eq!(res.status(), 503, "{path}");
        assert_eq!(res.headers()["retry-after"], "5");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
        if path == "/v1/chat/completions" {
            let m = body["error"]["message"].as_str().unwrap();
            assert!(m.contains("記録"), "{m}");
        }
    }
    let res = app
        .post(
            "/api/chat",
            json!({"model": MODEL, "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("task store"),
        "{body}"
    );

    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    let res = waiting.await.unwrap();
    assert_eq!(res.status(), 200, "the turn that waited is answered");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    while app.get("/readyz").await.status() != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the store never recovered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    app.route(json!({"prompt": "after the lock"})).await;
    assert_eq!(tasks_in_store(&app.db_path).await, 3);
}

/// SIGTERM while a person's turn waits in the queue: they hear 503 `shutting_down` with
/// `Retry-After` before the process exits (not a closed connection), the running turn is
/// answered, and the waiting task stays queued and runs after the next start.
#[tokio::test]
async fn at_shutdown_a_waiting_client_is_told_and_its_task_runs_after_the_restart() {
    let fake = spawn_fake().await;
    // The running turn takes a few seconds, well inside the shutdown's grace.
    fake.update_knobs(|k| k.token_delay = std::time::Duration::from_millis(600));
    let mut app = spawn_app_with(fake, |c| c.backends[0].parallel = 1).await;
    let running = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "the running one"}]}),
        )
        .await;
    assert_eq!(running.status(), 200);
    let waiting = {
        let http = app.http.clone();
        let url = app.url("/v1/chat/completions");
        tokio::spawn(async move {
            http.post(url)
                .json(&json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "待っている質問"}]}))
                .send()
                .await
                .unwrap()
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let workers: Value = app.get("/workers").await.json().await.unwrap();
        if workers["queues"].as_array().is_some_and(|q| !q.is_empty()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the second turn never queued"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    app.begin_stop();
    let told = waiting.await.unwrap();
    assert_eq!(told.status(), 503);
    assert_eq!(told.headers()["retry-after"], "10");
    let queued = told.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = told.json().await.unwrap();
    assert_eq!(body["error"]["code"], "shutting_down", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("キューに残り"),
        "{body}"
    );
    // The running turn is let finish.
    let answer = running.text().await.unwrap();
    assert!(answer.trim_end().ends_with("data: [DONE]"), "{answer}");
    let (dir, fake) = app.stop().await;

    let config = crate::helpers::test_config(&dir, &fake.base_url());
    let app = crate::helpers::start(config, dir, fake).await;
    let task = app.finished_task(&queued).await;
    assert_eq!(task["status"], "done", "{task}");
    assert_eq!(task["prompt"], "待っている質問");
}
