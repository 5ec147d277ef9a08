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
use futures::future::BoxFuture;

pub use record::{NewTask, TaskFilter, TaskOutcome, TaskRecord};

use crate::domain::{TaskId, TaskStatus, WorkerName};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("task store database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("task store database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the task store's writer has stopped (the process is shutting down)")]
    WriterStopped,
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

/// An insert on its way to disk (see [`TaskStore::insert_ordered`]).
#[must_use = "a task is accepted only once its recording is committed"]
pub struct Recording(BoxFuture<'static, Result<(), StoreError>>);

impl Recording {
    /// A recording that is already durable.
    pub fn committed() -> Self {
        Self(Box::pin(std::future::ready(Ok(()))))
    }

    pub fn new(f: impl Future<Output = Result<(), StoreError>> + Send + 'static) -> Self {
        Self(Box::pin(f))
    }

    /// Waits until the row is durable (or its write failed).
    pub async fn durable(self) -> Result<(), StoreError> {
        self.0.await
    }
}

impl Future for Recording {
    type Output = Result<(), StoreError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Records a new task (queued, or already done for rule-answered internal tasks).
    async fn insert(&self, task: &NewTask) -> Result<(), StoreError>;

    /// Records a new task like [`insert`](Self::insert), but may return before the row
    /// is durable: once it returns, the insert is ordered before every later write
    /// through this store (a claim made after it sees the row), and the [`Recording`]
    /// resolves when it is committed. Lets the service queue a task while its row is
    /// being written. By default, the insert itself (already durable when it returns).
    async fn insert_ordered(&self, task: &NewTask) -> Result<Recording, StoreError> {
        self.insert(task).await?;
        Ok(Recording::committed())
    }

    /// Orders an insert like [`insert_ordered`](Self::insert_ordered), without waiting at
    /// all, when this store can: once it returns `Ok`, the insert is ordered and only the
    /// [`Recording`] is left to await. Gives the task back when it cannot now (a store
    /// that writes over the network; a writer with a full backlog). Lets the service
    /// record a task and hand it on with no await in between, so that a client going
    /// away cannot leave a task recorded and never started.
    fn try_insert_ordered(&self, task: Box<NewTask>) -> Result<Recording, Box<NewTask>> {
        Err(task)
    }

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

    /// Records how a task ended like [`finish`](Self::finish), but may return before the
    /// outcome is durable: once it returns, the write is ordered before every later write
    /// and every later read through this store, and the [`Recording`] resolves when it is
    /// committed. Lets a worker hand the end of an answer to its client while the outcome
    /// is being written. By default, the write itself (already durable when it returns).
    async fn finish_ordered(
        &self,
        id: TaskId,
        outcome: &TaskOutcome,
    ) -> Result<Recording, StoreError> {
        self.finish(id, outcome).await?;
        Ok(Recording::committed())
    }

    async fn get(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError>;

    /// Most recent first.
    async fn list(&self, filter: &TaskFilter) -> Result<Vec<TaskRecord>, StoreError>;

    /// Tasks still queued or running, oldest first (for recovery after a restart).
    async fn unfinished(&self) -> Result<Vec<TaskRecord>, StoreError>;

    /// Up to `limit` finished (`done`) tasks in the order they were made: the first ones,
    /// or those after `after`, the `(created_at, task_id)` of the last task of the
    /// previous page. Pages through any number of tasks with one page in memory.
    async fn done_page(
        &self,
        after: Option<(DateTime<Utc>, TaskId)>,
        limit: u32,
    ) -> Result<Vec<TaskRecord>, StoreError>;

    /// How many tasks have `status`.
    async fn count(&self, status: TaskStatus) -> Result<u64, StoreError>;

    /// Checks the database answers.
    async fn ping(&self) -> Result<(), StoreError>;
}
