//! Placement: among workers that serve a model, the one expected to give the first token
//! soonest gets the task: a loaded model and a free slot, a conversation's cache, what a
//! load evicts; and what placement learns of the machines.

use std::time::{Duration, Instant};

use coordinator::config::{BackendConfig, BackendKind, Config, KeepAliveSetting};
use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, Realism, Speed};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, spawn_app_with, spawn_fake};
use crate::household::{CODER, stats_until};

#[tokio::test]
async fn a_worker_with_the_model_loaded_gets_the_task() {
    let cold = spawn_fake().await;
    let warm = spawn_fake().await;
    let warm_url = warm.base_url();
    let app = spawn_app_with(cold, |c| {
        c.backends[0].name = "cold".into();
        c.backends.push(BackendConfig {
            name: "warm".into(),
            kind: BackendKind::Ollama,
            url: warm_url,
            models: None,
            api_key_env: None,
            parallel: 4,
            max_loaded: None,
            keep_alive: Default::default(),
            context_length: None,
            model_context_length: Default::default(),
            max_num_ctx: None,
        });
        c.timeouts.discovery_interval_s = 1;
    })
    .await;
    // Load the model on `warm` only (the fake counts a model as loaded once used).
    let res = app
        .post("/v1/chat/completions", json!({"model": format!("{MODEL}@warm"), "messages": [{"role": "user", "content": "warm up"}]}))
        .await;
    assert_eq!(res.status(), 200);
    // Discovery reads /api/ps every second; wait until the router sees the loaded model.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let workers: Value = app.get("/workers").await.json().await.unwrap();
        let loaded = workers["workers"].as_array().unwrap().iter().any(|w| {
            w["name"] == "warm" && w["loaded"].as_array().unwrap().iter().any(|m| m == MODEL)
        });
        if loaded {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "discovery never saw the loaded model: {workers}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..6 {
        let res = app
            .post("/v1/chat/completions", json!({"model": "auto", "messages": [{"role": "user", "content": format!("q{i}")}]}))
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["x-coordinator-worker"], "warm", "request {i}");
    }
    assert_eq!(
        app.fake.requests_to("/api/chat").len(),
        0,
        "the cold machine ran nothing"
    );
}

