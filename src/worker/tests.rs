//! The task's span: a job run by a worker loop against the fake LLM, with the log events
//! it writes captured, each carrying the task's span; and jobs stored before they carried
//! their thread.

use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::*;
use crate::backend::{Backend, BackendHandle, BackendRequest, Registry};
use crate::config::{BackendConfig, BackendKind, TimeoutsConfig};
use crate::events::{InProcessEvents, TaskEvent};
use crate::queue::in_process::InProcessQueue;
use crate::store::sqlite::SqliteStore;
use crate::testkit::fake_llm::FakeLlm;
use crate::testkit::log_capture::{Capture, Captured};
use crate::testkit::samples::{sample_job, sample_task};
use crate::web::config::WebConfig;

/// A worker `w1` serving model `m` from the fake LLM, and the web lane with search off
/// (so web jobs are answered from the model alone), over a fresh SQLite store.
async fn worker(fake_url: String, dir: &tempfile::TempDir) -> Worker {
    let config = BackendConfig {
        name: "w1".into(),
        kind: BackendKind::Ollama,
        url: fake_url,
        models: Some(vec!["m".into()]),
        api_key_env: None,
        parallel: 1,
        max_loaded: None,
        keep_alive: Default::default(),
        context_length: None,
        model_context_length: Default::default(),
        max_num_ctx: None,
    };
    let backend = Backend::from_config(&config, &TimeoutsConfig::default()).unwrap();
    let model = ModelName::parse("m").unwrap();
    let registry = Registry::new(vec![BackendHandle::new(backend, 1, Some(vec![model]))]);
    let web = WebContext::new(WebConfig {
        enabled: false,
        ..WebConfig::default()
    })
    .unwrap();
    Worker {
        handle: registry.handles()[0].clone(),
        queue: Arc::new(InProcessQueue::new()),
        store: Arc::new(
            SqliteStore::open(&dir.path().join("tasks.db"))
                .await
                .unwrap(),
        ),
        events: Arc::new(InProcessEvents::new()),
        directory: Arc::new(registry),
        utility_model: None,
        web: Some(Arc::new(web)),
        web_model: None,
        rag: None,
        memory: None,
        abort: CancellationToken::new(),
        cancels: Default::default(),
        metrics: Arc::default(),
    }
}

/// Records `task`, runs `job` on a worker loop of `worker` until its events end, stops the
/// loop, and returns the job's last event.
async fn run_to_its_end(
    worker: &Worker,
    task: crate::store::NewTask,
    job: &Job,
) -> Option<TaskEvent> {
    worker.store.insert(task).await.unwrap().await.unwrap();
    let mut events = worker.events.subscribe(job.task_id).await;
    worker.queue.enqueue(job.clone()).await.unwrap();
    let (stop, tracker) = (CancellationToken::new(), TaskTracker::new());
    tracker.spawn(worker.clone().run(stop.clone(), tracker.clone()));
    let mut last = None;
    while let Some(event) = events.next().await {
        last = Some(event);
    }
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    last
}

// A current-thread runtime: the worker's tasks run on this thread, under the subscriber
// set for it alone.
#[tokio::test]
async fn a_jobs_log_events_carry_its_task_thread_and_lane() {
    let capture = Capture::default();
    let _subscriber = capture.set_default();
    let fake = FakeLlm::builder().model("m").spawn().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let worker = worker(fake.base_url(), &dir).await;

    let job = sample_job(&Lane::Web);
    let task = crate::store::NewTask {
        task_id: job.task_id,
        queue: Lane::Web,
        ..sample_task("what is new today?")
    };
    let last = run_to_its_end(&worker, task, &job).await;
    assert!(
        matches!(last, Some(TaskEvent::Chunk { .. })),
        "the job ends with its answer: {last:?}"
    );

    let captured = capture.events();
    let of_the_job: Vec<&Captured> = captured
        .iter()
        .filter(|c| c.message().starts_with("web search unavailable") || c.message() == "task done")
        .collect();
    assert_eq!(
        of_the_job.len(),
        2,
        "the web lane's and the worker's events: {captured:#?}"
    );
    let task_id = job.task_id.to_string();
    for c in of_the_job {
        let span = &c.spans;
        assert_eq!(span.get("task_id"), Some(&task_id), "{c:#?}");
        assert_eq!(
            span.get("thread_id").map(String::as_str),
            Some("t1"),
            "{c:#?}"
        );
        assert_eq!(
            span.get("lane").map(String::as_str),
            Some("tasks:web"),
            "{c:#?}"
        );
        assert!(
            !c.event.contains_key("task_id"),
            "the task id comes from the span alone: {c:#?}"
        );
    }
    let outside = captured
        .iter()
        .find(|c| c.message() == "worker started")
        .expect("the worker loop logs its start");
    assert!(
        outside.spans.is_empty(),
        "the worker loop runs outside any task's span: {outside:#?}"
    );
}

