//! The PostgreSQL task store: cluster mode (`[store] type = "postgres"`).
//!
//! Same table, semantics and idempotency as [`super::sqlite`]: the service inserts the row
//! before queueing, workers on any machine claim and finish it. `claim` and `finish` are
//! single conditional `UPDATE`s, so two workers that got the same job (Redis delivers at
//! least once) cannot both finish it. Native types: `uuid`, `timestamptz`, `jsonb`, so
//! `psql -c "SELECT prompt FROM tasks WHERE task_id = '…'"` works as it does on SQLite.

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::record::{ContextNote, task_record_from_row};
use super::{Claim, Durable, NewTask, StoreError, TaskFilter, TaskOutcome, TaskRecord, TaskStore};
use crate::domain::{
    Domain, InternalTask, Lane, ModelName, Person, Priority, TaskId, TaskStatus, ThreadId,
    WorkerName,
};

const MAX_CONNECTIONS: u32 = 8;

#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:5432/db`) and applies the migrations to the
    /// connection's default schema.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)?;
        Self::open(options, None).await
    }

    /// Like [`connect`](Self::connect), but keeps every table in `schema` (created if
    /// missing): each pooled connection starts with `search_path` set to it. Tests use
    /// this to run in parallel, one schema each, and [`drop_schema`](Self::drop_schema)
    /// afterwards. `schema` must be a plain lowercase identifier (`[a-z_][a-z0-9_]*`).
    pub async fn connect_with_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        check_schema_name(schema)?;
        let options = PgConnectOptions::from_str(url)?.options([("search_path", schema)]);
        Self::open(options, Some(schema)).await
    }

    async fn open(options: PgConnectOptions, schema: Option<&str>) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await?;
        if let Some(schema) = schema {
            // An identifier cannot be a bind parameter; `check_schema_name` allows only
            // `[a-z0-9_]`, so the quoted name cannot break out of the statement.
            sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
                .execute(&pool)
                .await?;
        }
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }

    /// Drops `schema` and everything in it, then closes the pool. For tests that used
    /// [`connect_with_schema`](Self::connect_with_schema).
    pub async fn drop_schema(self, schema: &str) -> Result<(), StoreError> {
        check_schema_name(schema)?;
        sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .execute(&self.pool)
            .await?;
        self.pool.close().await;
        Ok(())
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let mut chars = schema.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && schema.len() <= 63;
    if ok {
        Ok(())
    } else {
        Err(StoreError::Open {
            path: format!("schema {schema:?}"),
            detail: "a schema name must match [a-z_][a-z0-9_]* and be at most 63 bytes".into(),
        })
    }
}

const COLUMNS: &str = "task_id, created_at, updated_at, thread_id, prompt, domain, model, worker_id, \
    queue, status, response, error, internal_task, web_search, fallback_used, fallback_reason, \
    reasons, job, attempts, queue_wait_ms, first_token_ms, total_ms, prompt_tokens, completion_tokens, remember, person, \
    history_dropped, memory_dropped, estimated_prompt_tokens, num_ctx, priority, conversation";

#[async_trait]
impl TaskStore for PostgresStore {
    async fn insert(&self, t: NewTask) -> Result<Durable, StoreError> {
        sqlx::query(
            "INSERT INTO tasks (task_id, created_at, updated_at, thread_id, prompt, domain, model, \
             worker_id, attempts, queue, status, response, internal_task, web_search, reasons, job, remember, person, \
             history_dropped, memory_dropped, estimated_prompt_tokens, priority, conversation) \
             VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)",
        )
        .bind(t.task_id.as_uuid())
        .bind(t.created_at)
        .bind(t.thread_id.as_str())
        .bind(&t.prompt)
        .bind(t.domain.as_str())
        .bind(t.model.as_str())
        .bind(t.worker_id.as_ref().map(WorkerName::as_str))
        .bind(t.attempts)
        .bind(t.queue.to_string())
        .bind(t.status.as_str())
        .bind(&t.response)
        .bind(t.internal_task.map(|k| k.as_str()))
        .bind(t.web_search)
        .bind(Json(&t.reasons))
        .bind(&t.job)
        .bind(t.remember)
        .bind(t.person.as_str())
        .bind(t.context.history_dropped)
        .bind(t.context.memory_dropped)
        .bind(t.context.estimated_prompt_tokens)
        .bind(t.priority.as_str())
        .bind(&t.conversation)
        .execute(&self.pool)
        .await?;
        Ok(Durable::done(()))
    }

