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

pub use record::{
    ContextNote, NewTask, TaskFilter, TaskOutcome, TaskRecord, recorded_answer, recorded_response,
};

use crate::domain::{Person, TaskId, TaskStatus, WorkerName};

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
    /// The database cannot be written now (locked by another program, read-only, full).
    #[error("the task store cannot write: {0}")]
    Unavailable(String),
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

/// A write the store has taken: once a caller holds it, the write is ordered before every
/// later write and read through the same store (a claim made after an insert sees the row;
/// a read after a finish sees the outcome), and it resolves once the write is durable, with
/// the write's result. A store whose writes are durable when they return (PostgreSQL)
/// hands out one that is already resolved.
#[must_use = "a write is accepted only once it is durable"]
pub struct Durable<T = ()>(BoxFuture<'static, Result<T, StoreError>>);

impl<T: Send + 'static> Durable<T> {
    /// A write that is already durable.
    pub fn done(value: T) -> Self {
        Self(Box::pin(std::future::ready(Ok(value))))
    }

    pub fn new(f: impl Future<Output = Result<T, StoreError>> + Send + 'static) -> Self {
        Self(Box::pin(f))
    }
}

impl<T> Future for Durable<T> {
    type Output = Result<T, StoreError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Records a new task (queued; running when it is handed to a worker with its row;
    /// already done for rule-answered internal tasks). Returns once the insert is ordered
    /// (see [`Durable`]); await the handle for durability. A store that writes locally
    /// returns at its first poll unless its writer's backlog is full, so a caller can
    /// record a task and hand it on with nothing awaited in between.
    async fn insert(&self, task: NewTask) -> Result<Durable, StoreError>;

    /// Marks a task running on `worker` unless it already finished.
    async fn claim(
        &self,
        id: TaskId,
        worker: &WorkerName,
        at: DateTime<Utc>,
    ) -> Result<Claim, StoreError>;

    /// Puts a task back to queued (a failover retry), with the job to run next.
    async fn requeue(&self, id: TaskId, job: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Records how a task ended. Returns once the write is ordered (see [`Durable`]);
    /// the handle resolves to false when the task had already ended.
    async fn finish(&self, id: TaskId, outcome: &TaskOutcome) -> Result<Durable<bool>, StoreError>;

    /// Ends a queued or running task `cancelled`, with `reason` as its error. Returns once
    /// the write is ordered (see [`Durable`]); the handle resolves to false when the task
    /// had ended already. Its worker may have been told first and ended the row with
    /// [`record_partial`](Self::record_partial): the two give the same row in either
    /// order (this one then adds the reason, and still resolves to true).
    async fn cancel(
        &self,
        id: TaskId,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Durable<bool>, StoreError>;

    /// Writes what the worker of a cancelled task had sent its client (`outcome`'s
    /// response, worker, timings, token counts and fallback) onto the task's row, and
    /// ends it `cancelled` if [`cancel`](Self::cancel) has not yet; never changes a row
    /// that ended otherwise, nor a cancelled one's reason. Returns once the write is
    /// ordered (see [`Durable`]); the handle resolves to false when the row had ended
    /// done or failed (or does not exist).
    async fn record_partial(
        &self,
        id: TaskId,
        outcome: &TaskOutcome,
    ) -> Result<Durable<bool>, StoreError>;

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

    /// How many queued tasks each person has (those with none left out), as far as the
    /// store knows now: for the bound on each person's waiting work in cluster mode.
    async fn queued_by_person(&self) -> Result<Vec<(Person, usize)>, StoreError>;

    /// Checks the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Whether a write would go through now, without trying one: `Err` when the store
    /// knows it cannot write (its writer stuck on another program's lock, or failing),
    /// so that new work is refused at once rather than after the lock's timeout.
    fn writable(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The SQL both stores answer [`TaskStore::queued_by_person`] with (the status index
/// finds the queued rows).
const QUEUED_BY_PERSON: &str =
    "SELECT person, count(*) FROM tasks WHERE status = 'queued' GROUP BY person";

/// Rows of [`QUEUED_BY_PERSON`] as counts; a person the store holds that no longer parses
/// is left out (it cannot send work).
fn people_counted(rows: Vec<(String, i64)>) -> Vec<(Person, usize)> {
    rows.into_iter()
        .filter_map(|(p, n)| Some((Person::parse(&p).ok()?, usize::try_from(n).ok()?)))
        .collect()
}

/// The database `[store]` names, opened with every migration applied: what the memory,
/// document and learned-figure stores open their own pool on.
pub enum Database {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Database {
    pub async fn open(config: &crate::config::StoreConfig) -> Result<Self, StoreError> {
        use crate::config::StoreConfig;
        Ok(match config {
            StoreConfig::Sqlite { path, synchronous } => Self::Sqlite(
                sqlite::SqliteStore::open_with(path, *synchronous)
                    .await?
                    .pool()
                    .clone(),
            ),
            StoreConfig::Postgres { url, schema } => {
                let tasks = match schema {
                    Some(s) => {
                        postgres::PostgresStore::connect_with_schema(url.expose(), s).await?
                    }
                    None => postgres::PostgresStore::connect(url.expose()).await?,
                };
                Self::Postgres(tasks.pool().clone())
            }
        })
    }
}
