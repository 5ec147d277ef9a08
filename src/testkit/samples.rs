//! Sample jobs and tasks for the queue and store tests and benchmarks.

use crate::backend::BackendRequest;
use crate::backend::registry::WorkerStatus;
use crate::config::BackendKind;
use crate::domain::TaskStatus;
use crate::domain::{Domain, Lane, ModelName, TaskId, ThreadId, WorkerName};
use crate::queue::Job;
use crate::store::NewTask;

/// A fresh job for model `m` on `lane` in thread `t1`, with no messages.
#[allow(clippy::expect_used)] // "m" and "t1" are a valid model name and thread id.
pub fn sample_job(lane: &Lane) -> Job {
    Job {
        task_id: TaskId::new(),
        thread_id: Some(ThreadId::parse("t1").expect("a valid thread id")),
        lane: lane.clone(),
        created_at: chrono::Utc::now(),
        request: BackendRequest {
            model: ModelName::parse("m").expect("a valid model name"),
            messages: vec![],
            params: Default::default(),
            tools: vec![],
        },
        internal_task: None,
        attempt: 0,
        avoid: vec![],
        avoid_until: None,
        response: crate::chat::ResponseMode::Streamed,
        memory: None,
        lang: crate::lang::Lang::En,
        priority: crate::domain::Priority::Interactive,
        waiting_since: None,
        person: crate::domain::Person::default(),
    }
}

/// A queued task in thread `t1` for model `m`, with `prompt`.
#[allow(clippy::expect_used)] // every name here is valid.
pub fn sample_task(prompt: &str) -> NewTask {
    NewTask {
        task_id: TaskId::new(),
        created_at: chrono::Utc::now(),
        person: crate::domain::Person::default(),
        thread_id: ThreadId::parse("t1").expect("a valid thread id"),
        prompt: prompt.into(),
        domain: Domain::general(),
        model: ModelName::parse("m").expect("a valid model name"),
        queue: Lane::parse("tasks:llm:m").expect("a valid lane"),
        status: TaskStatus::Queued,
        response: None,
        worker_id: None,
        attempts: 0,
        internal_task: None,
        web_search: false,
        reasons: vec!["auto".into()],
        job: Some("{}".into()),
        remember: true,
        priority: crate::domain::Priority::Interactive,
        context: Default::default(),
        conversation: None,
    }
}

/// An Ollama machine named `name` serving `models`, healthy and idle, with one slot and
/// nothing resident, learned or configured: what a test changes is set over it.
#[allow(clippy::expect_used)] // Tests pass valid names.
pub fn idle_worker(name: &str, models: &[&str]) -> WorkerStatus {
    WorkerStatus {
        name: WorkerName::parse(name).expect("a valid worker name"),
        kind: BackendKind::Ollama,
        url: String::new(),
        models: models
            .iter()
            .map(|m| ModelName::parse(m).expect("a valid model name"))
            .collect(),
        loaded: vec![],
        healthy: true,
        in_flight: 0,
        parallel: 1,
        last_error: None,
        perf: vec![],
        running: vec![],
        recent: vec![],
        max_loaded: None,
        max_num_ctx: None,
        windows: vec![],
        resident: vec![],
        sizes: vec![],
        server_keep_alive_s: None,
        clock_ahead_ms: None,
    }
}