    async fn claim(
        &self,
        id: TaskId,
        worker: &WorkerName,
        at: DateTime<Utc>,
    ) -> Result<Claim, StoreError> {
        let done = sqlx::query(
            "UPDATE tasks SET status = 'running', worker_id = $1, updated_at = $2, \
             attempts = attempts + 1 \
             WHERE task_id = $3 AND status IN ('queued', 'running')",
        )
        .bind(worker.as_str())
        .bind(at)
        .bind(id.as_uuid())
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 1 {
            return Ok(Claim::Claimed);
        }
        let exists = sqlx::query("SELECT 1 FROM tasks WHERE task_id = $1")
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await?;
        Ok(if exists.is_some() {
            Claim::AlreadyFinished
        } else {
            Claim::Missing
        })
    }

    async fn requeue(&self, id: TaskId, job: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE tasks SET status = 'queued', job = $1, updated_at = $2 \
             WHERE task_id = $3 AND status IN ('queued', 'running')",
        )
        .bind(job)
        .bind(at)
        .bind(id.as_uuid())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn finish(&self, id: TaskId, o: &TaskOutcome) -> Result<Durable<bool>, StoreError> {
        let done = sqlx::query(
            "UPDATE tasks SET status = $1, updated_at = $2, worker_id = COALESCE($3, worker_id), \
             response = $4, error = $5, fallback_used = $6, fallback_reason = $7, \
             queue_wait_ms = COALESCE($8, queue_wait_ms), first_token_ms = $9, total_ms = $10, \
             prompt_tokens = $11, completion_tokens = $12, job = NULL, num_ctx = $14 \
             WHERE task_id = $13 AND status IN ('queued', 'running')",
        )
        .bind(o.status.as_str())
        .bind(o.at)
        .bind(o.worker_id.as_ref().map(WorkerName::as_str))
        .bind(&o.response)
        .bind(&o.error)
        .bind(o.fallback_used)
        .bind(&o.fallback_reason)
        .bind(o.queue_wait_ms)
        .bind(o.first_token_ms)
        .bind(o.total_ms)
        .bind(o.prompt_tokens)
        .bind(o.completion_tokens)
        .bind(id.as_uuid())
        .bind(o.num_ctx)
        .execute(&self.pool)
        .await?;
        Ok(Durable::done(done.rows_affected() == 1))
    }

    async fn cancel(
        &self,
        id: TaskId,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<Durable<bool>, StoreError> {
        let done = sqlx::query(
            "UPDATE tasks SET status = 'cancelled', error = $1, updated_at = $2, job = NULL \
             WHERE task_id = $3 AND (status IN ('queued', 'running') \
             OR (status = 'cancelled' AND error IS NULL))",
        )
        .bind(reason)
        .bind(at)
        .bind(id.as_uuid())
        .execute(&self.pool)
        .await?;
        Ok(Durable::done(done.rows_affected() == 1))
    }

    async fn record_partial(
        &self,
        id: TaskId,
        o: &TaskOutcome,
    ) -> Result<Durable<bool>, StoreError> {
        let done = sqlx::query(
            "UPDATE tasks SET status = 'cancelled', job = NULL, updated_at = $1, \
             worker_id = COALESCE($2, worker_id), \
             response = $3, fallback_used = $4, fallback_reason = $5, \
             queue_wait_ms = COALESCE($6, queue_wait_ms), first_token_ms = $7, total_ms = $8, \
             prompt_tokens = $9, completion_tokens = $10 \
             WHERE task_id = $11 AND status IN ('queued', 'running', 'cancelled')",
        )
        .bind(o.at)
        .bind(o.worker_id.as_ref().map(WorkerName::as_str))
        .bind(&o.response)
        .bind(o.fallback_used)
        .bind(&o.fallback_reason)
        .bind(o.queue_wait_ms)
        .bind(o.first_token_ms)
        .bind(o.total_ms)
        .bind(o.prompt_tokens)
        .bind(o.completion_tokens)
        .bind(id.as_uuid())
        .execute(&self.pool)
        .await?;
        Ok(Durable::done(done.rows_affected() == 1))
    }

    async fn get(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM tasks WHERE task_id = $1"))
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| from_row(&r)).transpose()
    }

