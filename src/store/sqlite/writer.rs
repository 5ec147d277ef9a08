//! Group commit for the SQLite task store, on a thread of its own.
//!
//! Every write (insert, claim, requeue, finish) goes over a channel to one OS thread that
//! owns the store's only writing connection (a synchronous `rusqlite` connection with
//! cached statements). The thread takes whatever is waiting (up to [`MAX_BATCH`]), runs
//! it in one transaction, and answers each caller once the transaction has committed.
//!
//! Callers still await durability and still get their own result (rows changed, claim
//! outcome), so the [`super::TaskStore`] contract is unchanged. What this buys under
//! load: one `BEGIN`/`COMMIT` and one WAL append for many tasks instead of one per write,
//! no two connections fighting for SQLite's single write lock, and one thread hand-off
//! per batch (an async driver hands every statement to its connection's thread and back).
//!
//! Writes are applied in the order they were handed over: a claim sent after an insert
//! (even before the insert is committed) sees the inserted row. [`Writer::send`] returns
//! as soon as a write is in that order, which lets the service queue a task while its row
//! is being committed (see `TaskStore::insert` and `crate::dispatch`).
//!
//! With WAL and `synchronous = NORMAL` a commit does not wait for the disk. Checkpoints run
//! on the pool's connections when writes pause ([`super::checkpoint`]), so the writes
//! waiting here neither wait for their syncs nor meet them; while writes go on without a
//! pause, this connection's own automatic checkpoint bounds the log.
//!
//! If a batch fails, it is rolled back and its writes are run again one at a time, each in
//! its own transaction, so one bad write fails only its own caller. A write that arrives
//! alone runs as a single statement (autocommit), without `BEGIN`/`COMMIT`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

use super::super::{Claim, NewTask, StoreError, TaskOutcome};
use crate::config::Synchronous;
use crate::domain::{TaskId, WorkerName};

/// The most writes one transaction takes.
pub(super) const MAX_BATCH: usize = 256;
/// Writes waiting for the writer before callers wait to hand theirs over.
const CHANNEL_CAPACITY: usize = 4 * MAX_BATCH;
/// How long a write waits for a lock another process holds (the `sqlite3` CLI, a backup).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A write that has not finished after this long is taken as stuck on a lock that another
/// program holds: new work is refused at once (503) instead of queueing behind it.
pub(super) const STALLED_AFTER: Duration = Duration::from_secs(2);

/// Whether the writer can write: read by the service before it records a task and by
/// `/readyz`, kept by the writer thread.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// When the write in progress started (ms since the epoch); 0 when idle.
    writing_since_ms: AtomicU64,
    /// When a write last failed for the database (locked, busy, read-only, I/O, full);
    /// 0 once a write has succeeded since.
    failed_at_ms: AtomicU64,
    last_error: Mutex<Option<String>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Health {
    /// `Err` with why, when a write is stuck or one just failed for the database.
    pub(super) fn check(&self) -> Result<(), String> {
        let now = now_ms();
        let stalled = u64::try_from(STALLED_AFTER.as_millis()).unwrap_or(u64::MAX);
        let since = self.writing_since_ms.load(Ordering::Relaxed);
        if since != 0 && now.saturating_sub(since) >= stalled {
            return Err(format!(
                "a write has been waiting {} s for the database (another program holds its lock?)",
                now.saturating_sub(since) / 1000
            ));
        }
        // After a failure, new work is refused for as long as a write may stall; the one
        // that comes after is the probe that finds the database writable again.
        let failed = self.failed_at_ms.load(Ordering::Relaxed);
        if failed != 0 && now.saturating_sub(failed) < stalled {
            let why = self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .unwrap_or_default();
            return Err(format!("the last write failed: {why}"));
        }
        Ok(())
    }

    fn writing(&self) {
        self.writing_since_ms.store(now_ms(), Ordering::Relaxed);
    }

    fn wrote(&self, result: Result<(), &rusqlite::Error>) {
        self.writing_since_ms.store(0, Ordering::Relaxed);
        match result {
            Ok(()) => self.failed_at_ms.store(0, Ordering::Relaxed),
            Err(e) if is_database_failure(e) => {
                *self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
                self.failed_at_ms.store(now_ms(), Ordering::Relaxed);
            }
            // One bad write (a constraint) says nothing about the database.
            Err(_) => {}
        }
    }
}

