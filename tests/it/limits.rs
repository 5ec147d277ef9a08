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
            queued_per_person: 0,
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
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("coordinator_limited_total{reason=\"queue_full\"} 1\n"),
        "{metrics}"
    );

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

/// One person's flood is bounded by `[limits] queued_per_person` (2 here) while the
/// machine's one slot is held by U2's turn: U1 gets two tasks waiting and is refused a
/// third (429 `too_many_waiting` with `Retry-After`, in the prompt's language, nothing
/// recorded), while U2's next turn, for the same model, is still taken. Once the machine
/// answers again, everything accepted runs and U1 is taken again. `recorded` counts the
/// store's tasks. Shared by embedded and cluster mode.
pub async fn one_persons_waiting_tasks_are_bounded_and_the_others_still_taken(
    h: &crate::people::Household,
    fake: &coordinator::testkit::fake_llm::FakeLlmServer,
    recorded: impl AsyncFn() -> usize,
) {
    use crate::people::{U1, U2};
    use reqwest::Method;

    fake.update_knobs(|k| k.stall_after = Some(1));
    let (holding_id, held) =
        crate::helpers::holding_the_slot(h.request(U2, Method::POST, "/v1/chat/completions")).await;

    let route = async |who, prompt: &str| {
        h.request(who, Method::POST, "/route")
            .json(&json!({"prompt": prompt}))
            .send()
            .await
            .unwrap()
    };
    let mut u1s = Vec::new();
    for prompt in ["first of many", "second of many"] {
        let res = route(U1, prompt).await;
        assert_eq!(res.status(), 200, "U1's {prompt}");
        let body: Value = res.json().await.unwrap();
        u1s.push(body["task_id"].as_str().unwrap().to_owned());
    }
    let before = recorded().await;

    let refused = h
        .request(U1, Method::POST, "/v1/chat/completions")
        .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "三つ目の質問です"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "10");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_waiting", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("待っています"), "{message}");
    let refused = route(U1, "third of many").await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_waiting", "{body}");
    assert_eq!(recorded().await, before, "nothing recorded for U1");

    let res = route(U2, "my next question").await;
    assert_eq!(res.status(), 200, "U2 is still taken");
    let body: Value = res.json().await.unwrap();
    let u2_next = body["task_id"].as_str().unwrap().to_owned();
    let (_, task) = h.get(U2, &format!("/tasks/{u2_next}")).await;
    assert_eq!(task["status"], "queued", "{task}");
    assert_eq!(recorded().await, before + 1);

    fake.update_knobs(|k| k.stall_after = None);
    let (status, said) = h
        .post(U2, &format!("/tasks/{holding_id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{said}");
    drop(held);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for (who, id) in [(U1, &u1s[0]), (U1, &u1s[1]), (U2, &u2_next)] {
        h.done(who, id, deadline).await;
    }
    // Taken again (in cluster mode once the count is read again: at most half a second).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let res = route(U1, "one more, now that mine ran").await;
        if res.status() == 200 {
            break;
        }
        assert_eq!(res.status(), 429);
        assert!(
            std::time::Instant::now() < deadline,
            "U1 is still refused once their tasks ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn one_persons_waiting_tasks_are_bounded_while_others_are_still_taken() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        crate::people::household_keys(c);
        c.backends[0].parallel = 1;
        c.limits.queued_per_person = 2;
    })
    .await;
    let h = crate::people::Household {
        base: format!("http://{}", app.addr),
        http: reqwest::Client::new(),
    };
    let db = app.db_path.clone();
    one_persons_waiting_tasks_are_bounded_and_the_others_still_taken(&h, &app.fake, async || {
        usize::try_from(tasks_in_store(&db).await).unwrap()
    })
    .await;
}

/// A task cancelled while it waits leaves the queue at once (embedded mode): the task
/// behind it moves up, its person's bound counts it no more, and it never runs.
#[tokio::test]
async fn a_cancelled_waiting_task_leaves_the_queue_at_once() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.backends[0].parallel = 1;
        c.limits.queued_per_person = 2;
    })
    .await;
    app.fake.update_knobs(|k| k.stall_after = Some(1));
    let (holding_id, held) =
        crate::helpers::holding_the_slot(app.http.post(app.url("/v1/chat/completions"))).await;

    let first = app
        .route(json!({"prompt": "cancelled while waiting"}))
        .await;
    let first = first["task_id"].as_str().unwrap().to_owned();
    let second = app.route(json!({"prompt": "moves up"})).await;
    let second = second["task_id"].as_str().unwrap().to_owned();
    assert_eq!(app.task(&second).await["position"], 2);
    let res = app.post("/route", json!({"prompt": "one too many"})).await;
    assert_eq!(res.status(), 429);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("coordinator_limited_total{reason=\"too_many_waiting\"} 1\n"),
        "{metrics}"
    );

    let said: Value = app
        .post(&format!("/tasks/{first}/cancel"), json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(said["status"], "cancelled", "{said}");
    assert_eq!(app.task(&second).await["position"], 1);
    let third = app.route(json!({"prompt": "room again"})).await;
    let third = third["task_id"].as_str().unwrap().to_owned();

    app.fake.update_knobs(|k| k.stall_after = None);
    app.post(&format!("/tasks/{holding_id}/cancel"), json!({}))
        .await;
    drop(held);
    for id in [&second, &third] {
        assert_eq!(app.finished_task(id).await["status"], "done");
    }
    let first = app.task(&first).await;
    assert_eq!(first["status"], "cancelled", "{first}");
    let asked = app.fake.requests_to("/api/chat");
    assert!(
        asked.iter().all(|r| !r
            .body
            .as_ref()
            .is_some_and(|b| b.to_string().contains("cancelled while waiting"))),
        "the cancelled task never ran"
    );
}
