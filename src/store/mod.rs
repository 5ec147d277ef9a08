//! The task store: one row per task, the source of truth for what was asked and answered.
//!
//! Sits after routing in the request flow: the service inserts a row (with the user's
//! original prompt only) before the task is queued, workers mark it running and finished.
//! SQLite in embedded mode; PostgreSQL in cluster mode, behind the same trait.

#[cfg(test)]
mod contract_tests;
pub mod postgres;
mod record;
pub mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use record::{NewTask, TaskFilter, TaskOutcome, TaskRecord};

use crate::domain::{TaskId, WorkerName};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("task store database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("task store migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("task store holds a malformed row for task {task_id}: {detail}")]
    Corrupt { task_id: String, detail: String },
    #[error("task store cannot open {path}: {detail}")]
    Open { path: String, detail: String },
}

/// What a worker learns when it claims a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The task is now running on this worker.
    Claimed,
    /// The task already finished (a duplicate delivery); skip it.
    AlreadyFinished,
    /// No such task.
    Missing,
}

#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Records a new task (queued, or already done for rule-answered internal tasks).
    async fn insert(&self, task: &NewTask) -> Result<(), StoreError>;

    /// Marks a task running on `worker` unless it already finished.
    async fn claim(
        &self,
        id: TaskId,
        worker: &WorkerName,
        at: DateTime<Utc>,
    ) -> Result<Claim, StoreError>;

    /// Puts a task back to queued (a failover retry), with the job to run next.
    async fn requeue(&self, id: TaskId, job: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Records how a task ended. Returns false when it had already ended.
    async fn finish(&self, id: TaskId, outcome: &TaskOutcome) -> Result<bool, StoreError>;

    async fn get(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError>;

    /// Most recent first.
    async fn list(&self, filter: &TaskFilter) -> Result<Vec<TaskRecord>, StoreError>;

    /// Tasks still queued or running, oldest first (for recovery after a restart).
    async fn unfinished(&self) -> Result<Vec<TaskRecord>, StoreError>;

    /// Checks the database answers.
    async fn ping(&self) -> Result<(), StoreError>;
}