/// A realistic machine (one generation at a time, `max_loaded` resident models, loads of
/// 3 s of life) serving `models`, 100 times faster than life.
async fn realistic(models: &[&str], max_loaded: usize) -> FakeLlmServer {
    models
        .iter()
        .fold(FakeLlm::builder(), |b, m| b.model(*m))
        .realistic(Realism {
            time_scale: 100.0,
            max_loaded,
            speed: Speed {
                load: Duration::from_secs(3),
                prompt_tps: 1000.0,
                eval_tps: 50.0,
            },
            answer_tokens: (20, 40),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

/// Config: the app's fake as `first`, then `others` in order, each one slot.
pub(crate) fn machines(c: &mut Config, first: &str, others: &[(&str, String)]) {
    c.backends[0].name = first.into();
    c.backends[0].parallel = 1;
    for (name, url) in others {
        let mut b = c.backends[0].clone();
        b.name = (*name).to_owned();
        b.url = url.clone();
        c.backends.push(b);
    }
}

/// One turn of the chat `chat_id`: returns the worker that answered.
pub(crate) async fn turn(app: &TestApp, chat_id: &str, model: &str, messages: Value) -> String {
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("x-openwebui-chat-id", chat_id)
        .json(&json!({"model": model, "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let worker = res.headers()["x-coordinator-worker"]
        .to_str()
        .unwrap()
        .to_owned();
    let _: Value = res.json().await.unwrap();
    worker
}

/// Waits (bounded) until `GET /workers` satisfies `check` for the worker `name`.
pub(crate) async fn worker_until(
    app: &TestApp,
    name: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let workers: Value = app.get("/workers").await.json().await.unwrap();
        let w = workers["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == name)
            .cloned()
            .unwrap();
        if check(&w) {
            return w;
        }
        assert!(Instant::now() < deadline, "never got there: {w}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two equal machines with the model resident on both: a chat served by the second goes
/// back to it (its prompt cache holds the history), although the first is listed first
/// and just as free; a chat the first served stays there.
#[tokio::test]
async fn a_chats_next_turn_goes_back_to_the_machine_whose_cache_holds_it() {
    let first = realistic(&[MODEL], 1).await;
    let twin = realistic(&[MODEL], 1).await;
    let twin_url = twin.base_url();
    let app = spawn_app_with(first, |c| machines(c, "first", &[("twin", twin_url)])).await;
    let history = |q: &str| {
        json!([
            {"role": "user", "content": "Tell me about the NAS backup schedule, in detail please."},
            {"role": "assistant", "content": "The NAS backs up every night at two, to the USB disk, and keeps a week."},
            {"role": "user", "content": q}
        ])
    };
    let opening = json!([{"role": "user", "content": "Tell me about the NAS backup schedule, in detail please."}]);
    assert_eq!(
        turn(&app, "chat-b", &format!("{MODEL}@twin"), opening.clone()).await,
        "twin"
    );
    assert_eq!(
        turn(&app, "chat-a", &format!("{MODEL}@first"), opening).await,
        "first"
    );
    worker_until(&app, "twin", |w| w["recent"].as_array().unwrap().len() == 1).await;
    assert_eq!(
        turn(&app, "chat-b", MODEL, history("And the offsite copy?")).await,
        "twin"
    );
    assert_eq!(
        turn(&app, "chat-a", MODEL, history("And the offsite copy?")).await,
        "first"
    );
    assert_eq!(
        twin.stats().loads,
        1,
        "the twin loaded once: {:?}",
        twin.stats()
    );
    app.stop().await;
}

/// A machine that holds one model at a time and evicts on the next load teaches placement
/// its `max_loaded`, visible in `GET /workers`; the running answer and the conversations
/// it served are there too.
#[tokio::test]
async fn a_load_that_evicts_teaches_the_machines_capacity() {
    let fake = realistic(&[MODEL, "llama3.2:3b"], 1).await;
    let app = spawn_app_with(fake, |c| machines(c, "moon", &[])).await;
    let w = worker_until(&app, "moon", |w| w["healthy"] == true).await;
    assert_eq!(w["max_loaded"], Value::Null, "{w}");
    let ask = json!([{"role": "user", "content": "hello"}]);
    turn(&app, "c1", MODEL, ask.clone()).await;
    turn(&app, "c2", "llama3.2:3b", ask).await;
    let w = worker_until(&app, "moon", |w| w["max_loaded"] == 1).await;
    let recent: Vec<(&str, &str)> = w["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["thread"].as_str().unwrap(), r["model"].as_str().unwrap()))
        .collect();
    assert_eq!(recent, [("c1", MODEL), ("c2", "llama3.2:3b")], "{w}");
    assert_eq!(w["running"], json!([]), "{w}");
    app.stop().await;
}

/// The chunks of a streamed answer, as read by a client.
pub(crate) type Chunks =
    std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// A streamed `/api/chat` turn of `model` that has begun: its first chunk is in.
pub(crate) async fn begun(app: &TestApp, model: &str, text: &str) -> Chunks {
    begun_at(&app.http, app.url("/api/chat"), model, text).await
}

/// A streamed turn of `model` at `url` (an `/api/chat`) that has begun.
pub(crate) async fn begun_at(
    http: &reqwest::Client,
    url: String,
    model: &str,
    text: &str,
) -> Chunks {
    let res = http
        .post(url)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{text}");
    let mut body: Chunks = Box::pin(res.bytes_stream());
    body.next().await.expect("the answer began").unwrap();
    body
}

/// Reads a stream to its end.
pub(crate) async fn drain(body: impl futures::Stream) {
    let mut body = Box::pin(body);
    while body.next().await.is_some() {}
}

/// How many models a machine keeps is not known until a load evicts one. A second model's
/// turn is tried beside the first at once: on a machine that keeps two, it answers while
/// the first is still answering, instead of waiting in Coordinator's queue for room the
/// machine has.
#[tokio::test]
async fn a_machine_of_unknown_room_answers_a_second_model_beside_the_first() {
    let fake = realistic(&[MODEL, CODER], 2).await;
    let app = spawn_app_with(fake, |c| machines(c, "moon", &[])).await;
    let w = worker_until(&app, "moon", |w| w["healthy"] == true).await;
    assert_eq!(w["max_loaded"], Value::Null, "{w}");
    // Every answer holds after its first token until released.
    app.fake.hold();
    let chat = begun(&app, MODEL, "a chat turn").await;
    let coder = tokio::time::timeout(Duration::from_secs(10), begun(&app, CODER, "a coder turn"))
        .await
        .expect("the coder turn begins while the chat turn holds");
    let w = worker_until(&app, "moon", |w| {
        w["running"].as_array().unwrap().len() == 2
    })
    .await;
    assert_eq!(w["max_loaded"], Value::Null, "nothing was evicted: {w}");
    app.fake.release();
    drain(chat).await;
    drain(coder).await;
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 0), "{stats:?}");
    app.stop().await;
}

/// On a machine that keeps one model, the second model's turn tried beside the first
/// waits in Ollama's queue until the first answer ends, and its load evicts the first
/// model: that teaches the machine's room, once. From then on a second model's turn waits
/// in Coordinator's queue while the first answers (where another machine could take it).
#[tokio::test]
async fn a_machine_that_keeps_one_model_is_tried_once_then_known() {
    let fake = realistic(&[MODEL, CODER], 1).await;
    let app = spawn_app_with(fake, |c| machines(c, "moon", &[])).await;
    worker_until(&app, "moon", |w| w["healthy"] == true).await;
    app.fake.hold();
    let chat = begun(&app, MODEL, "the first chat turn").await;
    let tried = app
        .route(json!({"prompt": "the first coder turn", "model": CODER}))
        .await;
    let tried = tried["task_id"].as_str().unwrap().to_owned();
    stats_until(&app.fake, |s| s.requests == 2).await;
    app.fake.release();
    drain(chat).await;
    let done = app.finished_task(&tried).await;
    assert_eq!(done["status"], "done", "{done}");
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 1), "{stats:?}");
    worker_until(&app, "moon", |w| w["max_loaded"] == 1).await;

    app.fake.hold();
    let chat = begun(&app, MODEL, "the second chat turn").await;
    let waits = app
        .route(json!({"prompt": "the second coder turn", "model": CODER}))
        .await;
    let waits = waits["task_id"].as_str().unwrap().to_owned();
    let queued = app.task(&waits).await;
    assert_eq!(queued["status"], "queued", "{queued}");
    assert_eq!(
        app.fake.stats().requests,
        3,
        "nothing waits in Ollama's queue"
    );
    app.fake.release();
    drain(chat).await;
    let done = app.finished_task(&waits).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(app.fake.stats().requests, 4);
    app.stop().await;
}

/// `keep_alive` configured per model reaches Ollama with every request for that model
/// that sets none; a request's own wins; other models get none.
#[tokio::test]
async fn a_configured_keep_alive_reaches_ollama_unless_the_request_sets_one() {
    let app = spawn_app_with(crate::helpers::spawn_fake().await, |c| {
        c.backends[0]
            .keep_alive
            .insert(MODEL.to_owned(), KeepAliveSetting::Duration("24h".into()));
    })
    .await;
    let ask = |extra: Value| {
        let mut body = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": false});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let res = app.post("/api/chat", ask(json!({}))).await;
    assert_eq!(res.status(), 200);
    crate::helpers::assert_keep_alive(
        &app.fake
            .requests_to("/api/chat")
            .last()
            .unwrap()
            .body
            .as_ref()
            .unwrap()["keep_alive"],
        86400,
    );
    let res = app
        .post("/api/chat", ask(json!({"keep_alive": "1m"})))
        .await;
    assert_eq!(res.status(), 200);
    crate::helpers::assert_keep_alive(
        &app.fake
            .requests_to("/api/chat")
            .last()
            .unwrap()
            .body
            .as_ref()
            .unwrap()["keep_alive"],
        60,
    );
    app.stop().await;
}

/// What placement learned of a machine (its rates, and the capacity a load that evicted
/// showed) is there again after a restart, before any new task.
#[tokio::test]
async fn what_placement_learned_of_a_machine_survives_a_restart() {
    let fake = realistic(&[MODEL, "llama3.2:3b"], 1).await;
    let app = spawn_app_with(fake, |c| machines(c, "moon", &[])).await;
    let ask = json!([{"role": "user", "content": "hello there, how are you today?"}]);
    turn(&app, "c1", MODEL, ask.clone()).await;
    turn(&app, "c2", "llama3.2:3b", ask).await;
    let before = worker_until(&app, "moon", |w| {
        w["max_loaded"] == 1 && w["perf"].as_array().unwrap().len() == 2
    })
    .await;
    let config_path = app.db_path.clone();
    let (dir, fake) = app.stop().await;
    let mut config = crate::helpers::test_config(&dir, &fake.base_url());
    machines(&mut config, "moon", &[]);
    assert_eq!(
        config.store,
        coordinator::config::StoreConfig::Sqlite {
            path: config_path,
            synchronous: Default::default(),
        }
    );
    let app = crate::helpers::start(config, dir, fake).await;
    let after = worker_until(&app, "moon", |w| w["healthy"] == true).await;
    assert_eq!(after["max_loaded"], 1, "{after}");
    assert_eq!(after["perf"], before["perf"], "{after}");
    assert_eq!(
        app.fake.stats().requests,
        2,
        "nothing ran since the restart"
    );
    app.stop().await;
}

/// A realistic one-slot machine serving `MODEL` at `prompt_tps` and `eval_tps`, answers of
/// 300 tokens, ten times faster than life.
pub(crate) async fn machine_at(prompt_tps: f64, eval_tps: f64) -> FakeLlmServer {
    machine_with(&[MODEL], prompt_tps, eval_tps).await
}

/// [`machine_at`] serving `models` (two resident at most).
pub(crate) async fn machine_with(models: &[&str], prompt_tps: f64, eval_tps: f64) -> FakeLlmServer {
    models
        .iter()
        .fold(FakeLlm::builder(), |b, m| b.model(*m))
        .realistic(Realism {
            time_scale: 10.0,
            max_loaded: 2,
            speed: Speed {
                load: Duration::from_secs(3),
                prompt_tps,
                eval_tps,
            },
            answer_tokens: (300, 300),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

/// `POST /route` for `MODEL` (or `model`): the task id and the worker placement chose.
async fn route(app: &TestApp, model: &str, prompt: String) -> (String, String) {
    let res = app
        .post("/route", json!({"prompt": prompt, "model": model}))
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    (
        body["task_id"].as_str().unwrap().to_owned(),
        body["worker_id"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A prompt of about 1,000 tokens, marked `tag`.
pub(crate) fn long_prompt(tag: &str) -> String {
    format!(
        "{} [{tag}]",
        "Please go over these meeting notes and list what was decided. ".repeat(64)
    )
}

/// Moon is fast (a second of prompt, 6 s per answer), ai-core a tenth of its prompt rate
/// (10 s of prompt). With moon busy, the next long turn still starts sooner there (6 + 1 s
/// against 10 s) and waits in the queue for it; the turn after that would wait for both
/// (6 + 7 + 1 s): it goes to ai-core, which answers it sooner. Moon holds the first turn
/// after its first token while the next two are placed, so what placement sees does not
/// depend on how fast the machine running the test is.
#[tokio::test]
async fn a_turn_goes_to_another_machine_when_the_fast_ones_queue_holds_work() {
    let moon = machine_at(1000.0, 50.0).await;
    let ai_core = machine_at(100.0, 25.0).await;
    let ai_core_url = ai_core.base_url();
    let app = spawn_app_with(moon, |c| machines(c, "moon", &[("ai-core", ai_core_url)])).await;
    // A day of use in brief: each machine has run the model once and shown its rates.
    let warm: Vec<String> = futures::future::join_all(["moon", "ai-core"].map(|m| {
        let app = &app;
        async move { route(app, &format!("{MODEL}@{m}"), long_prompt(m)).await.0 }
    }))
    .await;
    for id in &warm {
        assert_eq!(app.finished_task(id).await["status"], "done");
    }
    for m in ["moon", "ai-core"] {
        worker_until(&app, m, |w| {
            w["perf"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["prompt_tps"].is_number() && p["eval_tps"].is_number())
        })
        .await;
    }
    app.fake.hold();
    let (a, a_on) = route(&app, MODEL, long_prompt("a")).await;
    assert_eq!(a_on, "moon");
    worker_until(&app, "moon", |w| {
        w["running"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["tokens"] == 1))
    })
    .await;
    let (b, b_on) = route(&app, MODEL, long_prompt("b")).await;
    assert_eq!(
        b_on, "moon",
        "moon is still sooner for the first turn waiting"
    );
    let (c, c_on) = route(&app, MODEL, long_prompt("c")).await;
    assert_eq!(c_on, "ai-core", "moon's queue holds a turn already");
    app.fake.release();
    let ran_on = |row: Value| row["worker_id"].as_str().unwrap().to_owned();
    assert_eq!(ran_on(app.finished_task(&a).await), "moon");
    assert_eq!(ran_on(app.finished_task(&b).await), "moon");
    assert_eq!(ran_on(app.finished_task(&c).await), "ai-core");
    assert_eq!(
        ai_core.stats().requests,
        2,
        "the warm-up and the third turn"
    );
    app.stop().await;
}

/// Every answer's end is followed by a look at the machine, however it ended. A coder
/// turn whose load pushed the chat model out of a machine that keeps one model is stopped
/// by its person after its first token: the machine is shown holding the coder alone at
/// once, not the chat model too until the next discovery tick (the household placed a
/// turn on a machine still counted as holding a model a stopped turn's load had pushed
/// out, and loaded it again there).
#[tokio::test]
async fn a_stopped_answer_leaves_the_machine_shown_as_it_is() {
    let fake = realistic(&[MODEL, CODER], 1).await;
    let app = spawn_app_with(fake, |c| {
        machines(c, "moon", &[]);
        // Only the looks that follow answers.
        c.timeouts.discovery_interval_s = 3600;
        c.timeouts.look_interval_s = 3600;
    })
    .await;
    worker_until(&app, "moon", |w| w["healthy"] == true).await;
    let ask = json!([{"role": "user", "content": "hello"}]);
    turn(&app, "c1", MODEL, ask).await;
    worker_until(&app, "moon", |w| w["loaded"] == json!([MODEL])).await;
    app.fake.hold();
    let coder = begun(&app, CODER, "a coder turn").await;
    assert_eq!(app.fake.stats().evictions, 1);
    // Stop: the client goes away.
    drop(coder);
    let w = worker_until(&app, "moon", |w| {
        w["running"] == json!([]) && w["loaded"] == json!([CODER])
    })
    .await;
    assert_eq!(w["resident"][0]["model"], CODER, "{w}");
    app.fake.release();
    app.stop().await;
}

/// A load given up: Ollama lists a model whose loading request left until its next poll
/// of the loading runner, so the look right after the answer's end may still see it, and
/// does not count it then; a look after that finds it gone. A coder turn cancelled while
/// its (long) load runs leaves the machine shown holding nothing, well before any
/// discovery tick.
#[tokio::test]
async fn a_load_given_up_is_not_counted_resident_once_ollama_has_dropped_it() {
    use coordinator::testkit::fake_llm::ModelSpec;
    let slow = Speed {
        load: Duration::from_secs(100_000),
        prompt_tps: 1000.0,
        eval_tps: 50.0,
    };
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model_spec(ModelSpec::new(CODER).with_speed(slow))
        .realistic(Realism {
            time_scale: 100.0,
            max_loaded: 1,
            // Listed for a while after it was given up (Ollama's poll).
            give_up_within: Duration::from_millis(300),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap();
    let app = spawn_app_with(fake, |c| {
        machines(c, "moon", &[]);
        c.timeouts.discovery_interval_s = 3600;
        c.timeouts.look_interval_s = 3600;
    })
    .await;
    worker_until(&app, "moon", |w| w["healthy"] == true).await;
    let task = app
        .route(json!({"prompt": "a coder turn", "model": CODER}))
        .await;
    let task = task["task_id"].as_str().unwrap().to_owned();
    stats_until(&app.fake, |s| s.loads == 1).await;
    let res = app.post(&format!("/tasks/{task}/cancel"), json!({})).await;
    assert!(res.status().is_success(), "{}", res.status());
    stats_until(&app.fake, |s| s.aborted_loads == 1).await;
    let w = worker_until(&app, "moon", |w| {
        w["running"] == json!([]) && w["loaded"] == json!([])
    })
    .await;
    assert_eq!(w["resident"], json!([]), "{w}");
    app.stop().await;
}

/// `GET /workers` shows each resident model with its expiry from Ollama's `/api/ps`: the
/// fake, like Ollama, keeps a model five minutes after its last use.
#[tokio::test]
async fn the_workers_show_when_each_resident_model_expires() {
    let app = spawn_app_with(spawn_fake().await, |c| machines(c, "moon", &[])).await;
    let before = chrono::Utc::now();
    turn(
        &app,
        "c1",
        MODEL,
        json!([{"role": "user", "content": "hello"}]),
    )
    .await;
    let w = worker_until(&app, "moon", |w| {
        w["resident"]
            .as_array()
            .is_some_and(|r| r.iter().any(|m| m["expires_at"].is_string()))
    })
    .await;
    assert_eq!(w["resident"][0]["model"], MODEL, "{w}");
    assert_eq!(w["loaded"], json!([MODEL]), "{w}");
    let expires: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(w["resident"][0]["expires_at"].clone()).unwrap();
    let five = chrono::Duration::minutes(5);
    assert!(
        expires >= before + five && expires <= chrono::Utc::now() + five,
        "{w}"
    );
    app.stop().await;
}

/// Moon is the only machine with the coder, and the fast one (a second of prompt, 6 s per
/// answer); ai-core serves the chat model only, at a sixteenth of moon's prompt rate
/// (about 17 s for the turn's prompt). With four coder turns routed (one running on moon,
/// three waiting in the coder's lane), a chat turn would get its first token on moon in at
/// most 8 s if moon's own backlog were not counted; counted, moon is about 29 s away, and
/// the turn goes to ai-core. Once moon has worked through the coder turns, the next chat
/// turn goes back to moon.
#[tokio::test]
async fn a_turn_goes_to_another_machine_when_the_fast_one_owes_work_in_another_lane() {
    use crate::household::CODER;
    let moon = machine_with(&[MODEL, CODER], 1000.0, 50.0).await;
    let ai_core = machine_at(60.0, 25.0).await;
    let ai_core_url = ai_core.base_url();
    let app = spawn_app_with(moon, |c| machines(c, "moon", &[("ai-core", ai_core_url)])).await;
    // A day of use in brief: each machine has shown its rates for what it serves.
    let warm: Vec<String> = futures::future::join_all(
        [(MODEL, "moon"), (MODEL, "ai-core"), (CODER, "moon")].map(|(model, m)| {
            let app = &app;
            async move {
                let tag = format!("{model} {m}");
                route(app, &format!("{model}@{m}"), long_prompt(&tag))
                    .await
                    .0
            }
        }),
    )
    .await;
    for id in &warm {
        assert_eq!(app.finished_task(id).await["status"], "done");
    }
    let rates_for = |w: &Value, n: usize| {
        w["perf"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["prompt_tps"].is_number() && p["eval_tps"].is_number())
            .count()
            >= n
    };
    worker_until(&app, "moon", |w| rates_for(w, 2)).await;
    worker_until(&app, "ai-core", |w| rates_for(w, 1)).await;
    let mut coder = Vec::new();
    for i in 0..4 {
        coder.push(
            route(&app, CODER, long_prompt(&format!("coder {i}")))
                .await
                .0,
        );
    }
    stats_until(&app.fake, |s| s.requests >= 3).await;
    let (chat, chat_on) = route(&app, MODEL, long_prompt("chat")).await;
    assert_eq!(chat_on, "ai-core", "moon owes three coder turns");
    let ran_on = |row: Value| row["worker_id"].as_str().unwrap().to_owned();
    assert_eq!(ran_on(app.finished_task(&chat).await), "ai-core");
    for id in &coder {
        assert_eq!(ran_on(app.finished_task(id).await), "moon");
    }
    let (next, next_on) = route(&app, MODEL, long_prompt("chat again")).await;
    assert_eq!(next_on, "moon", "moon owes nothing now");
    assert_eq!(ran_on(app.finished_task(&next).await), "moon");
    assert_eq!(ai_core.stats().requests, 2, "the warm-up and the chat turn");
    app.stop().await;
}
