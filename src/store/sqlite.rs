//! The SQLite task store: the embedded default (`[store] type = "sqlite"`).
//!
//! WAL mode, so readers (`GET /tasks/{id}`, the `sqlite3` CLI) never block the writer.
//! Writes are group-committed by one writer thread ([`writer`]): under load, many tasks'
//! inserts, claims and finishes share one transaction, and each caller still waits until
//! its own write is committed.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, SqlitePool};

use self::writer::{Done, Op, Writer};
use super::record::{ContextNote, task_record_from_row};
use super::{Claim, Durable, NewTask, StoreError, TaskFilter, TaskOutcome, TaskRecord, TaskStore};
use crate::config::Synchronous;
use crate::domain::{
    Domain, InternalTask, Lane, ModelName, Person, Priority, TaskId, TaskStatus, ThreadId,
    WorkerName,
};

mod checkpoint;
#[cfg(test)]
mod migration_tests;
mod writer;

/// SQLite's page cache, per connection, in KiB (SQLite's default is 2 MiB). Five
/// connections keep one each (the pool's four readers and the writer), and each fills to
/// its limit on a large store: the first turn of a person with years of memory reads tens
/// of megabytes of rows through one reader, and every insert touches pages of the task
/// table's indexes. The file's pages stay in the operating system's cache anyway, so a
/// page that is not here costs a `pread` from memory, not a disk read; what a smaller
/// cache saves is the process's own memory (docs/BENCHMARKS.md, nineteenth session).
const PAGE_CACHE_KIB: u32 = 512;

/// Reads go to the pool; writes go through one writer thread that commits them in batches
/// (see [`writer`]).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: Writer,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and applies the migrations, with the
    /// default `synchronous` (see [`Synchronous`]).
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, Synchronous::default()).await
    }

    /// [`open`](Self::open) with commits synced as `synchronous` says.
    pub async fn open_with(path: &Path, synchronous: Synchronous) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                detail: e.to_string(),
            })?;
        }
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match synchronous {
                Synchronous::Normal => SqliteSynchronous::Normal,
                Synchronous::Full => SqliteSynchronous::Full,
            })
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("cache_size", format!("-{PAGE_CACHE_KIB}"));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        // The writer's own connection, on its own thread: the pool keeps its connections
        // for reads, and checkpoints the log the writer appends to.
        let kick = checkpoint::start(pool.clone());
        let writer = Writer::start(path, synchronous, PAGE_CACHE_KIB, kick)?;
        Ok(Self { pool, writer })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Hands `op` to the writer; the handle resolves to whether it changed the row.
    async fn changed(&self, id: TaskId, op: Op) -> Result<Durable<bool>, StoreError> {
        let pending = self.writer.send(op).await?;
        Ok(Durable::new(async move {
            match pending.done().await? {
                Done::Finished(changed) => Ok(changed),
                other => Err(unexpected(id, other)),
            }
        }))
    }

    /// Waits until every write handed to the writer before now is committed, so that a
    /// read sees them (writes return once ordered, before they are committed).
    async fn settle(&self) -> Result<(), StoreError> {
        self.writer.write(Op::Barrier).await.map(|_| ())
    }
}

const COLUMNS: &str = "task_id, created_at, updated_at, thread_id, prompt, domain, model, worker_id, \
    queue, status, response, error, internal_task, web_search, fallback_used, fallback_reason, \
    reasons, job, attempts, queue_wait_ms, first_token_ms, total_ms, prompt_tokens, completion_tokens, remember, person, \
    history_dropped, memory_dropped, estimated_prompt_tokens, num_ctx, priority, conversation";

#[async_trait]
impl TaskStore for SqliteStore {
    async fn insert(&self, t: NewTask) -> Result<Durable, StoreError> {
        // The writer takes the insert at once unless its backlog is full; the caller then
        // holds an ordered write with nothing awaited.
        let pending = match self.writer.try_send(Op::Insert(Box::new(t))) {
            Ok(pending) => pending,
            Err(op) => self.writer.send(op).await?,
        };
        Ok(Durable::new(
            async move { pending.done().await.map(|_| ()) },
        ))
    }

    async fn claim(
        &self,
        id: TaskId,
        worker: &WorkerName,
        at: DateTime<Utc>,
    ) -> Result<Claim, StoreError> {
        let op = Op::Claim {
            id,
            worker: worker.as_str().to_owned(),
            at,
        };
        match self.writer.write(op).await? {
            Done::Claim(claim) => Ok(claim),
            other => Err(unexpected(id, other)),
        }
    }

