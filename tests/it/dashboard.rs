//! The household's page and what it reads: `/` for browsers and for Ollama's probes, the
//! snapshot (machines, queue with places, recent tasks) and its SSE stream, the admin key,
//! `/metrics` as Prometheus text, and `coordinator status` against a running service.

use std::collections::HashMap;
use std::time::Duration;

use coordinator::config::{BackendConfig, KeyConfig, KeyRole};
use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, Realism, Speed};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, parse_prometheus, spawn_app_with};

/// The second machine's model.
pub const SMALL: &str = "llama3.2:3b";
pub const ADMIN_KEY: &str = "admin-key-0123456789";
pub const USER_KEY: &str = "user-key-0123456789";

/// `moon`: one slot, `MODEL` answering 1000 tokens in about a second (so a second task
/// waits); `sun`: `SMALL`, instant.
pub async fn household(keys: bool) -> Household {
    let moon = FakeLlm::builder()
        .model(MODEL)
        .realistic(Realism {
            time_scale: 100.0,
            speed: Speed {
                load: Duration::from_secs(3),
                prompt_tps: 1000.0,
                eval_tps: 10.0,
            },
            answer_tokens: (1000, 1000),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap();
    // A mini PC whose clock reads 30 s behind Coordinator's.
    let sun: FakeLlmServer = FakeLlm::builder()
        .model(SMALL)
        .clock_ahead(chrono::TimeDelta::seconds(-30))
        .spawn()
        .await
        .unwrap();
    let sun_url = sun.base_url();
    let app = spawn_app_with(moon, move |c| {
        c.backends[0].parallel = 1;
        c.timeouts.queued_head_ms = 50;
        c.backends.push(BackendConfig {
            name: "sun".into(),
            url: sun_url,
            parallel: 4,
            ..BackendConfig::default_ollama()
        });
        if keys {
            c.server.keys = vec![
                KeyConfig {
                    name: "alice".into(),
                    key: Some(ADMIN_KEY.into()),
                    role: KeyRole::Admin,
                    ..Default::default()
                },
                KeyConfig {
                    name: "bob".into(),
                    key: Some(USER_KEY.into()),
                    ..Default::default()
                },
            ];
        }
    })
    .await;
    Household { app, _sun: sun }
}

/// The app, and the second machine's fake (kept alive as long as the app).
pub struct Household {
    pub app: TestApp,
    _sun: FakeLlmServer,
}

impl std::ops::Deref for Household {
    type Target = TestApp;
    fn deref(&self) -> &TestApp {
        &self.app
    }
}

/// A streamed chat for `model`: its task id and its body, open (the answer goes on while
/// it is held).
pub async fn open_chat(
    app: &TestApp,
    model: &str,
    prompt: &str,
    key: Option<&str>,
) -> (String, reqwest::Response) {
    let mut req = app.http.post(app.url("/v1/chat/completions")).json(
        &json!({"model": model, "stream": true, "messages": [{"role": "user", "content": prompt}]}),
    );
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    (id, res)
}

/// `moon`'s only slot taken by a long answer, and a second task queued behind it: the
/// two task ids and their open bodies.
pub async fn queue_one(
    app: &TestApp,
    key: Option<&str>,
) -> (String, String, Vec<reqwest::Response>) {
    let (running, mut first) = open_chat(app, MODEL, "tell me a long story", key).await;
    // Its first token is in: it holds the slot.
    let chunk = tokio::time::timeout(Duration::from_secs(30), first.chunk()).await;
    assert!(matches!(chunk, Ok(Ok(Some(_)))), "{chunk:?}");
    let (queued, second) = open_chat(app, MODEL, "and then a poem", key).await;
    (running, queued, vec![first, second])
}

async fn snapshot(app: &TestApp, key: Option<&str>) -> reqwest::Response {
    let mut req = app.http.get(app.url("/dashboard/snapshot"));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn browsers_get_the_page_at_the_root_and_ollama_clients_its_text() {
    let app = household(false).await;
    let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    let res = app
        .http
        .get(app.url("/"))
        .header("accept", browser)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let page = res.text().await.unwrap();
    assert!(
        page.contains("<script src=\"/dashboard/app.js\">"),
        "{page}"
    );
    for (path, kind) in [
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/app.css", "text/css"),
    ] {
        let res = app.get(path).await;
        assert_eq!(res.status(), 200, "{path}");
        assert!(
            res.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind),
            "{path}"
        );
        assert!(!res.text().await.unwrap().is_empty(), "{path}");
    }
    // Ollama's clients (no Accept, or */*) still find an Ollama.
    for accept in [None, Some("*/*"), Some("application/json")] {
        let mut req = app.http.get(app.url("/"));
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.text().await.unwrap(), "Ollama is running", "{accept:?}");
    }
    let head = app.http.head(app.url("/")).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-type"], "text/plain; charset=utf-8");
    let head = app
        .http
        .head(app.url("/"))
        .header("accept", browser)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-type"], "text/html; charset=utf-8");
}

#[tokio::test]
async fn the_snapshot_shows_the_machines_the_queue_in_order_and_the_recent_tasks() {
    let app = household(false).await;
    let (running, queued, _bodies) = queue_one(&app, None).await;
    let s: Value = snapshot(&app, None).await.json().await.unwrap();
    let machines: HashMap<&str, &Value> = s["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m))
        .collect();
    assert_eq!(machines["moon"]["models"], json!([MODEL]), "{s}");
    assert_eq!(machines["sun"]["models"], json!([SMALL]), "{s}");
    assert_eq!(machines["moon"]["in_flight"], 1, "{s}");
    assert_eq!(machines["moon"]["slots"], 1, "{s}");
    assert_eq!(machines["moon"]["clock_ahead_ms"], 0, "{s}");
    let sun_clock = machines["sun"]["clock_ahead_ms"].as_i64().unwrap();
    assert!((sun_clock + 30_000).abs() <= 600, "{s}");
    assert_eq!(machines["moon"]["clock_apart"], Value::Null, "{s}");
    let sun_line = machines["sun"]["clock_apart"].as_str().unwrap();
    assert!(
        sun_line.starts_with("clock 29.") || sun_line.starts_with("clock 30."),
        "{s}"
    );
    assert!(sun_line.ends_with(" s behind Coordinator's"), "{s}");
    let queue = s["queue"].as_array().unwrap();
    assert_eq!(queue.len(), 1, "{s}");
    assert_eq!(queue[0]["task_id"], queued, "{s}");
    assert_eq!(queue[0]["position"], 1, "{s}");
    assert_eq!(queue[0]["lane"], format!("tasks:llm:{MODEL}"), "{s}");
    assert_eq!(queue[0]["person"], "default", "{s}");
    assert_eq!(queue[0]["prompt"], "and then a poem", "{s}");
    assert!(queue[0]["eta_s"].as_u64().is_some(), "{s}");
    let recent: Vec<&str> = s["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        recent,
        [queued.as_str(), running.as_str()],
        "newest first: {s}"
    );
    assert_eq!(s["recent"][1]["status"], "running", "{s}");
    assert_eq!(s["recent"][1]["machine"], "moon", "{s}");
    assert!(
        !s["recent"][1]["reasons"].as_array().unwrap().is_empty(),
        "{s}"
    );
    // Once a task has ended, the look at `/api/ps` after it says until when moon keeps
    // the model: five minutes of life from now (3 s here, at a hundred times).
    assert_eq!(app.finished_task(&running).await["status"], "done");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let expires = loop {
        let s: Value = snapshot(&app, None).await.json().await.unwrap();
        let moon = s["machines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "moon")
            .unwrap()
            .clone();
        if let Some(at) = moon["expires_at"][MODEL].as_str() {
            assert_eq!(moon["resident"], json!([MODEL]), "{s}");
            break chrono::DateTime::parse_from_rfc3339(at).unwrap().to_utc();
        }
        assert!(std::time::Instant::now() < deadline, "no expiry: {s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let left = expires - chrono::Utc::now();
    assert!(
        left > chrono::Duration::zero() && left <= chrono::Duration::seconds(3),
        "{expires}"
    );
}

#[tokio::test]
async fn the_event_stream_sends_a_new_picture_when_a_task_arrives() {
    let app = household(false).await;
    let res = app.get("/dashboard/events").await;
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = res.bytes_stream();
    let mut seen = String::new();
    let mut next_snapshot = async |seen: &mut String| -> Value {
        loop {
            if let Some(end) = seen.find("\n\n") {
                let frame: String = seen.drain(..end + 2).collect();
                if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: "))
                    && frame.starts_with("event: snapshot")
                {
                    return serde_json::from_str(data).unwrap();
                }
                continue;
            }
            let more = tokio::time::timeout(Duration::from_secs(5), body.next())
                .await
                .expect("no snapshot within 5 s")
                .unwrap()
                .unwrap();
            seen.push_str(&String::from_utf8_lossy(&more));
        }
    };
    let asked = chrono::Utc::now();
    let first = next_snapshot(&mut seen).await;
    assert_eq!(first["recent"], json!([]), "{first}");
    // Each picture says when Coordinator took it (at most a build's interval before it
    // was asked for), and a picture that differs from the last only by that is not
    // sent: what the hub builds over a second of an idle household (four builds) comes
    // only as far as it shows something new.
    let taken = |s: &Value| {
        chrono::DateTime::parse_from_rfc3339(s["taken_at"].as_str().unwrap())
            .unwrap()
            .to_utc()
    };
    assert!(
        taken(&first) >= asked - chrono::Duration::milliseconds(300)
            && taken(&first) <= chrono::Utc::now(),
        "{first}"
    );
    let mut last = first.clone();
    let idle = tokio::time::Instant::now() + Duration::from_secs(1);
    while let Ok(s) = tokio::time::timeout_at(idle, next_snapshot(&mut seen)).await {
        let shows = |s: &Value| {
            let mut s = s.clone();
            s.as_object_mut().unwrap().remove("taken_at");
            s
        };
        assert_ne!(shows(&s), shows(&last), "sent again unchanged: {s}");
        assert!(taken(&s) > taken(&last), "{s}");
        last = s;
    }
    let task = app
        .route(json!({"prompt": "hello there", "model": SMALL}))
        .await;
    let id = task["task_id"].as_str().unwrap().to_owned();
    let next = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            let s = next_snapshot(&mut seen).await;
            if s["recent"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["task_id"] == id.as_str())
            {
                return s;
            }
        }
    })
    .await
    .expect("the new task was not pushed within 2 s");
    assert_eq!(next["recent"][0]["prompt"], "hello there", "{next}");
}

#[tokio::test]
async fn with_keys_the_dashboard_needs_an_admin_key() {
    let app = household(true).await;
    assert_eq!(snapshot(&app, None).await.status(), 401);
    assert_eq!(snapshot(&app, Some("wrong")).await.status(), 401);
    let res = snapshot(&app, Some(USER_KEY)).await;
    assert_eq!(res.status(), 403);
    assert_eq!(app.get("/dashboard/events").await.status(), 401);
    let res = snapshot(&app, Some(ADMIN_KEY)).await;
    assert_eq!(res.status(), 200);
    let s: Value = res.json().await.unwrap();
    assert_eq!(s["machines"].as_array().unwrap().len(), 2, "{s}");
    // The page itself needs no key: it asks for one.
    let page = app
        .http
        .get(app.url("/"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
}

/// `/metrics` parsed as Prometheus text: every sample line is `name{labels} value`, the
/// counters keep their names, and after an answer the histograms have their buckets by
/// model and machine, the gauges the household's state.
#[tokio::test]
async fn metrics_are_prometheus_text_with_latency_histograms() {
    let app = household(false).await;
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": SMALL, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    // The worker records a task's times once the client has its answer's end.
    let by = format!("model=\"{SMALL}\",machine=\"sun\"");
    let recorded = format!("coordinator_task_duration_seconds_count{{{by}}} 1\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = app.get("/metrics").await.text().await.unwrap();
        if text.contains(&recorded) || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let samples = parse_prometheus(&text);
    let value = |name: &str, labels: &str| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && l == labels)
            .map(|s| s.2)
            .unwrap_or_else(|| panic!("no {name}{{{labels}}} in\n{text}"))
    };
    assert_eq!(value("coordinator_tasks_total", ""), 1.0);
    assert_eq!(value("coordinator_tasks_cancelled_total", ""), 0.0);
    assert_eq!(value("coordinator_unauthorized_total", ""), 0.0);
    for h in [
        "coordinator_time_to_first_token_seconds",
        "coordinator_queue_wait_seconds",
        "coordinator_task_duration_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {h} histogram\n")),
            "{h}\n{text}"
        );
        assert_eq!(value(&format!("{h}_count"), &by), 1.0, "{h}");
        assert_eq!(
            value(&format!("{h}_bucket"), &format!("{by},le=\"+Inf\"")),
            1.0,
            "{h}"
        );
        let buckets = samples
            .iter()
            .filter(|(n, l, _)| *n == format!("{h}_bucket") && l.starts_with(&by))
            .count();
        assert!(buckets > 5, "{h}: {buckets} buckets");
    }
    assert_eq!(value("coordinator_routing_overhead_seconds_count", ""), 1.0);
    assert_eq!(value("coordinator_slots", "machine=\"moon\""), 1.0);
    assert_eq!(value("coordinator_slots", "machine=\"sun\""), 4.0);
    assert_eq!(value("coordinator_slots_in_use", "machine=\"sun\""), 0.0);
    assert_eq!(
        value("coordinator_machine_healthy", "machine=\"moon\""),
        1.0
    );
}