fn job_with_a_memory_note() -> Job {
    let mut job = sample_job(&Lane::llm(&ModelName::parse("m").unwrap()));
    job.memory = Some(crate::queue::MemoryNote {
        person: crate::domain::Person::default(),
        thread_id: "t-old".into(),
        prompt: "hello".into(),
    });
    job
}

#[test]
fn a_job_stored_before_jobs_carried_their_thread_still_reads_back() {
    let job = job_with_a_memory_note();
    let mut old = serde_json::to_value(&job).unwrap();
    old.as_object_mut().unwrap().remove("thread_id");
    let read: Job = serde_json::from_value(old).unwrap();
    assert_eq!(read.thread_id, None);
    assert_eq!(
        read,
        Job {
            thread_id: None,
            ..job
        }
    );
}

#[test]
fn the_span_of_a_job_without_its_thread_takes_it_from_the_memory_note() {
    let job = Job {
        thread_id: None,
        ..job_with_a_memory_note()
    };
    let capture = Capture::default();
    {
        let _subscriber = capture.set_default();
        task_span(&job).in_scope(|| tracing::info!("inside"));
    }
    let captured = capture.events();
    let span = &captured.first().expect("one event").spans;
    assert_eq!(span.get("thread_id").map(String::as_str), Some("t-old"));
    assert_eq!(span.get("task_id"), Some(&job.task_id.to_string()));
}

/// A backend that cannot be reached: the row and the client get the machine and the kind
/// of failure in the prompt's language; the log gets the whole error, once, in the task's
/// span.
#[tokio::test]
async fn a_failed_job_logs_the_whole_error_once_and_shows_only_a_safe_message() {
    let capture = Capture::default();
    let _subscriber = capture.set_default();
    let dir = tempfile::tempdir().unwrap();
    let closed = crate::testkit::chunks::closed_port().unwrap();
    let worker = worker(format!("http://{closed}"), &dir).await;

    let job = Job {
        lang: crate::lang::Lang::Ja,
        ..sample_job(&Lane::llm(&ModelName::parse("m").unwrap()))
    };
    let task = crate::store::NewTask {
        task_id: job.task_id,
        ..sample_task("こんにちは")
    };
    let last = run_to_its_end(&worker, task, &job).await;

    let shown = "w1 に接続できませんでした";
    assert_eq!(
        last,
        Some(TaskEvent::Failed {
            message: shown.to_owned()
        })
    );
    let row = worker.store.get(job.task_id).await.unwrap().unwrap();
    assert_eq!(row.error.as_deref(), Some(shown));

    let port = closed.port().to_string();
    let with_detail: Vec<Captured> = capture
        .events()
        .into_iter()
        // Coordinator's own events (hyper's debug lines name the address too).
        .filter(|c| c.event.contains_key("error") && c.event.values().any(|v| v.contains(&port)))
        .collect();
    assert_eq!(with_detail.len(), 1, "{with_detail:#?}");
    let logged = &with_detail[0];
    assert_eq!(logged.message(), "task failed");
    assert!(
        logged.event["error"].contains("cannot connect to backend w1 at http://127.0.0.1:"),
        "{logged:#?}"
    );
    assert_eq!(logged.spans.get("task_id"), Some(&job.task_id.to_string()));
}

/// What the worker sees of the machines, as given.
struct Seen(Vec<WorkerStatus>);

impl Directory for Seen {
    fn catalog(&self) -> Catalog {
        Catalog::default()
    }

    fn best_worker_for(&self, ask: &crate::placement::Ask<'_>) -> Option<WorkerName> {
        crate::placement::best_of(&self.0, ask)
    }

    fn statuses(&self) -> Vec<WorkerStatus> {
        self.0.clone()
    }

    fn any_healthy(&self) -> bool {
        self.0.iter().any(|s| s.healthy)
    }

    fn others_serving(&self, model: &ModelName, except: &[WorkerName]) -> usize {
        self.0
            .iter()
            .filter(|s| s.healthy && s.models.contains(model) && !except.contains(&s.name))
            .count()
    }
}