    async fn requeue(&self, id: TaskId, job: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let op = Op::Requeue {
            id,
            job: job.to_owned(),
            at,
        };
        self.writer.write(op).await.map(|_| ())
    }

    async fn finish(&self, id: TaskId, o: &TaskOutcome) -> Result<Durable<bool>, StoreError> {
        let outcome = Box::new(o.clone());
        self.changed(id, Op::Finish { id, outcome }).await
    }

    async fn cancel(
        &self,
        id: TaskId,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Durable<bool>, StoreError> {
        let reason = reason.to_owned();
        self.changed(id, Op::Cancel { id, at, reason }).await
    }

    async fn record_partial(
        &self,
        id: TaskId,
        o: &TaskOutcome,
    ) -> Result<Durable<bool>, StoreError> {
        let outcome = Box::new(o.clone());
        self.changed(id, Op::Partial { id, outcome }).await
    }

    async fn get(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
        self.settle().await?;
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM tasks WHERE task_id = ?"))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| from_row(&r)).transpose()
    }

    async fn list(&self, f: &TaskFilter) -> Result<Vec<TaskRecord>, StoreError> {
        self.settle().await?;
        let (sql, values) = f.list_statement(COLUMNS, |n| format!("?{n}"));
        let mut query = sqlx::query(&sql);
        for value in values {
            query = query.bind(value);
        }
        let rows = query
            .bind(i64::from(f.limit.max(1)))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(from_row).collect()
    }

    async fn unfinished(&self) -> Result<Vec<TaskRecord>, StoreError> {
        self.settle().await?;
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM tasks WHERE status IN ('queued', 'running') ORDER BY created_at, task_id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    async fn done_page(
        &self,
        after: Option<(DateTime<Utc>, TaskId)>,
        limit: u32,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        self.settle().await?;
        let (at, id) = after.map_or((None, None), |(at, id)| (Some(at), Some(id.to_string())));
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM tasks WHERE status = 'done' \
             AND (?1 IS NULL OR created_at > ?1 OR (created_at = ?1 AND task_id > ?2)) \
             ORDER BY created_at, task_id LIMIT ?3"
        ))
        .bind(at)
        .bind(id)
        .bind(i64::from(limit.max(1)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    async fn count(&self, status: TaskStatus) -> Result<u64, StoreError> {
        self.settle().await?;
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE status = ?1")
            .bind(status.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn queued_by_person(&self) -> Result<Vec<(Person, usize)>, StoreError> {
        let rows = sqlx::query_as(super::QUEUED_BY_PERSON)
            .fetch_all(&self.pool)
            .await?;
        Ok(super::people_counted(rows))
    }

    fn writable(&self) -> Result<(), StoreError> {
        self.writer.health().map_err(StoreError::Unavailable)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

/// A write answered with another kind of result: a bug in the writer, reported as such.
fn unexpected(id: TaskId, got: Done) -> StoreError {
    StoreError::Corrupt {
        task_id: id.to_string(),
        detail: format!("the store's writer answered {got:?} to another kind of write"),
    }
}

fn from_row(r: &SqliteRow) -> Result<TaskRecord, StoreError> {
    let id_text: String = r.try_get("task_id")?;
    let corrupt = |detail: String| StoreError::Corrupt {
        task_id: id_text.clone(),
        detail,
    };
    let task_id = TaskId::parse(&id_text).map_err(|e| corrupt(e.to_string()))?;
    let status: String = r.try_get("status")?;
    let status = TaskStatus::parse(&status).map_err(|e| corrupt(e.to_string()))?;
    let reasons: String = r.try_get("reasons")?;
    let reasons: Vec<String> =
        serde_json::from_str(&reasons).map_err(|e| corrupt(format!("reasons: {e}")))?;
    Ok(task_record_from_row!(r, task_id, status, reasons, corrupt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::InternalTask;

    use crate::testkit::samples::sample_task as new_task;

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("sub/c.db"))
            .await
            .unwrap();
        (dir, s)
    }

    /// Every reading connection keeps a page cache of [`PAGE_CACHE_KIB`], not SQLite's
    /// default (the writer's: `writer::tests`).
    #[tokio::test]
    async fn reading_connections_keep_a_bounded_page_cache() {
        let (_d, s) = store().await;
        let mut held = Vec::new();
        for _ in 0..4 {
            let mut conn = s.pool().acquire().await.unwrap();
            let size: i64 = sqlx::query_scalar("PRAGMA cache_size")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(size, -i64::from(PAGE_CACHE_KIB));
            held.push(conn);
        }
    }

    #[tokio::test]
    async fn lifecycle_queued_running_done() {
        let (_d, s) = store().await;
        super::super::contract_tests::lifecycle(&s).await;
    }

    #[tokio::test]
    async fn ordered_writes_are_seen_by_later_writes_and_reads() {
        let (_d, s) = store().await;
        super::super::contract_tests::ordered_writes(&s).await;
    }

    #[tokio::test]
    async fn a_task_can_be_inserted_already_claimed() {
        let (_d, s) = store().await;
        super::super::contract_tests::inserted_claimed(&s, true).await;
    }

    #[tokio::test]
    async fn finished_tasks_are_paged_oldest_first() {
        let (_d, s) = store().await;
        super::super::contract_tests::done_pages(&s).await;
    }

    #[tokio::test]
    async fn a_cancelled_task_keeps_its_reason_and_gets_its_partial_answer() {
        let (_d, s) = store().await;
        super::super::contract_tests::cancelled(&s).await;
    }

    /// A database made before there were people (migrations 0001 and 0002 only) opens
    /// with its tasks and memories belonging to the default person, its tasks interactive.
    #[tokio::test]
    async fn rows_from_before_people_belong_to_the_default_person() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old-migrations");
        std::fs::create_dir(&old).unwrap();
        for m in ["0001_tasks.sql", "0002_memory.sql"] {
            let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
            std::fs::copy(from.join(m), old.join(m)).unwrap();
        }
        let path = dir.path().join("c.db");
        {
            let options = SqliteConnectOptions::from_str("sqlite://")
                .unwrap()
                .filename(&path)
                .create_if_missing(true);
            let pool = SqlitePoolOptions::new()
                .connect_with(options)
                .await
                .unwrap();
            sqlx::migrate::Migrator::new(old.as_path())
                .await
                .unwrap()
                .run(&pool)
                .await
                .unwrap();
            let t = new_task("asked long ago");
            sqlx::query(
                "INSERT INTO tasks (task_id, created_at, updated_at, thread_id, prompt, domain, \
                 model, attempts, queue, status, web_search, reasons) \
                 VALUES (?1, ?2, ?2, 't1', 'asked long ago', 'general', 'm', 0, 'tasks:llm:m', \
                 'queued', 0, '[]')",
            )
            .bind(t.task_id.to_string())
            .bind(t.created_at)
            .execute(&pool)
            .await
            .unwrap();
            sqlx::query(
                "INSERT INTO memory_items (id, thread_id, task_id, seq, kind, text, embedder, \
                 dim, vector, created_at) VALUES ('m1', 't1', ?1, 0, 'exchange', 'x', 'e', 0, \
                 x'', ?2)",
            )
            .bind(t.task_id.to_string())
            .bind(t.created_at)
            .execute(&pool)
            .await
            .unwrap();
            pool.close().await;
            let s = SqliteStore::open(&path).await.unwrap();
            let got = s.get(t.task_id).await.unwrap().unwrap();
            assert_eq!(got.person.as_str(), Person::DEFAULT);
            assert_eq!(got.prompt, "asked long ago");
            assert_eq!(got.priority, Priority::Interactive);
            let owner: String =
                sqlx::query_scalar("SELECT person FROM memory_items WHERE id = 'm1'")
                    .fetch_one(s.pool())
                    .await
                    .unwrap();
            assert_eq!(owner, Person::DEFAULT);
        }
    }

    #[tokio::test]
    async fn every_task_keeps_its_person() {
        let (_d, s) = store().await;
        super::super::contract_tests::people(&s).await;
    }

    #[tokio::test]
    async fn every_task_keeps_its_priority() {
        let (_d, s) = store().await;
        super::super::contract_tests::priorities(&s).await;
    }

    /// The WAL is checkpointed and reused while writes go on, instead of growing with
    /// every write (as it does when checkpoints cannot finish): when they never pause, the
    /// writer's own checkpoint bounds it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_checkpointed_while_writes_go_on() {
        let (dir, s) = store().await;
        let wal = dir.path().join("sub/c.db-wal");
        for i in 0..10_000 {
            s.insert(new_task(&format!("prompt number {i}")))
                .await
                .unwrap()
                .await
                .unwrap();
        }
        let size = std::fs::metadata(&wal).unwrap().len();
        // Without checkpoints 10,000 commits of two pages or more each (the row and its
        // indexes) would pass 78 MiB; a log page is 4 KiB and a 24-byte header.
        let bound = (checkpoint::WRITER_CHECKPOINT_PAGES as u64 + 1000) * (4096 + 24);
        assert!(
            size < bound,
            "the WAL grew to {size} bytes over 10,000 writes"
        );
        assert_eq!(
            s.list(&TaskFilter {
                limit: 20_000,
                ..Default::default()
            })
            .await
            .unwrap()
            .len(),
            10_000
        );
    }

    /// Many tasks at once through the group-committing writer: every caller gets its own
    /// result, and every row ends as its own writes left it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_each_get_their_own_result() {
        let (_d, s) = store().await;
        let s = std::sync::Arc::new(s);
        let runs: Vec<_> = (0..300)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move {
                    let t = new_task(&format!("prompt {i}"));
                    let w = WorkerName::parse(&format!("w{}", i % 7)).unwrap();
                    s.insert(t.clone()).await.unwrap().await.unwrap();
                    // Every third task is claimed twice (a redelivery while running).
                    assert_eq!(
                        s.claim(t.task_id, &w, Utc::now()).await.unwrap(),
                        Claim::Claimed
                    );
                    if i % 3 == 0 {
                        assert_eq!(
                            s.claim(t.task_id, &w, Utc::now()).await.unwrap(),
                            Claim::Claimed
                        );
                    }
                    let mut o = TaskOutcome::done(Utc::now());
                    o.response = Some(format!("answer {i}"));
                    assert!(s.finish(t.task_id, &o).await.unwrap().await.unwrap());
                    assert!(!s.finish(t.task_id, &o).await.unwrap().await.unwrap());
                    assert_eq!(
                        s.claim(t.task_id, &w, Utc::now()).await.unwrap(),
                        Claim::AlreadyFinished
                    );
                    assert_eq!(
                        s.claim(TaskId::new(), &w, Utc::now()).await.unwrap(),
                        Claim::Missing
                    );
                    (i, t.task_id, w)
                })
            })
            .collect();
        for run in runs {
            let (i, id, w) = run.await.unwrap();
            let got = s.get(id).await.unwrap().unwrap();
            assert_eq!(got.status, TaskStatus::Done);
            assert_eq!(got.prompt, format!("prompt {i}"));
            assert_eq!(got.response, Some(format!("answer {i}")));
            assert_eq!(got.worker_id.as_deref(), Some(w.as_str()));
            assert_eq!(got.attempts, if i % 3 == 0 { 2 } else { 1 });
            assert_eq!(got.job, None);
        }
        assert!(s.unfinished().await.unwrap().is_empty());
    }

    /// A write that fails inside a batch fails only its own caller.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_write_fails_only_its_caller() {
        let (_d, s) = store().await;
        let s = std::sync::Arc::new(s);
        let dup = new_task("first");
        s.insert(dup.clone()).await.unwrap().await.unwrap();
        let runs: Vec<_> = (0..100)
            .map(|i| {
                let s = s.clone();
                let task = if i == 50 {
                    dup.clone()
                } else {
                    new_task(&format!("p{i}"))
                };
                tokio::spawn(async move { (i, async { s.insert(task).await?.await }.await) })
            })
            .collect();
        for run in runs {
            let (i, result) = run.await.unwrap();
            assert_eq!(result.is_err(), i == 50, "write {i}: {result:?}");
        }
        let all = s
            .list(&TaskFilter {
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(all.len(), 100);
        assert_eq!(s.get(dup.task_id).await.unwrap().unwrap().prompt, "first");
    }

    #[tokio::test]
    async fn list_filters_and_unfinished() {
        let (_d, s) = store().await;
        let a = new_task("a");
        let mut b = new_task("b");
        b.internal_task = Some(InternalTask::TitleGeneration);
        b.status = TaskStatus::Done;
        b.response = Some("{\"title\":\"x\"}".into());
        s.insert(a.clone()).await.unwrap().await.unwrap();
        s.insert(b.clone()).await.unwrap().await.unwrap();
        let all = s
            .list(&TaskFilter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        let internal = s
            .list(&TaskFilter {
                limit: 10,
                internal_only: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(internal.len(), 1);
        assert_eq!(
            internal[0].internal_task.map(InternalTask::as_str),
            Some("title_generation")
        );
        let queued = s
            .list(&TaskFilter {
                limit: 10,
                status: Some(TaskStatus::Queued),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].task_id, a.task_id);
        let unfinished = s.unfinished().await.unwrap();
        assert_eq!(unfinished.len(), 1);
        assert_eq!(unfinished[0].job.as_deref(), Some("{}"));
    }
}
