//! A machine's own backlog: which lanes are one machine's, and what they do to placement.

use chrono::{Duration, Utc};

use super::super::tests::{model, rates, status, ttfts, with_rates};
use super::*;
use crate::backend::activity::Recent;
use crate::placement::{Ahead, Ask, best_of, estimates};

fn lane(s: &str) -> Lane {
    Lane::parse(s).unwrap()
}

fn name(s: &str) -> WorkerName {
    WorkerName::parse(s).unwrap()
}

/// Moon (fast) serves `m` and the coder, which no other machine has; ai-core (a fifth of
/// moon's prompt rate, a third of its answers) serves `m`. Both idle, `m` resident on both.
fn moon_and_ai_core() -> [WorkerStatus; 2] {
    let mut moon = with_rates(status("moon", true, 0), 3.0, 1500.0, 80.0);
    moon.models.push(model("coder"));
    moon.loaded.push(model("coder"));
    moon.perf.push(rates("coder", 3.0, 1500.0, 80.0));
    let ai_core = with_rates(status("ai-core", true, 0), 6.0, 300.0, 27.0);
    [moon, ai_core]
}

fn jobs(jobs: usize, prompt_tokens: u64) -> Ahead {
    Ahead {
        jobs,
        prompt_tokens: Some(prompt_tokens),
    }
}

#[test]
fn a_lane_is_one_machines_when_pinned_there_or_when_no_other_serves_its_model() {
    let statuses = moon_and_ai_core();
    let only = |l: &str| only_server(&statuses, &lane(l)).map(ToString::to_string);
    assert_eq!(only("tasks:llm:coder").as_deref(), Some("moon"));
    assert_eq!(only("tasks:llm:m@ai-core").as_deref(), Some("ai-core"));
    assert_eq!(only("tasks:llm:m"), None, "both serve it");
    assert_eq!(
        only("tasks:llm:coder@ai-core"),
        None,
        "ai-core has no coder"
    );
    assert_eq!(only("tasks:llm:elsewhere"), None);
    assert_eq!(only("tasks:web"), None);
    // A second machine with the coder, down: its work still waits for moon alone.
    let mut down = status("laptop", false, 0);
    down.models = vec![model("coder")];
    down.healthy = false;
    let with_down = [statuses[0].clone(), statuses[1].clone(), down.clone()];
    assert_eq!(
        only_server(&with_down, &lane("tasks:llm:coder")),
        Some(&name("moon"))
    );
    down.healthy = true;
    let with_up = [statuses[0].clone(), statuses[1].clone(), down];
    assert_eq!(only_server(&with_up, &lane("tasks:llm:coder")), None);
    // Where a worker asks lane by lane: moon's lanes other than the task's own.
    let owed: Vec<String> = lanes_owed_by(&statuses, &statuses[0], &lane("tasks:llm:m"))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        owed,
        [
            "tasks:llm:m@moon",
            "tasks:llm:coder@moon",
            "tasks:llm:coder"
        ]
    );
}

#[test]
fn what_waits_is_counted_into_the_tasks_lane_or_the_one_machine_that_serves_it() {
    let statuses = moon_and_ai_core();
    let own = lane("tasks:llm:m");
    let mut waiting = Waiting::default();
    waiting.count(&statuses, &own, &own, jobs(2, 100));
    waiting.count(&statuses, &own, &lane("tasks:llm:coder"), jobs(1, 1000));
    waiting.count(&statuses, &own, &lane("tasks:llm:coder@moon"), jobs(2, 500));
    waiting.count(
        &statuses,
        &own,
        &lane("tasks:llm:m@ai-core"),
        Ahead::jobs(1),
    );
    waiting.count(&statuses, &own, &lane("tasks:web"), jobs(3, 10));
    assert_eq!(waiting.ahead, jobs(2, 100));
    let (moon, ai_core) = (name("moon"), name("ai-core"));
    let moon: Vec<&Owed> = waiting.backlog.of(&moon).collect();
    assert_eq!(moon.len(), 1, "{moon:?}");
    assert_eq!(moon[0].model, model("coder"));
    assert_eq!(
        moon[0].ahead,
        jobs(3, 1500),
        "the coder's two lanes together"
    );
    let ai_core: Vec<&Owed> = waiting.backlog.of(&ai_core).collect();
    assert_eq!(ai_core[0].ahead, Ahead::jobs(1), "its prompts unknown");
    // Nothing of a lane two machines serve, and nothing at all for an empty lane.
    let mut empty = Waiting::default();
    empty.count(&statuses, &lane("tasks:llm:coder"), &own, jobs(4, 400));
    empty.count(&statuses, &own, &lane("tasks:llm:coder"), jobs(0, 0));
    assert!(empty.backlog.is_empty(), "{empty:?}");
}

