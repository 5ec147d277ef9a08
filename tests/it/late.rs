//! The late rule (`worker::late`): a streamed turn that shows no first token on the
//! machine it started on moves to a machine that has shown its speed and would now give it
//! sooner: when it is later there than placement expected, or while it still waits there
//! for an answer ahead of it and another machine clearly answers sooner.

use std::time::Duration;

use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, ModelSpec, Realism, Speed};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::helpers::{MODEL, TestApp, spawn_app_with, streamed_turn};
use crate::household::stats_until;
use crate::placement::{Chunks, begun, drain, machines, turn, worker_until};

/// A machine at the test's speed (a hundred times faster than life, one slot, one model
/// resident) whose loads take `load` and whose answers are `answer` tokens long.
pub(crate) async fn machine_loading_in(load: Duration, answer: usize) -> FakeLlmServer {
    FakeLlm::builder()
        .model(MODEL)
        .realistic(Realism {
            time_scale: 100.0,
            max_loaded: 1,
            speed: Speed {
                load,
                prompt_tps: 1000.0,
                eval_tps: 50.0,
            },
            answer_tokens: (answer, answer),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

/// A streamed turn sent to an untried machine (the known one was busy) that shows no
/// first token there for longer than placement expected moves to the known machine once
/// that would answer sooner than the time already lost: its answer comes from there,
/// and the untried machine's call is dropped while it still loads (its load takes 1,000 s
/// of life, 10 s here, so the test cannot pass by waiting for it).
#[tokio::test]
async fn a_turn_late_on_an_untried_machine_moves_to_the_known_one_that_frees_up() {
    let desk = machine_loading_in(Duration::from_secs(3), 2000).await;
    let laptop = machine_loading_in(Duration::from_secs(1000), 20).await;
    let laptop_url = laptop.base_url();
    let app = spawn_app_with(desk, |c| machines(c, "desk", &[("laptop", laptop_url)])).await;
    let (busy, late) = desk_busy_and_a_turn(&app).await;
    // The turn went to the idle laptop, which loads.
    stats_until(&laptop, |s| s.requests == 1).await;
    app.fake.release();
    drain(busy).await;
    done_by(&app, late, "desk").await;
    let asked = app.fake.requests_to("/api/chat");
    assert!(
        asked.iter().any(|r| r
            .body
            .as_ref()
            .is_some_and(|b| b.to_string().contains("the late turn"))),
        "the desk answered the late turn"
    );
    let stats = stats_until(&laptop, |s| s.left_waiting == 1).await;
    assert_eq!(stats.tokens_generated, 0, "{stats:?}");
    // Placement learned that the laptop's load takes longer than it hoped (half again
    // the desk's, as it assumes of a machine nothing is known of): at least the wait.
    let load_s = |w: &Value| {
        w["perf"]
            .as_array()
            .and_then(|perf| perf.iter().find(|p| p["model"] == MODEL))
            .and_then(|p| p["load_s"].as_f64())
            .unwrap_or_else(|| panic!("the load is known: {w}"))
    };
    let desk = load_s(&worker_until(&app, "desk", |_| true).await);
    let laptop = worker_until(&app, "laptop", |_| true).await;
    assert!(load_s(&laptop) > 1.5 * desk, "desk {desk}: {laptop}");
    app.stop().await;
}

/// The desk shows its speed (nothing is known of the other machines), then answers a
/// long answer that holds after its first token (`busy`); then a streamed turn
/// (`late`) is sent.
async fn desk_busy_and_a_turn(app: &TestApp) -> (Chunks, JoinHandle<(String, String)>) {
    teach_desk(app).await;
    app.fake.hold();
    let busy = begun(app, MODEL, "a long answer on the desk").await;
    let late = streamed_turn(
        &app.http,
        app.url("/v1/chat/completions"),
        MODEL,
        "the late turn",
    );
    (busy, late)
}

/// The row of a streamed turn once it has ended, which must be done by `worker`.
async fn done_by(app: &TestApp, turn: JoinHandle<(String, String)>, worker: &str) -> Value {
    let (task, body) = turn.await.unwrap();
    assert!(body.contains("[DONE]"), "{body}");
    let row = app.finished_task(&task).await;
    assert_eq!(
        (&row["status"], &row["worker_id"]),
        (&json!("done"), &json!(worker)),
        "{row}"
    );
    row
}

/// One turn addressed to `machine` for each of `models`, one after another.
async fn teach(app: &TestApp, machine: &str, models: &[&str]) {
    for model in models {
        let hello = json!([{"role": "user", "content": "hello"}]);
        let pinned = format!("{model}@{machine}");
        assert_eq!(turn(app, "teach", &pinned, hello).await, machine);
    }
}

/// For how many models a machine of `/workers` has shown its answer rate.
fn rates_shown(w: &Value) -> usize {
    w["perf"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["eval_tps"].is_number())
        .count()
}

/// One turn pinned to the desk, and its figures shown in `/workers`.
async fn teach_desk(app: &TestApp) {
    let hello = json!([{"role": "user", "content": "hello"}]);
    let taught = turn(app, "teach", &format!("{MODEL}@desk"), hello).await;
    assert_eq!(taught, "desk");
    worker_until(app, "desk", |w| {
        w["perf"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["eval_tps"].is_number())
    })
    .await;
}

/// The turn moves for the machine the late rule chose, and only for it. With two untried
/// machines, the first of them gets the turn (the desk is busy), shows no first token,
/// and the turn moves for the desk, still busy then: the other untried machine, idle and
/// as hopeful as the first had looked, must not take it from the queue meanwhile (it did:
/// the household's seed 2, whose turn moved for moon went on to the laptop and waited 5 s
/// more for its load). The desk's answer is stopped, and the desk answers the turn.
#[tokio::test]
async fn a_turn_moved_for_a_known_machine_is_not_taken_by_an_untried_one() {
    let desk = machine_loading_in(Duration::from_secs(3), 2000).await;
    let laptop = machine_loading_in(Duration::from_secs(1000), 20).await;
    let tablet = machine_loading_in(Duration::from_secs(1000), 20).await;
    let (laptop_url, tablet_url) = (laptop.base_url(), tablet.base_url());
    let app = spawn_app_with(desk, |c| {
        machines(c, "desk", &[("laptop", laptop_url), ("tablet", tablet_url)]);
    })
    .await;
    let (busy, late) = desk_busy_and_a_turn(&app).await;
    // The laptop, the first untried machine, loads; then the turn leaves it.
    stats_until(&laptop, |s| s.requests == 1).await;
    stats_until(&laptop, |s| s.left_waiting == 1).await;
    // Someone stops the desk's answer: the desk is free.
    drop(busy);
    stats_until(&app.fake, |s| s.cancelled == 1).await;
    app.fake.release();
    done_by(&app, late, "desk").await;
    assert_eq!(tablet.stats().requests, 0, "the tablet was never asked");
    app.stop().await;
}

/// The small model of the tests below.
const SMALL: &str = "llama3.2:3b";

/// A realistic machine in real time keeping `max_loaded` models, each of `models` at its
/// own speed (load ms, prompt and generation tokens a second); every answer 150 tokens
/// (three seconds at 50 a second).
async fn machine_running(max_loaded: usize, models: &[(&str, u64, f64, f64)]) -> FakeLlmServer {
    models
        .iter()
        .fold(
            FakeLlm::builder(),
            |b, &(name, load_ms, prompt_tps, eval_tps)| {
                b.model_spec(ModelSpec {
                    speed: Some(Speed {
                        load: Duration::from_millis(load_ms),
                        prompt_tps,
                        eval_tps,
                    }),
                    ..ModelSpec::new(name)
                })
            },
        )
        .realistic(Realism {
            max_loaded,
            answer_tokens: (150, 150),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

/// ai-core: the chat model (answers of 3 s) and the small one (a 0.2 s load).
async fn ai_core(max_loaded: usize) -> FakeLlmServer {
    machine_running(
        max_loaded,
        &[(MODEL, 300, 1000.0, 50.0), (SMALL, 200, 2000.0, 500.0)],
    )
    .await
}

/// Day two of a household of ai-core and a laptop, each keeping one model, and each busy
/// with a streamed answer: the laptop with a coder turn (3 s of answer), ai-core with a
/// chat turn begun after it (`chat`, 3 s too). Placement has learned both machines'
/// figures for their models, and that the laptop keeps one model (its coder load evicted
/// the small model), but not how many ai-core keeps: the day before, it kept both of its
/// models (VRAM another program now holds). Then a streamed turn of the small model
/// (`small`) goes to ai-core: about 3.2 s to its first token there (the rest of the chat
/// answer, then its 0.2 s load), against about 5 s on the laptop (the coder answer, then
/// a 2 s load). ai-core tries it beside the chat answer; its load waits in Ollama.
struct DayTwo {
    app: TestApp,
    laptop: FakeLlmServer,
    coder: Chunks,
    chat: Chunks,
    small: JoinHandle<(String, String)>,
}

impl DayTwo {
    async fn begin() -> Self {
        let laptop = machine_running(
            1,
            &[
                (SMALL, 2000, 1000.0, 500.0),
                (crate::household::CODER, 500, 1000.0, 50.0),
            ],
        )
        .await;
        let tweak = |laptop_url: String| {
            move |c: &mut coordinator::config::Config| {
                machines(c, "ai-core", &[("laptop", laptop_url)]);
            }
        };
        // The day before.
        let app = spawn_app_with(ai_core(2).await, tweak(laptop.base_url())).await;
        tokio::join!(
            teach(&app, "ai-core", &[MODEL, SMALL]),
            teach(&app, "laptop", &[SMALL, crate::household::CODER])
        );
        let known = |w: &Value| rates_shown(w) == 2;
        worker_until(&app, "ai-core", |w| known(w) && w["max_loaded"].is_null()).await;
        worker_until(&app, "laptop", |w| known(w) && w["max_loaded"] == 1).await;
        let (dir, _roomy) = app.stop().await;
        // Day two: ai-core keeps one model.
        let fake = ai_core(1).await;
        let mut config = crate::helpers::test_config(&dir, &fake.base_url());
        tweak(laptop.base_url())(&mut config);
        let app = crate::helpers::start(config, dir, fake).await;
        worker_until(&app, "ai-core", |w| w["healthy"] == true && known(w)).await;
        worker_until(&app, "laptop", |w| {
            w["healthy"] == true && w["max_loaded"] == 1
        })
        .await;
        let coder = begun(&app, crate::household::CODER, "a coder turn").await;
        let chat = begun(&app, MODEL, "a long chat turn").await;
        let small = streamed_turn(
            &app.http,
            app.url("/v1/chat/completions"),
            SMALL,
            "a quick one",
        );
        // It went to ai-core, which tried it beside the chat answer.
        stats_until(&app.fake, |s| s.requests == 2).await;
        Self {
            app,
            laptop,
            coder,
            chat,
            small,
        }
    }

    /// Reads the chat answer until `tokens` more chunks have come.
    async fn chat_goes_on(&mut self, tokens: usize) {
        let mut lines = 0;
        while lines < tokens {
            let chunk = self
                .chat
                .next()
                .await
                .expect("the chat answer goes on")
                .unwrap();
            lines += chunk.iter().filter(|b| **b == b'\n').count();
        }
    }

    /// Once the small turn has ended, done by `worker`, and the chat answer has been read:
    /// the app and the laptop.
    async fn small_done_by(mut self, worker: &str) -> (TestApp, FakeLlmServer) {
        drop(self.coder);
        done_by(&self.app, self.small, worker).await;
        while self.chat.next().await.is_some() {}
        (self.app, self.laptop)
    }
}

/// A turn that waits on ai-core for the chat answer ahead of it, as placement expected,
/// is not late for that wait: when the laptop frees up two seconds in (a person stops the
/// coder answer), the laptop would give the first token in about 2 s, ai-core in about
/// 1.2 s more, and the turn stays. (Counting the wait as lateness, as the rule did, it
/// moved at about 2.3 s and had its first token after about 4.3 s.)
#[tokio::test]
async fn a_turn_waiting_for_the_answer_ahead_as_placement_expected_stays() {
    let mut day = DayTwo::begin().await;
    day.chat_goes_on(100).await;
    // Stop on the coder answer: the laptop is free.
    day.coder = Box::pin(futures::stream::empty());
    stats_until(&day.laptop, |s| s.cancelled == 1).await;
    let (app, laptop) = day.small_done_by("ai-core").await;
    assert_eq!(
        laptop.stats().requests,
        3,
        "the day before's two, the coder turn and nothing more"
    );
    app.stop().await;
}

/// While the turn still waits on ai-core for the chat answer ahead of it (its load has
/// not begun), a machine that now clearly gives its first token sooner takes it: the
/// laptop, freed at once (a person stops the coder answer), about 2 s against about 3 s
/// more on ai-core. The turn moves then, not once it has waited 2 s more.
#[tokio::test]
async fn a_turn_waiting_for_the_answer_ahead_moves_to_a_machine_that_frees_up_sooner() {
    let mut day = DayTwo::begin().await;
    day.coder = Box::pin(futures::stream::empty());
    // The laptop gets the turn before the chat answer on ai-core is half done.
    let mut chunks = 0;
    while day.laptop.stats().requests < 4 {
        let chunk = tokio::time::timeout(Duration::from_millis(10), day.chat.next()).await;
        if let Ok(Some(chunk)) = chunk {
            chunks += chunk.unwrap().iter().filter(|b| **b == b'\n').count();
        }
        assert!(
            chunks < 75,
            "the turn moved late: {chunks} chunks of the chat answer had come"
        );
    }
    let (app, _laptop) = day.small_done_by("laptop").await;
    app.stop().await;
}

/// A turn for a model resident and free on a machine of unknown room stays there while
/// another model answers beside it: it needs no load, so it waits for no room. ai-core
/// keeps two models (placement has not learned how many: it never evicted one), both
/// resident, and answers a long turn of the small model (three seconds); a streamed turn
/// of the chat model with a long prompt, resident beside it, goes there. The laptop, idle
/// with the chat model resident and known to be as fast, would give its first token as
/// soon. The turn is
/// answered by ai-core and the laptop gets nothing more. (Counting the small model's
/// answer as a wait for room, the late rule moved the turn to the laptop after 100 ms; in
/// the household's seed 6 a chat turn left moon, resident and free, for the slower ai-core
/// so.)
#[tokio::test]
async fn a_turn_for_a_resident_model_beside_a_busy_one_stays() {
    let ai_core =
        machine_running(2, &[(MODEL, 300, 1000.0, 50.0), (SMALL, 200, 2000.0, 50.0)]).await;
    let laptop = machine_running(1, &[(MODEL, 300, 1000.0, 50.0)]).await;
    let laptop_url = laptop.base_url();
    let app = spawn_app_with(ai_core, |c| {
        machines(c, "ai-core", &[("laptop", laptop_url)]);
    })
    .await;
    tokio::join!(
        teach(&app, "ai-core", &[SMALL, MODEL]),
        teach(&app, "laptop", &[MODEL])
    );
    let w = worker_until(&app, "ai-core", |w| {
        rates_shown(w) == 2 && w["loaded"].as_array().is_some_and(|l| l.len() == 2)
    })
    .await;
    assert_eq!(w["max_loaded"], Value::Null, "{w}");
    worker_until(&app, "laptop", |w| rates_shown(w) == 1).await;
    let small = begun(&app, SMALL, "a long answer of the small model").await;
    // A prompt of about 1,250 tokens: its first token takes over a second on either
    // machine, long after the late rule's first look.
    let chat = streamed_turn(
        &app.http,
        app.url("/v1/chat/completions"),
        MODEL,
        &format!("the chat turn: {}", "word ".repeat(1000)),
    );
    done_by(&app, chat, "ai-core").await;
    assert_eq!(
        laptop.stats().requests,
        1,
        "the day's teaching turn and nothing more"
    );
    drain(small).await;
    app.stop().await;
}

/// A load tried beside a busy model on a machine of unknown room that Ollama already
/// lists at the late rule's first look has begun: the machine had room, and the turn
/// stays. ai-core keeps two models (placement has not learned how many) and answers a
/// long chat turn (six seconds); the small model, which it has run before (a 0.5 s load)
/// but does not hold now, gets a streamed turn, tried beside the chat answer. The laptop,
/// known and idle, would load the small model in 2 s: sooner than the chat answer's rest
/// and the load, were ai-core full. The turn is answered by ai-core and the laptop gets
/// nothing more. (Taking the load as waiting for room without looking, the rule moved
/// the turn to the laptop at its first look.) The full machine's case is
/// `a_turn_waiting_for_the_answer_ahead_moves_to_a_machine_that_frees_up_sooner`.
#[tokio::test]
async fn a_load_tried_beside_a_busy_model_that_has_begun_stays() {
    let (app, laptop) = ai_core_and_a_laptop_taught().await;
    small_beside_a_chat_answer(&app, "ai-core").await;
    assert_eq!(
        laptop.stats().requests,
        2,
        "the day's two teaching turns and nothing more"
    );
    app.stop().await;
}

/// A look at the resident models that fails shows nothing: the load the turn tried
/// beside a busy model is taken as waiting for room, as it was before the rule looked,
/// not as begun because this process counted the model resident as its load began. As
/// `a_load_tried_beside_a_busy_model_that_has_begun_stays`, but ai-core's `/api/ps`
/// fails once the day's teaching turns are done: the turn moves to the laptop. (Reading
/// what this process had counted, the rule kept it on ai-core.)
#[tokio::test]
async fn a_look_that_fails_shows_no_load_begun() {
    let (app, _laptop) = ai_core_and_a_laptop_taught().await;
    app.fake.update_knobs(|k| k.ps_fails = true);
    small_beside_a_chat_answer(&app, "laptop").await;
    app.stop().await;
}

/// ai-core, keeping two models (placement has not learned how many), has run the small
/// model once and let it go (keep_alive 0) and holds the chat model; the laptop, known
/// to keep one, has shown its speed for the small model and the coder.
async fn ai_core_and_a_laptop_taught() -> (TestApp, FakeLlmServer) {
    let ai_core = machine_running(
        2,
        &[(MODEL, 300, 1000.0, 25.0), (SMALL, 500, 2000.0, 500.0)],
    )
    .await;
    let laptop = machine_running(
        1,
        &[
            (SMALL, 2000, 1000.0, 500.0),
            (crate::household::CODER, 500, 1000.0, 50.0),
        ],
    )
    .await;
    let laptop_url = laptop.base_url();
    let app = spawn_app_with(ai_core, |c| {
        machines(c, "ai-core", &[("laptop", laptop_url)]);
    })
    .await;
    // ai-core runs the small model once and lets it go at once (keep_alive 0).
    let res = app
        .http
        .post(app.url("/api/chat"))
        .json(&json!({
            "model": format!("{SMALL}@ai-core"),
            "messages": [{"role": "user", "content": "hello"}],
            "stream": false,
            "keep_alive": 0,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    teach(&app, "ai-core", &[MODEL]).await;
    teach(&app, "laptop", &[SMALL, crate::household::CODER]).await;
    let w = worker_until(&app, "ai-core", |w| {
        rates_shown(w) == 2 && w["loaded"] == json!([MODEL])
    })
    .await;
    assert_eq!(w["max_loaded"], Value::Null, "{w}");
    worker_until(&app, "laptop", |w| {
        rates_shown(w) == 2 && w["max_loaded"] == 1
    })
    .await;
    (app, laptop)
}

/// A streamed small-model turn sent while ai-core answers a long chat turn: answered by
/// `by`; then the chat answer is read to its end.
async fn small_beside_a_chat_answer(app: &TestApp, by: &str) {
    let busy = begun(app, MODEL, "a long chat turn").await;
    let small = streamed_turn(
        &app.http,
        app.url("/v1/chat/completions"),
        SMALL,
        "a quick one",
    );
    done_by(app, small, by).await;
    drain(busy).await;
}
