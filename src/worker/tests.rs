//! The task's span: a job run by a worker loop against the fake LLM, with the log events
//! it writes captured, each carrying the task's span; and jobs stored before they carried
//! their thread.

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::*;
use crate::backend::{Backend, BackendHandle, Registry};
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
        max_concurrency: 1,
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
        slots: Arc::new(Semaphore::new(1)),
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