/// Whether an error is the database's (it cannot be written now), not one write's.
fn is_database_failure(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::*;
    matches!(
        e.sqlite_error_code(),
        Some(
            DatabaseBusy
                | DatabaseLocked
                | ReadOnly
                | SystemIoFailure
                | DiskFull
                | CannotOpen
                | FileLockingProtocolFailed
        )
    )
}

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
    /// A task's cancel (see `TaskStore::cancel`).
    Cancel {
        id: TaskId,
        at: DateTime<Utc>,
        reason: String,
    },
    /// The answer of a cancelled task, onto its row (see `TaskStore::record_partial`).
    Partial {
        id: TaskId,
        outcome: Box<TaskOutcome>,
    },
    /// Writes nothing: answered once every write handed over before it is committed.
    Barrier,
}

impl Op {
    /// What the write was, for a log line.
    fn describe(&self) -> String {
        match self {
            Op::Insert(t) => format!("insert of task {}", t.task_id),
            Op::Claim { id, .. } => format!("claim of task {id}"),
            Op::Requeue { id, .. } => format!("requeue of task {id}"),
            Op::Finish { id, .. } => format!("outcome of task {id}"),
            Op::Cancel { id, .. } => format!("cancel of task {id}"),
            Op::Partial { id, .. } => format!("partial answer of task {id}"),
            Op::Barrier => "barrier".to_owned(),
        }
    }
}

/// What one write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Done {
    Inserted,
    Claim(Claim),
    Requeued,
    /// Whether the row changed (false: the task had already ended).
    Finished(bool),
    Settled,
}

type Reply = Result<Done, StoreError>;

struct Request {
    op: Op,
    reply: oneshot::Sender<Reply>,
}

/// The handle callers write through. Cheap to clone; the writer thread ends when the last
/// handle is dropped, after answering what it already took.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    tx: mpsc::Sender<Request>,
    health: Arc<Health>,
}

/// A write the writer has taken, in order; [`Pending::done`] waits for its commit.
#[derive(Debug)]
pub(super) struct Pending(oneshot::Receiver<Reply>);

impl Pending {
    pub(super) async fn done(self) -> Reply {
        self.0.await.map_err(|_| StoreError::WriterStopped)?
    }
}

impl Writer {
    /// Opens the writing connection to `path`, with a page cache of `cache_kib` KiB, and
    /// starts the writer thread, which tells `kick` of every commit. The thread is not joined on purpose: it lives exactly as
    /// long as the store's handles, holds no write that a caller is not awaiting, and so
    /// has nothing to drain at shutdown.
    pub(super) fn start(
        path: &Path,
        synchronous: Synchronous,
        cache_kib: u32,
        kick: super::checkpoint::Kick,
    ) -> Result<Self, StoreError> {
        let conn = open(path, synchronous, cache_kib)?;
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            super::checkpoint::WRITER_CHECKPOINT_PAGES,
        )?;
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let health = Arc::new(Health::default());
        let kept = health.clone();
        std::thread::Builder::new()
            .name("sqlite-writer".to_owned())
            .spawn(move || run(conn, rx, &kept, &kick))
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                detail: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(Self { tx, health })
    }

    /// Whether writes go through now (see [`Health::check`]).
    pub(super) fn health(&self) -> Result<(), String> {
        self.health.check()
    }

    /// Hands `op` to the writer. Once this returns, `op` is ordered before every write
    /// handed over later; the returned [`Pending`] resolves when it is committed.
    pub(super) async fn send(&self, op: Op) -> Result<Pending, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Request { op, reply })
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        Ok(Pending(answer))
    }

    /// Hands `op` to the writer like [`send`](Self::send) if it can take it now; gives it
    /// back when the writer's backlog is full. (With the writer stopped, the returned
    /// [`Pending`] resolves to [`StoreError::WriterStopped`].)
    pub(super) fn try_send(&self, op: Op) -> Result<Pending, Op> {
        let (reply, answer) = oneshot::channel();
        match self.tx.try_send(Request { op, reply }) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => Ok(Pending(answer)),
            Err(mpsc::error::TrySendError::Full(request)) => Err(request.op),
        }
    }

    /// Writes `op` and waits until it is committed (or failed).
    pub(super) async fn write(&self, op: Op) -> Reply {
        self.send(op).await?.done().await
    }
}