/// `coordinator status` against a running service: machines, the queue with the waiting
/// task's place, the recent tasks; without the admin key it says what is missing.
#[tokio::test]
async fn coordinator_status_prints_the_household() {
    let app = household(true).await;
    let (_running, _queued, _bodies) = queue_one(&app, Some(ADMIN_KEY)).await;
    let base = format!("http://{}", app.addr);
    let run = |key: Option<&str>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_coordinator"));
        cmd.args(["status", "--url", &base])
            .env_remove("COORDINATOR_KEY");
        if let Some(k) = key {
            cmd.env("COORDINATOR_KEY", k);
        }
        cmd.output()
    };
    let out = run(Some(ADMIN_KEY)).await.unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("MACHINES\n  moon "), "{text}");
    assert!(text.contains("\n  sun "), "{text}");
    assert!(text.contains(" s behind Coordinator's\n"), "{text}");
    assert!(text.contains(MODEL) && text.contains(SMALL), "{text}");
    assert!(
        text.contains("QUEUE (1 waiting)\n    1  tasks:llm:"),
        "{text}"
    );
    assert!(text.contains("and then a poem"), "{text}");
    assert!(
        text.contains("RECENT\n") && text.contains("tell me a long story"),
        "{text}"
    );
    let out = run(None).await.unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("needs an admin key"), "{err}");
}
