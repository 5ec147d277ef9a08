//! Rows of the `tasks` table as Rust types.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::{InternalTask, TaskId, TaskStatus};

/// A task as the service records it, before any worker touches it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewTask {
    pub task_id: TaskId,
    pub created_at: DateTime<Utc>,
    pub thread_id: String,
    /// The user's original prompt, and nothing else.
    pub prompt: String,
    pub domain: String,
    pub model: String,
    pub queue: String,
    pub status: TaskStatus,
    /// Set for tasks that are finished on insert (rule-answered internal tasks).
    pub response: Option<String>,
    pub worker_id: Option<String>,
    pub internal_task: Option<InternalTask>,
    pub web_search: bool,
    pub reasons: Vec<String>,
    /// The serialised job, for tasks that go to a queue.
    pub job: Option<String>,
    /// False when the user asked that this turn not be remembered (conversation memory).
    pub remember: bool,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskOutcome {
    pub status: TaskStatus,
    pub at: DateTime<Utc>,
    pub worker_id: Option<String>,
    pub response: Option<String>,
    pub error: Option<String>,
    pub fallback_used: bool,
    pub fallback_reason: Option<String>,
    pub queue_wait_ms: Option<i64>,
    pub first_token_ms: Option<i64>,
    pub total_ms: Option<i64>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
}

impl TaskOutcome {
    pub fn failed(at: DateTime<Utc>, error: impl Into<String>) -> Self {
        Self {
            status: TaskStatus::Failed,
            at,
            worker_id: None,
            response: None,
            error: Some(error.into()),
            fallback_used: false,
            fallback_reason: None,
            queue_wait_ms: None,
            first_token_ms: None,
            total_ms: None,
            prompt_tokens: None,
            completion_tokens: None,
        }
    }
}

/// A whole row, as `GET /tasks/{id}` and `coordinator tasks show` present it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRecord {
    pub task_id: TaskId,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub thread_id: String,
    pub prompt: String,
    pub domain: String,
    pub model: String,
    pub worker_id: Option<String>,
    pub queue: String,
    pub status: TaskStatus,
    pub response: Option<String>,
    pub error: Option<String>,
    pub internal_task: Option<String>,
    pub web_search: bool,
    pub fallback_used: bool,
    pub fallback_reason: Option<String>,
    pub reasons: Vec<String>,
    #[serde(skip)]
    pub job: Option<String>,
    pub attempts: i64,
    pub queue_wait_ms: Option<i64>,
    pub first_token_ms: Option<i64>,
    pub total_ms: Option<i64>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// False when the user asked that this turn not be remembered, or forgot its memory.
    pub remember: bool,
}

/// Which tasks `list` returns.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub status: Option<TaskStatus>,
    /// Only internal tasks (Open WebUI background tasks).
    pub internal_only: bool,
    pub thread_id: Option<String>,
    pub limit: u32,
}