    async fn list(&self, f: &TaskFilter) -> Result<Vec<TaskRecord>, StoreError> {
        let (sql, values) = f.list_statement(COLUMNS, |n| format!("${n}"));
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
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM tasks WHERE status IN ('queued', 'running') \
             ORDER BY created_at, task_id"
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
        let (at, id) = after.map_or((None, None), |(at, id)| (Some(at), Some(id.as_uuid())));
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM tasks WHERE status = 'done' \
             AND ($1::timestamptz IS NULL OR created_at > $1 \
                  OR (created_at = $1 AND task_id > $2)) \
             ORDER BY created_at, task_id LIMIT $3"
        ))
        .bind(at)
        .bind(id)
        .bind(i64::from(limit.max(1)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    async fn count(&self, status: TaskStatus) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE status = $1")
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

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

fn from_row(r: &PgRow) -> Result<TaskRecord, StoreError> {
    let id: Uuid = r.try_get("task_id")?;
    let corrupt = |detail: String| StoreError::Corrupt {
        task_id: id.to_string(),
        detail,
    };
    let status: String = r.try_get("status")?;
    let status = TaskStatus::parse(&status).map_err(|e| corrupt(e.to_string()))?;
    let reasons: serde_json::Value = r.try_get("reasons")?;
    let reasons: Vec<String> =
        serde_json::from_value(reasons).map_err(|e| corrupt(format!("reasons: {e}")))?;
    Ok(task_record_from_row!(
        r,
        TaskId::from(id),
        status,
        reasons,
        corrupt
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::InternalTask;

    use crate::testkit::samples::sample_task as new_task;

    /// A store in a fresh schema, or `None` (with a note) when `DATABASE_URL` is unset.
    async fn store() -> Option<(PostgresStore, String)> {
        let Ok(url) = std::env::var("DATABASE_URL") else {
            eprintln!("note: DATABASE_URL is not set; PostgreSQL test skipped");
            return None;
        };
        let schema = format!("test_{}", Uuid::now_v7().simple());
        let store = PostgresStore::connect_with_schema(&url, &schema)
            .await
            .unwrap();
        Some((store, schema))
    }

    use super::super::contract_tests::done;

    #[test]
    fn schema_names_are_checked() {
        assert!(check_schema_name("test_0a9").is_ok());
        assert!(check_schema_name("_x").is_ok());
        for bad in ["", "9x", "Upper", "a-b", "a\"; DROP TABLE tasks; --", "a b"] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
        assert!(check_schema_name(&"a".repeat(64)).is_err());
    }

    #[tokio::test]
    async fn lifecycle_queued_running_done() {
        let Some((s, schema)) = store().await else {
            return;
        };
        let t = super::super::contract_tests::lifecycle(&s).await;
        // The id is a native uuid: a text literal compares to it, as in the psql seed.
        let prompt: String =
            sqlx::query_scalar("SELECT prompt FROM tasks WHERE task_id = $1::text::uuid")
                .bind(t.task_id.to_string())
                .fetch_one(s.pool())
                .await
                .unwrap();
        assert_eq!(prompt, "こんにちは");
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn ordered_writes_are_seen_by_later_writes_and_reads() {
        let Some((s, schema)) = store().await else {
            return;
        };
        super::super::contract_tests::ordered_writes(&s).await;
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn a_task_can_be_inserted_already_claimed() {
        let Some((s, schema)) = store().await else {
            return;
        };
        super::super::contract_tests::inserted_claimed(&s, false).await;
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn finished_tasks_are_paged_oldest_first() {
        let Some((s, schema)) = store().await else {
            return;
        };
        super::super::contract_tests::done_pages(&s).await;
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn a_cancelled_task_keeps_its_reason_and_gets_its_partial_answer() {
        let Some((s, schema)) = store().await else {
            return;
        };
        super::super::contract_tests::cancelled(&s).await;
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn every_task_keeps_its_person() {
        let Some((s, schema)) = store().await else {
            return;
        };
        super::super::contract_tests::people(&s).await;
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn every_task_keeps_its_priority() {
        let Some((s, schema)) = store().await else {
            return;
        };
        super::super::contract_tests::priorities(&s).await;
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn racing_workers_finish_a_task_once() {
        let Some((s, schema)) = store().await else {
            return;
        };
        let t = new_task("race");
        s.insert(t.clone()).await.unwrap().await.unwrap();
        let (a, b) = (
            WorkerName::parse("a").unwrap(),
            WorkerName::parse("b").unwrap(),
        );
        // Both saw the same job (at-least-once delivery): both may claim while it runs...
        assert_eq!(
            s.claim(t.task_id, &a, Utc::now()).await.unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            s.claim(t.task_id, &b, Utc::now()).await.unwrap(),
            Claim::Claimed
        );
        // ...but exactly one finish wins.
        let (from_a, from_b) = (done("from a"), done("from b"));
        let (x, y) = tokio::join!(s.finish(t.task_id, &from_a), s.finish(t.task_id, &from_b));
        let (x, y) = (x.unwrap().await, y.unwrap().await);
        assert_eq!([x.unwrap(), y.unwrap()].iter().filter(|w| **w).count(), 1);
        let got = s.get(t.task_id).await.unwrap().unwrap();
        assert_eq!(got.status, TaskStatus::Done);
        assert_eq!(got.attempts, 2);
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn requeue_keeps_the_new_job_until_the_end() {
        let Some((s, schema)) = store().await else {
            return;
        };
        let t = new_task("retry me");
        s.insert(t.clone()).await.unwrap().await.unwrap();
        let w = WorkerName::parse("w").unwrap();
        s.claim(t.task_id, &w, Utc::now()).await.unwrap();
        s.requeue(t.task_id, "{\"attempt\":1}", Utc::now())
            .await
            .unwrap();
        let got = s.get(t.task_id).await.unwrap().unwrap();
        assert_eq!(got.status, TaskStatus::Queued);
        assert_eq!(got.job.as_deref(), Some("{\"attempt\":1}"));
        assert!(
            s.finish(t.task_id, &TaskOutcome::failed(Utc::now(), "boom"))
                .await
                .unwrap()
                .await
                .unwrap()
        );
        // A finished task is not put back.
        s.requeue(t.task_id, "{}", Utc::now()).await.unwrap();
        let got = s.get(t.task_id).await.unwrap().unwrap();
        assert_eq!(got.status, TaskStatus::Failed);
        assert_eq!(got.error.as_deref(), Some("boom"));
        assert_eq!(got.job, None);
        s.drop_schema(&schema).await.unwrap();
    }

    #[tokio::test]
    async fn list_filters_and_unfinished() {
        let Some((s, schema)) = store().await else {
            return;
        };
        let a = new_task("a");
        let mut b = new_task("b");
        b.internal_task = Some(InternalTask::TitleGeneration);
        b.status = TaskStatus::Done;
        b.response = Some("{\"title\":\"x\"}".into());
        b.created_at = a.created_at + chrono::Duration::milliseconds(5);
        let mut c = new_task("c");
        c.thread_id = ThreadId::parse("t2").unwrap();
        c.created_at = a.created_at + chrono::Duration::milliseconds(10);
        c.web_search = true;
        c.reasons = vec![];
        for t in [&a, &b, &c] {
            s.insert(t.clone()).await.unwrap().await.unwrap();
        }
        let list = |f: TaskFilter| {
            let s = s.clone();
            async move { s.list(&f).await.unwrap() }
        };
        let all = list(TaskFilter {
            limit: 10,
            ..Default::default()
        })
        .await;
        let ids: Vec<_> = all.iter().map(|r| r.task_id).collect();
        assert_eq!(ids, vec![c.task_id, b.task_id, a.task_id], "newest first");
        assert!(all[0].web_search);
        assert!(all[0].reasons.is_empty());
        let limited = list(TaskFilter {
            limit: 1,
            ..Default::default()
        })
        .await;
        assert_eq!(limited.len(), 1);
        assert_eq!(limited[0].task_id, c.task_id);
        let internal = list(TaskFilter {
            limit: 10,
            internal_only: true,
            ..Default::default()
        })
        .await;
        assert_eq!(internal.len(), 1);
        assert_eq!(
            internal[0].internal_task.map(InternalTask::as_str),
            Some("title_generation")
        );
        let queued = list(TaskFilter {
            limit: 10,
            status: Some(TaskStatus::Queued),
            ..Default::default()
        })
        .await;
        assert_eq!(queued.len(), 2);
        assert!(queued.iter().all(|r| r.status == TaskStatus::Queued));
        let thread = list(TaskFilter {
            limit: 10,
            thread_id: Some(ThreadId::parse("t2").unwrap()),
            ..Default::default()
        })
        .await;
        assert_eq!(thread.len(), 1);
        assert_eq!(thread[0].task_id, c.task_id);
        let both = list(TaskFilter {
            limit: 10,
            status: Some(TaskStatus::Queued),
            thread_id: Some(ThreadId::parse("t1").unwrap()),
            ..Default::default()
        })
        .await;
        assert_eq!(both.len(), 1);
        assert_eq!(both[0].task_id, a.task_id);
        let unfinished = s.unfinished().await.unwrap();
        let ids: Vec<_> = unfinished.iter().map(|r| r.task_id).collect();
        assert_eq!(ids, vec![a.task_id, c.task_id], "oldest first");
        assert_eq!(unfinished[0].job.as_deref(), Some("{}"));
        s.ping().await.unwrap();
        s.drop_schema(&schema).await.unwrap();
    }
}