/// A free one-slot machine with `m` resident, at `prompt_tps`.
fn machine(name: &str, prompt_tps: f64, healthy: bool) -> WorkerStatus {
    let m = ModelName::parse("m").unwrap();
    let mut perf = crate::backend::perf::ModelPerf::new(m.clone());
    perf.load_s = Some(3.0);
    perf.prompt_tps = Some(prompt_tps);
    perf.eval_tps = Some(prompt_tps / 20.0);
    perf.answer_tokens = Some(300.0);
    perf.samples = 5;
    WorkerStatus {
        name: WorkerName::parse(name).unwrap(),
        kind: BackendKind::Ollama,
        url: String::new(),
        models: vec![m.clone()],
        loaded: vec![m],
        healthy,
        in_flight: 0,
        parallel: 1,
        last_error: None,
        perf: vec![perf],
        running: vec![],
        recent: vec![],
        max_loaded: Some(1),
        max_num_ctx: None,
        windows: vec![],
        resident: vec![],
        sizes: vec![],
        server_keep_alive_s: None,
        clock_ahead_ms: None,
    }
}

/// The fast machine `fast`, answering a turn: 150 tokens into it, its slot busy.
fn busy_fast() -> WorkerStatus {
    let mut fast = machine("fast", 1500.0, true);
    fast.in_flight = 1;
    fast.running = vec![crate::backend::activity::Running {
        model: ModelName::parse("m").unwrap(),
        started_at: chrono::Utc::now() - chrono::Duration::seconds(4),
        first_token_at: Some(chrono::Utc::now() - chrono::Duration::seconds(2)),
        tokens: 150,
        prompt_tokens: 100,
        cold: false,
        cached: false,
        priority: Default::default(),
    }];
    fast
}

/// `base` with `machines` as what its directory shows.
fn seeing(base: &Worker, machines: Vec<WorkerStatus>) -> Worker {
    Worker {
        directory: Arc::new(Seen(machines)),
        ..base.clone()
    }
}

/// `base` (the slow `w1`) seeing the fast `moon` and a laptop as slow as itself, all free.
fn beside_moon_and_laptop(base: &Worker) -> Worker {
    seeing(
        base,
        vec![
            machine("moon", 1500.0, true),
            machine("w1", 150.0, true),
            machine("laptop", 150.0, true),
        ],
    )
}

/// Worker names.
fn names(n: &[&str]) -> Vec<WorkerName> {
    n.iter().map(|n| WorkerName::parse(n).unwrap()).collect()
}

/// A job of `lane` with a prompt long enough (2,400 words) that a machine ten times
/// faster at prompts is clearly sooner.
fn long_job(lane: &Lane) -> Job {
    let job = sample_job(lane);
    Job {
        request: BackendRequest {
            messages: vec![crate::chat::ChatMessage::user("word ".repeat(2400))],
            ..job.request.clone()
        },
        ..job
    }
}

/// A job `w1` left for the faster `moon`, whose time has passed, comes back to `w1`
/// (from either queue): `w1` looks again. Moon still sooner, it is left to moon once more
/// (`w1` named once, a new time); moon out of service, it runs on `w1`. A job that
/// avoids `w1` still runs there when it gets it all the same.
#[tokio::test]
async fn a_job_left_for_another_worker_is_looked_at_again_when_its_time_has_passed() {
    let fake = FakeLlm::builder().spawn().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = worker(fake.base_url(), &dir).await;
    let w1_seeing = |moon_healthy| {
        seeing(
            &base,
            vec![
                machine("moon", 1500.0, moon_healthy),
                machine("w1", 150.0, true),
            ],
        )
    };
    let lane = Lane::llm(&ModelName::parse("m").unwrap());
    let w1 = WorkerName::parse("w1").unwrap();
    let left = |until: chrono::Duration| Job {
        avoid: vec![w1.clone()],
        avoid_until: Some(chrono::Utc::now() + until),
        ..long_job(&lane)
    };
    let due = left(-chrono::Duration::seconds(1));
    assert!(w1_seeing(true).hand_to_sooner_worker(&due).await);
    let moon = WorkerName::parse("moon").unwrap();
    let again = base
        .queue
        .dequeue(std::slice::from_ref(&lane), &moon)
        .await
        .unwrap()
        .job;
    assert_eq!(again.task_id, due.task_id);
    assert_eq!(again.avoid, std::slice::from_ref(&w1));
    assert!(again.avoid_until.unwrap() > chrono::Utc::now());
    assert!(!w1_seeing(false).hand_to_sooner_worker(&due).await);
    let still = left(chrono::Duration::hours(1));
    assert!(!w1_seeing(true).hand_to_sooner_worker(&still).await);
}

