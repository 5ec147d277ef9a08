//! The late rule (`worker::late`): a streamed turn that shows no first token on the
//! machine it started on for longer than placement expected there moves to a machine that
//! has shown its speed and would now give it sooner.

use std::time::Duration;

use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, Realism, Speed};
use serde_json::{Value, json};

use crate::helpers::TestApp;
use crate::helpers::{MODEL, spawn_app_with, streamed_turn};
use crate::household::stats_until;
use crate::placement::{begun, drain, machines, turn, worker_until};

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
    // The desk has shown its speed; nothing is known of the laptop.
    teach_desk(&app).await;
    // The desk is busy with a long answer.
    app.fake.hold();
    let busy = begun(&app, MODEL, "a long answer on the desk").await;
    let late = streamed_turn(
        &app.http,
        app.url("/v1/chat/completions"),
        MODEL,
        "the late turn",
    );
    // The turn went to the idle laptop, which loads.
    stats_until(&laptop, |s| s.requests == 1).await;
    app.fake.release();
    drain(busy).await;
    let (task, body) = late.await.unwrap();
    assert!(body.contains("[DONE]"), "{body}");
    let row = app.finished_task(&task).await;
    assert_eq!(row["status"], "done", "{row}");
    assert_eq!(row["worker_id"], "desk", "{row}");
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
    teach_desk(&app).await;
    app.fake.hold();
    let busy = begun(&app, MODEL, "a long answer on the desk").await;
    let late = streamed_turn(
        &app.http,
        app.url("/v1/chat/completions"),
        MODEL,
        "the late turn",
    );
    // The laptop, the first untried machine, loads; then the turn leaves it.
    stats_until(&laptop, |s| s.requests == 1).await;
    stats_until(&laptop, |s| s.left_waiting == 1).await;
    // Someone stops the desk's answer: the desk is free.
    drop(busy);
    stats_until(&app.fake, |s| s.cancelled == 1).await;
    app.fake.release();
    let (task, body) = late.await.unwrap();
    assert!(body.contains("[DONE]"), "{body}");
    let row = app.finished_task(&task).await;
    assert_eq!(
        (&row["status"], &row["worker_id"]),
        (&json!("done"), &json!("desk")),
        "{row}"
    );
    assert_eq!(tablet.stats().requests, 0, "the tablet was never asked");
    app.stop().await;
}
