//! Sample jobs and tasks for the queue and store tests and benchmarks.

use crate::backend::BackendRequest;
use crate::domain::TaskStatus;
use crate::domain::{Lane, ModelName, TaskId};
use crate::queue::Job;
use crate::store::NewTask;

/// A fresh job for model `m` on `lane`, with no messages.
#[allow(clippy::expect_used)] // "m" is a valid model name.
pub fn sample_job(lane: &Lane) -> Job {
    Job {
        task_id: TaskId::new(),
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
        response: crate::chat::ResponseMode::Streamed,
        memory: None,
    }
}

/// A queued task in thread `t1` for model `m`, with `prompt`.
pub fn sample_task(prompt: &str) -> NewTask {
    NewTask {
        task_id: TaskId::new(),
        created_at: chrono::Utc::now(),
        thread_id: "t1".into(),
        prompt: prompt.into(),
        domain: "general".into(),
        model: "m".into(),
        queue: "tasks:llm:m".into(),
        status: TaskStatus::Queued,
        response: None,
        worker_id: None,
        attempts: 0,
        internal_task: None,
        web_search: false,
        reasons: vec!["auto".into()],
        job: Some("{}".into()),
        remember: true,
    }
}