/// The writing connection: the same settings as the pool's (WAL is a property of the
/// file, set when the pool opened it; `synchronous` and the rest are per connection).
fn open(path: &Path, synchronous: Synchronous, cache_kib: u32) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let pragmas = match synchronous {
        Synchronous::Normal => {
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;"
        }
        Synchronous::Full => {
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;"
        }
    };
    conn.execute_batch(pragmas)?;
    // The tasks table's CHECK on `status` (five constants, `IN`) makes SQLite build and
    // drop a temporary table at every insert and every change of status. This
    // connection writes only the statuses of `TaskStatus` and the constants above, so
    // the check cannot fail here; the pool's connections and any other program still
    // meet it. (docs/BENCHMARKS.md, thirty-eighth session.)
    conn.pragma_update(None, "ignore_check_constraints", true)?;
    conn.pragma_update(None, "cache_size", -i64::from(cache_kib))?;
    conn.set_prepared_statement_cache_capacity(8);
    Ok(conn)
}

fn run(
    mut conn: Connection,
    mut rx: mpsc::Receiver<Request>,
    health: &Health,
    kick: &super::checkpoint::Kick,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        health.writing();
        if let [alone] = batch.as_slice() {
            // Alone: its own statement is its transaction.
            let result = apply(&conn, &alone.op);
            health.wrote(result.as_ref().map(|_| ()));
            if let Some(req) = batch.pop() {
                answer(req, result.map_err(StoreError::from));
            }
        } else {
            commit(&mut conn, &mut batch, health);
        }
        kick.committed();
    }
}

/// Tells the caller how its write went. One that stopped waiting (a client that went
/// away; a worker that does not wait for its outcome's commit) no longer needs the
/// answer, but a failure is still logged.
fn answer(req: Request, result: Reply) {
    let Request { op, reply } = req;
    if let Err(Err(e)) = reply.send(result) {
        tracing::error!(write = op.describe(), error = %e, "a task store write failed after its caller stopped waiting");
    }
}

/// Runs `batch` in one transaction and answers every caller; empties `batch`.
fn commit(conn: &mut Connection, batch: &mut Vec<Request>, health: &Health) {
    match apply_all(conn, batch) {
        Ok(results) => {
            health.wrote(Ok(()));
            for (req, done) in batch.drain(..).zip(results) {
                answer(req, Ok(done));
            }
        }
        Err(e) if is_database_failure(&e) => {
            // Locked, read-only, full: each write alone would wait and fail the same way.
            health.wrote(Err(&e));
            for req in batch.drain(..) {
                answer(req, Err(StoreError::Unavailable(e.to_string())));
            }
        }
        Err(e) => {
            tracing::debug!(writes = batch.len(), error = %e, "batched write failed; retrying one by one");
            for req in batch.drain(..) {
                health.writing();
                let result = apply(conn, &req.op);
                health.wrote(result.as_ref().map(|_| ()));
                answer(req, result.map_err(StoreError::from));
            }
        }
    }
}

fn apply_all(conn: &mut Connection, batch: &[Request]) -> rusqlite::Result<Vec<Done>> {
    // Dropping the transaction on an error rolls it back.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let out = batch
        .iter()
        .map(|req| apply(&tx, &req.op))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    tx.commit()?;
    Ok(out)
}