/// A turn that moved off the fast machine (late, or left for a sooner one) is not handed
/// back to it by the machine it moved to, even once the time it was left for the others
/// has passed and placement's figures favour the machine it left: it would go back and
/// forth for as long as each looked sooner to the other.
#[tokio::test]
async fn a_job_is_never_handed_back_to_a_machine_it_left() {
    let fake = FakeLlm::builder().spawn().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = worker(fake.base_url(), &dir).await;
    let w1 = seeing(
        &base,
        vec![machine("fast", 1500.0, true), machine("w1", 150.0, true)],
    );
    let lane = Lane::llm(&ModelName::parse("m").unwrap());
    let fresh = long_job(&lane);
    // A fresh job is left for the sooner machine: the figures favour it.
    assert!(w1.hand_to_sooner_worker(&fresh).await);
    let fast = WorkerName::parse("fast").unwrap();
    let _ = base
        .queue
        .dequeue(std::slice::from_ref(&lane), &fast)
        .await
        .unwrap();
    let moved_off_fast = Job {
        attempt: 1,
        avoid: vec![fast.clone()],
        avoid_until: Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
        ..fresh
    };
    assert!(!w1.hand_to_sooner_worker(&moved_off_fast).await);
}

/// A short turn that the busy fast machine would answer soonest stays on the idle slower
/// one (its load) when a long turn waits behind it for the fast machine: there it would
/// hold the slot the long one waits for. Without the long one it is left for the fast
/// machine.
#[tokio::test]
async fn a_short_turn_stays_for_a_long_one_waiting_behind_it() {
    let fake = FakeLlm::builder().spawn().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = worker(fake.base_url(), &dir).await;
    let fast = busy_fast();
    let mut slow = machine("w1", 150.0, true);
    slow.loaded.clear();
    slow.perf[0].load_s = Some(6.0);
    let w1 = seeing(&base, vec![fast, slow]);
    let lane = Lane::llm(&ModelName::parse("m").unwrap());
    let short = Job {
        waiting_since: Some(chrono::Utc::now() - chrono::Duration::seconds(10)),
        ..sample_job(&lane)
    };
    let long = long_job(&lane);
    base.queue.enqueue(long.clone()).await.unwrap();
    assert!(
        !w1.hand_to_sooner_worker(&short).await,
        "kept for the long one"
    );
    let fast = WorkerName::parse("fast").unwrap();
    let taken = base
        .queue
        .dequeue(std::slice::from_ref(&lane), &fast)
        .await
        .unwrap();
    assert_eq!(taken.job.task_id, long.task_id, "nothing else was queued");
    assert!(w1.hand_to_sooner_worker(&short).await, "nothing behind it");
}

/// A turn that moved off the laptop because its first token was late was queued for the
/// sooner moon; when the slow `w1` takes it from the lane first, `w1` leaves it for moon
/// as it would a fresh job, and the laptop still leaves it for as long as it did. A
/// failover's retry runs where it is taken: the failed laptop stays avoided for good.
#[tokio::test]
async fn a_moved_job_taken_by_a_slower_worker_is_left_for_the_sooner_one() {
    let fake = FakeLlm::builder().spawn().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = worker(fake.base_url(), &dir).await;
    let w1 = beside_moon_and_laptop(&base);
    let lane = Lane::llm(&ModelName::parse("m").unwrap());
    let laptop = WorkerName::parse("laptop").unwrap();
    let laptop_until = chrono::Utc::now() + chrono::Duration::hours(1);
    let moved = Job {
        attempt: 1,
        avoid: vec![laptop.clone()],
        avoid_until: Some(laptop_until),
        ..long_job(&lane)
    };
    assert!(w1.hand_to_sooner_worker(&moved).await);
    let moon = WorkerName::parse("moon").unwrap();
    let again = base
        .queue
        .dequeue(std::slice::from_ref(&lane), &moon)
        .await
        .unwrap()
        .job;
    assert_eq!(again.task_id, moved.task_id);
    assert_eq!(again.attempt, 1, "leaving it is not an attempt");
    assert_eq!(
        again.avoid,
        vec![laptop.clone(), WorkerName::parse("w1").unwrap()]
    );
    assert_eq!(again.avoid_until, Some(laptop_until));
    let failed_over = Job {
        avoid_until: None,
        ..moved
    };
    assert!(!w1.hand_to_sooner_worker(&failed_over).await);
}