#[test]
fn a_machine_that_owes_work_in_another_lane_looks_as_busy_as_it_is() {
    let statuses = moon_and_ai_core();
    let m = model("m");
    let ask = Ask::fresh(&m, 1500);
    let ttft = |ask: &Ask<'_>| ttfts(&statuses, ask);
    // Nothing owed: moon's prompt takes 1 s, ai-core's 5 s.
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "moon");
    // Two coder turns of 1,500 tokens wait for moon, the only machine with the coder:
    // each 1 s of prompt and 3.75 s of answer there, so moon starts the task at 9.5 s
    // and gives its first token at 10.5 s; ai-core, which owes nothing, at 5 s.
    let mut waiting = Waiting::default();
    waiting.count(
        &statuses,
        &lane("tasks:llm:m"),
        &lane("tasks:llm:coder"),
        jobs(2, 3000),
    );
    let owing = ask.after(&waiting);
    let t = ttft(&owing);
    assert!(
        (t[0] - 10.5).abs() < 1e-6 && (t[1] - 5.0).abs() < 1e-6,
        "{t:?}"
    );
    assert_eq!(best_of(&statuses, &owing).unwrap().to_string(), "ai-core");
    // Work pinned to moon counts the same way.
    let mut pinned = Waiting::default();
    pinned.count(
        &statuses,
        &lane("tasks:llm:m"),
        &lane("tasks:llm:m@moon"),
        jobs(2, 3000),
    );
    assert_eq!(ttft(&ask.after(&pinned))[0], t[0]);
    assert_eq!(
        best_of(&statuses, &ask.after(&pinned)).unwrap().to_string(),
        "ai-core"
    );
}

#[test]
fn a_load_for_a_machines_backlog_can_push_the_tasks_model_out() {
    // Moon holds two models at most: `m` (used two minutes ago) and `x` (just now); the
    // coder, not resident, loads for the turn it owes and pushes `m` out.
    let now = Utc::now();
    let [mut moon, _] = moon_and_ai_core();
    moon.loaded = vec![model("m"), model("x")];
    moon.max_loaded = Some(2);
    let used = |m: &str, secs: i64| Recent {
        thread: crate::domain::ThreadId::parse("t").unwrap(),
        model: model(m),
        at: now - Duration::seconds(secs),
        tokens: 10,
    };
    moon.recent = vec![used("m", 120), used("x", 5)];
    let statuses = [moon];
    let m = model("m");
    let mut waiting = Waiting::default();
    waiting.count(
        &statuses,
        &lane("tasks:llm:m"),
        &lane("tasks:llm:coder"),
        jobs(1, 1500),
    );
    // The coder's load (3 s), prompt (1 s) and answer (3.75 s); then `m` loads again
    // (3 s) and takes its prompt (1 s).
    let e = &estimates(&statuses, &Ask::fresh(&m, 1500).after(&waiting), now)[0];
    assert!(!e.resident, "{e:?}");
    assert!((e.ttft_s - (7.75 + 4.0)).abs() < 1e-6, "{e:?}");
    // Used more lately than `x`, `m` stays: only the coder's turn is waited for.
    let mut kept = statuses[0].clone();
    kept.recent = vec![used("m", 5), used("x", 120)];
    let kept = [kept];
    let e = &estimates(&kept, &Ask::fresh(&m, 1500).after(&waiting), now)[0];
    assert!(
        e.resident && (e.ttft_s - (7.75 + 1.0)).abs() < 1e-6,
        "{e:?}"
    );
}