/// Timestamps exactly as the pool's driver writes and reads them (RFC 3339 text), so that
/// rows written here and there sort and parse alike.
fn ts(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, false)
}

// The writer's statements. None may open a temporary table as it runs (SQLite codes an
// `IN` of three or more constants as one, built and dropped at every execution: a
// fifth of the writer's work when the tasks table's `status` CHECK did it; pinned by
// `tests::the_writers_statements_build_no_temporary_table`).

const INSERT: &str = "INSERT INTO tasks (task_id, created_at, updated_at, thread_id, prompt, domain, model, \
     worker_id, attempts, queue, status, response, internal_task, web_search, reasons, job, remember, person, \
     history_dropped, memory_dropped, estimated_prompt_tokens, priority, conversation) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const CLAIM: &str = "UPDATE tasks SET status = 'running', worker_id = ?, updated_at = ?, attempts = attempts + 1 \
     WHERE task_id = ? AND status IN ('queued', 'running')";
const EXISTS: &str = "SELECT 1 FROM tasks WHERE task_id = ?";
const REQUEUE: &str = "UPDATE tasks SET status = 'queued', job = ?, updated_at = ? \
     WHERE task_id = ? AND status IN ('queued', 'running')";
const FINISH: &str = "UPDATE tasks SET status = ?, updated_at = ?, worker_id = COALESCE(?, worker_id), \
     response = ?, error = ?, fallback_used = ?, fallback_reason = ?, \
     queue_wait_ms = COALESCE(?, queue_wait_ms), first_token_ms = ?, total_ms = ?, \
     prompt_tokens = ?, completion_tokens = ?, job = NULL, num_ctx = ? \
     WHERE task_id = ? AND status IN ('queued', 'running')";
const CANCEL: &str = "UPDATE tasks SET status = 'cancelled', error = ?, updated_at = ?, job = NULL \
     WHERE task_id = ? AND (status IN ('queued', 'running') \
     OR (status = 'cancelled' AND error IS NULL))";
/// Queued, running or cancelled: written as "not ended otherwise" so that the list has
/// two terms (see above).
const PARTIAL: &str = "UPDATE tasks SET status = 'cancelled', job = NULL, updated_at = ?, \
     worker_id = COALESCE(?, worker_id), \
     response = ?, fallback_used = ?, fallback_reason = ?, \
     queue_wait_ms = COALESCE(?, queue_wait_ms), first_token_ms = ?, total_ms = ?, \
     prompt_tokens = ?, completion_tokens = ? \
     WHERE task_id = ? AND status NOT IN ('done', 'failed')";