/// The turns-behind rule does not hang on which idle worker takes the short turn from
/// the lane: the slow `w1`, for which keeping it is no better, hands it to the idle `mid`
/// that should keep it, even though the turn had left `mid` for the fast machine before,
/// and every other machine leaves it to `mid`, which then runs it. Without `mid`, `w1`
/// leaves it for the fast machine.
#[tokio::test]
async fn a_short_turn_goes_to_the_machine_that_should_keep_it_whichever_worker_looks() {
    let fake = FakeLlm::builder().spawn().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = worker(fake.base_url(), &dir).await;
    let fast = busy_fast();
    let mut mid = machine("mid", 150.0, true);
    mid.loaded.clear();
    mid.perf[0].load_s = Some(6.0);
    let mut slow = machine("w1", 50.0, true);
    slow.loaded.clear();
    slow.perf[0].load_s = Some(30.0);
    let w1 = seeing(&base, vec![fast.clone(), mid.clone(), slow.clone()]);
    let lane = Lane::llm(&ModelName::parse("m").unwrap());
    let short = Job {
        waiting_since: Some(chrono::Utc::now() - chrono::Duration::seconds(10)),
        avoid: names(&["mid"]),
        avoid_until: Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
        ..sample_job(&lane)
    };
    let long = long_job(&lane);
    base.queue.enqueue(long.clone()).await.unwrap();
    assert!(w1.hand_to_sooner_worker(&short).await, "handed on");
    let taken = |name: &str| {
        let queue = base.queue.clone();
        let lane = lane.clone();
        let name = WorkerName::parse(name).unwrap();
        async move {
            queue
                .dequeue(std::slice::from_ref(&lane), &name)
                .await
                .unwrap()
                .job
        }
    };
    let at_fast = taken("fast").await;
    assert_eq!(
        at_fast.task_id, long.task_id,
        "the short turn is not left for fast"
    );
    let at_mid = taken("mid").await;
    assert_eq!(at_mid.task_id, short.task_id);
    assert_eq!(at_mid.avoid, names(&["w1", "fast"]), "left to mid alone");
    let mid_config = BackendConfig {
        name: "mid".into(),
        kind: BackendKind::Ollama,
        url: fake.base_url(),
        models: Some(vec!["m".into()]),
        ..BackendConfig::default_ollama()
    };
    let mid_backend = Backend::from_config(&mid_config, &TimeoutsConfig::default()).unwrap();
    let mid_registry = Registry::new(vec![BackendHandle::new(
        mid_backend,
        1,
        Some(vec![ModelName::parse("m").unwrap()]),
    )]);
    let mid_worker = Worker {
        handle: mid_registry.handles()[0].clone(),
        ..seeing(&base, vec![fast.clone(), mid.clone(), slow.clone()])
    };
    assert!(
        !mid_worker.hand_to_sooner_worker(&at_mid).await,
        "mid runs it"
    );

    // Nobody better placed to keep it: left for the fast machine.
    let alone = seeing(&base, vec![fast, slow]);
    let short = Job {
        avoid: Vec::new(),
        avoid_until: None,
        ..short
    };
    base.queue.enqueue(long.clone()).await.unwrap();
    assert!(alone.hand_to_sooner_worker(&short).await);
    let (one, two) = (taken("fast").await, taken("fast").await);
    let again = [one, two]
        .into_iter()
        .find(|j| j.task_id == short.task_id)
        .expect("left for fast");
    assert_eq!(again.avoid, names(&["w1"]));
}

/// A turn late on `w1` moves to `moon`, a machine it had left before (its time to leave
/// it has passed): it is left to moon alone, and moon takes it at once, not once the
/// hour the move leaves it to moon for has passed.
#[tokio::test]
async fn a_late_turn_moved_to_a_machine_it_had_left_is_taken_there_at_once() {
    let fake = FakeLlm::builder().spawn().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = worker(fake.base_url(), &dir).await;
    let w1 = beside_moon_and_laptop(&base);
    let lane = Lane::llm(&ModelName::parse("m").unwrap());
    let left_moon = Job {
        avoid: names(&["moon"]),
        avoid_until: Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
        ..long_job(&lane)
    };
    let late = super::late::Move {
        to: WorkerName::parse("moon").unwrap(),
        waited_s: 3600.0,
        late_s: 0.0,
        there_s: 1.0,
        here: crate::backend::perf::ASSUMED,
    };
    let began = crate::backend::perf::Began {
        was_loaded: true,
        alone: true,
        cached: false,
    };
    assert!(w1.move_late(&left_moon, began, &late).await);
    let moon = WorkerName::parse("moon").unwrap();
    let taken = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        base.queue.dequeue(std::slice::from_ref(&lane), &moon),
    )
    .await
    .expect("moon takes the moved turn at once")
    .unwrap()
    .job;
    assert_eq!(taken.task_id, left_moon.task_id);
    assert_eq!(taken.avoid, names(&["w1", "laptop"]), "left to moon alone");
    assert!(taken.avoid_until.unwrap() > chrono::Utc::now() + chrono::Duration::minutes(59));
}
