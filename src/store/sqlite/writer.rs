//! Group commit for the SQLite task store: every write (insert, claim, requeue, finish)
//! goes to one writer task over a channel; the writer takes whatever is waiting (up to
//! [`MAX_BATCH`]), runs it in one transaction, and answers each caller once the
//! transaction has committed.
//!
//! Callers still await durability and still get their own result (rows changed, claim
//! outcome), so the [`super::TaskStore`] contract is unchanged. What changes is the cost
//! under load: one `BEGIN`/`COMMIT` and one WAL append for many tasks instead of one per
//! write, and no two connections fighting for SQLite's single write lock (which made
//! writers sleep in the busy handler). With one request in flight a batch is one write,
//! as before.
//!
//! If a batch fails, it is rolled back and its writes are run again one at a time, each in
//! its own transaction, so one bad write fails only its own caller. A write that arrives
//! alone runs as a single statement (autocommit), without `BEGIN`/`COMMIT`.

use chrono::{DateTime, Utc};
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use super::super::{Claim, NewTask, StoreError, TaskOutcome};
use crate::domain::TaskId;

/// The most writes one transaction takes.
pub(super) const MAX_BATCH: usize = 256;
/// Writes waiting for the writer before callers wait to hand theirs over.
const CHANNEL_CAPACITY: usize = 4 * MAX_BATCH;

/// One write, owning what it binds.
#[derive(Debug)]
pub(super) enum Op {
    Insert(Box<NewTask>),
    Claim {
        id: TaskId,
        worker: String,
        at: DateTime<Utc>,
    },
    Requeue {
        id: TaskId,
        job: String,
        at: DateTime<Utc>,
    },
    Finish {
        id: TaskId,
        outcome: Box<TaskOutcome>,
    },
}

/// What one write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Done {
    Inserted,
    Claim(Claim),
    Requeued,
    /// Whether the row changed (false: the task had already ended).
    Finished(bool),
}

struct Request {
    op: Op,
    reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// The handle callers write through. Cheap to clone; the writer task ends when the last
/// handle is dropped, after answering what it already took.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    tx: mpsc::Sender<Request>,
}

impl Writer {
    /// Starts the writer task on the current runtime, owning `conn` (the store's only
    /// writing connection, so writers never wait for SQLite's write lock). It is not
    /// tracked by a `TaskTracker` on purpose: it lives exactly as long as the store's
    /// handles, holds no write that a caller is not awaiting, and so has nothing to drain
    /// at shutdown.
    pub(super) fn start(conn: SqliteConnection) -> Self {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        tokio::spawn(run(conn, rx));
        Self { tx }
    }

    /// Queues `op` and waits until it is committed (or failed).
    pub(super) async fn write(&self, op: Op) -> Result<Done, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Request { op, reply })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The writer is gone only when the runtime is shutting down.
fn stopped() -> StoreError {
    StoreError::Database(sqlx::Error::PoolClosed)
}

async fn run(mut conn: SqliteConnection, mut rx: mpsc::Receiver<Request>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if batch.len() == 1 {
            // Alone: its own statement is its transaction, without BEGIN and COMMIT
            // round trips to the connection's thread.
            if let Some(req) = batch.pop() {
                let result = apply(&mut conn, &req.op).await.map_err(StoreError::from);
                let _ = req.reply.send(result);
            }
        } else {
            commit(&mut conn, &mut batch).await;
        }
    }
    let _ = conn.close().await;
}

/// Runs `batch` in one transaction and answers every caller; empties `batch`.
async fn commit(conn: &mut SqliteConnection, batch: &mut Vec<Request>) {
    match apply_all(conn, batch).await {
        Ok(results) => {
            for (req, done) in batch.drain(..).zip(results) {
                // A caller that went away (client disconnected) no longer needs the answer.
                let _ = req.reply.send(Ok(done));
            }
        }
        Err(e) => {
            tracing::debug!(writes = batch.len(), error = %e, "batched write failed; retrying one by one");
            for req in batch.drain(..) {
                let result = apply(conn, &req.op).await.map_err(StoreError::from);
                let _ = req.reply.send(result);
            }
        }
    }
}