fn apply(conn: &Connection, op: &Op) -> rusqlite::Result<Done> {
    match op {
        Op::Insert(t) => {
            let reasons = serde_json::to_string(&t.reasons).unwrap_or_else(|_| "[]".to_owned());
            let created = ts(&t.created_at);
            conn.prepare_cached(INSERT)?.execute(params![
                t.task_id.to_string(),
                created,
                created,
                t.thread_id.as_str(),
                t.prompt,
                t.domain.as_str(),
                t.model.as_str(),
                t.worker_id.as_ref().map(WorkerName::as_str),
                t.attempts,
                t.queue.to_string(),
                t.status.as_str(),
                t.response,
                t.internal_task.map(|k| k.as_str()),
                t.web_search,
                reasons,
                t.job,
                t.remember,
                t.person.as_str(),
                t.context.history_dropped,
                t.context.memory_dropped,
                t.context.estimated_prompt_tokens,
                t.priority.as_str(),
                t.conversation,
            ])?;
            Ok(Done::Inserted)
        }
        Op::Claim { id, worker, at } => {
            let id = id.to_string();
            let changed = conn
                .prepare_cached(CLAIM)?
                .execute(params![worker, ts(at), id])?;
            if changed == 1 {
                return Ok(Done::Claim(Claim::Claimed));
            }
            let exists = conn
                .prepare_cached(EXISTS)?
                .query_row([&id], |_| Ok(()))
                .optional()?;
            Ok(Done::Claim(if exists.is_some() {
                Claim::AlreadyFinished
            } else {
                Claim::Missing
            }))
        }
        Op::Requeue { id, job, at } => {
            conn.prepare_cached(REQUEUE)?
                .execute(params![job, ts(at), id.to_string()])?;
            Ok(Done::Requeued)
        }
        Op::Finish { id, outcome: o } => {
            let changed = conn.prepare_cached(FINISH)?.execute(params![
                o.status.as_str(),
                ts(&o.at),
                o.worker_id.as_ref().map(WorkerName::as_str),
                o.response,
                o.error,
                o.fallback_used,
                o.fallback_reason,
                o.queue_wait_ms,
                o.first_token_ms,
                o.total_ms,
                o.prompt_tokens,
                o.completion_tokens,
                o.num_ctx,
                id.to_string(),
            ])?;
            Ok(Done::Finished(changed == 1))
        }
        Op::Cancel { id, at, reason } => {
            let changed =
                conn.prepare_cached(CANCEL)?
                    .execute(params![reason, ts(at), id.to_string()])?;
            Ok(Done::Finished(changed == 1))
        }
        Op::Partial { id, outcome: o } => {
            let changed = conn.prepare_cached(PARTIAL)?.execute(params![
                ts(&o.at),
                o.worker_id.as_ref().map(WorkerName::as_str),
                o.response,
                o.fallback_used,
                o.fallback_reason,
                o.queue_wait_ms,
                o.first_token_ms,
                o.total_ms,
                o.prompt_tokens,
                o.completion_tokens,
                id.to_string(),
            ])?;
            Ok(Done::Finished(changed == 1))
        }
        Op::Barrier => Ok(Done::Settled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writing connection keeps the page cache it is given, in KiB.
    #[test]
    fn the_writing_connection_keeps_the_page_cache_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        Connection::open(&path).unwrap();
        let conn = open(&path, Synchronous::Normal, 384).unwrap();
        let size: i64 = conn
            .pragma_query_value(None, "cache_size", |row| row.get(0))
            .unwrap();
        assert_eq!(size, -384);
    }

    /// Every statement the writer runs is coded without a temporary table: a list of
    /// three or more constants (an `IN`, in a statement or in a CHECK it must meet) would
    /// build one at every execution.
    #[tokio::test]
    async fn the_writers_statements_build_no_temporary_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        drop(super::super::SqliteStore::open(&path).await.unwrap());
        let conn = open(&path, Synchronous::Normal, 384).unwrap();
        for sql in [INSERT, CLAIM, EXISTS, REQUEUE, FINISH, CANCEL, PARTIAL] {
            let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
            let n = explain.parameter_count();
            let ops: Vec<String> = explain
                .query_map(
                    rusqlite::params_from_iter(vec![rusqlite::types::Null; n]),
                    |row| row.get(1),
                )
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(ops.iter().any(|op| op == "Halt"), "{sql}: {ops:?}");
            assert!(
                !ops.iter().any(|op| op == "OpenEphemeral"),
                "{sql} builds a temporary table: {ops:?}"
            );
        }
    }

    /// The tasks table's CHECK still holds for every other connection.
    #[tokio::test]
    async fn the_status_check_still_holds_outside_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        drop(super::super::SqliteStore::open(&path).await.unwrap());
        let conn = Connection::open(&path).unwrap();
        let refused = conn.execute(
            "INSERT INTO tasks (task_id, created_at, updated_at, thread_id, prompt, domain, model, queue, status) \
             VALUES ('t', 'now', 'now', 'th', 'p', 'general', 'm', 'q', 'sleeping')",
            [],
        );
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("CHECK constraint failed"),
        );
    }
}
