//! Sample jobs for queue tests (in-process and Redis share them).

use crate::backend::BackendRequest;
use crate::domain::{Lane, ModelName, TaskId};
use crate::queue::Job;

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
    }
}