async fn apply_all(
    conn: &mut SqliteConnection,
    batch: &[Request],
) -> Result<Vec<Done>, sqlx::Error> {
    let mut tx = conn.begin().await?;
    let mut out = Vec::with_capacity(batch.len());
    for req in batch {
        match apply(&mut tx, &req.op).await {
            Ok(done) => out.push(done),
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(e);
            }
        }
    }
    tx.commit().await?;
    Ok(out)
}

async fn apply(conn: &mut SqliteConnection, op: &Op) -> Result<Done, sqlx::Error> {
    match op {
        Op::Insert(t) => {
            let reasons = serde_json::to_string(&t.reasons).unwrap_or_else(|_| "[]".to_owned());
            sqlx::query(
                "INSERT INTO tasks (task_id, created_at, updated_at, thread_id, prompt, domain, model, \
                 worker_id, queue, status, response, internal_task, web_search, reasons, job, remember) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(t.task_id.to_string())
            .bind(t.created_at)
            .bind(t.created_at)
            .bind(&t.thread_id)
            .bind(&t.prompt)
            .bind(&t.domain)
            .bind(&t.model)
            .bind(&t.worker_id)
            .bind(&t.queue)
            .bind(t.status.as_str())
            .bind(&t.response)
            .bind(t.internal_task.map(|k| k.as_str()))
            .bind(t.web_search)
            .bind(reasons)
            .bind(&t.job)
            .bind(t.remember)
            .execute(&mut *conn)
            .await?;
            Ok(Done::Inserted)
        }
        Op::Claim { id, worker, at } => {
            let changed = sqlx::query(
                "UPDATE tasks SET status = 'running', worker_id = ?, updated_at = ?, attempts = attempts + 1 \
                 WHERE task_id = ? AND status IN ('queued', 'running')",
            )
            .bind(worker)
            .bind(at)
            .bind(id.to_string())
            .execute(&mut *conn)
            .await?;
            if changed.rows_affected() == 1 {
                return Ok(Done::Claim(Claim::Claimed));
            }
            let exists = sqlx::query("SELECT 1 FROM tasks WHERE task_id = ?")
                .bind(id.to_string())
                .fetch_optional(&mut *conn)
                .await?;
            Ok(Done::Claim(if exists.is_some() {
                Claim::AlreadyFinished
            } else {
                Claim::Missing
            }))
        }
        Op::Requeue { id, job, at } => {
            sqlx::query(
                "UPDATE tasks SET status = 'queued', job = ?, updated_at = ? \
                 WHERE task_id = ? AND status IN ('queued', 'running')",
            )
            .bind(job)
            .bind(at)
            .bind(id.to_string())
            .execute(&mut *conn)
            .await?;
            Ok(Done::Requeued)
        }
        Op::Finish { id, outcome: o } => {
            let changed = sqlx::query(
                "UPDATE tasks SET status = ?, updated_at = ?, worker_id = COALESCE(?, worker_id), \
                 response = ?, error = ?, fallback_used = ?, fallback_reason = ?, \
                 queue_wait_ms = COALESCE(?, queue_wait_ms), first_token_ms = ?, total_ms = ?, \
                 prompt_tokens = ?, completion_tokens = ?, job = NULL \
                 WHERE task_id = ? AND status IN ('queued', 'running')",
            )
            .bind(o.status.as_str())
            .bind(o.at)
            .bind(&o.worker_id)
            .bind(&o.response)
            .bind(&o.error)
            .bind(o.fallback_used)
            .bind(&o.fallback_reason)
            .bind(o.queue_wait_ms)
            .bind(o.first_token_ms)
            .bind(o.total_ms)
            .bind(o.prompt_tokens)
            .bind(o.completion_tokens)
            .bind(id.to_string())
            .execute(&mut *conn)
            .await?;
            Ok(Done::Finished(changed.rows_affected() == 1))
        }
    }
}
