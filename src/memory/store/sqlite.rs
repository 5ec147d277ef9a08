//! `memory_items` in the SQLite task database (embedded mode).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};
use uuid::Uuid;

use super::{
    Batches, MemoryItem, MemoryStore, PEOPLE, corrupt, decode_vector, encode_vector, in_batches,
    limit, people_named,
};
use crate::domain::{Person, TaskId};
use crate::store::StoreError;

const COLUMNS: &str =
    "id, person, thread_id, task_id, seq, kind, text, subject, embedder, dim, vector, created_at";

#[derive(Debug, Clone)]
pub struct SqliteMemoryStore {
    pool: SqlitePool,
}

impl SqliteMemoryStore {
    /// Uses a pool on a database the task store's migrations have been applied to.
    pub fn new(pool: SqlitePool) -> Self {
        Self { pool }
    }
}

#[async_trait]
impl MemoryStore for SqliteMemoryStore {
    async fn insert(&self, items: &[MemoryItem]) -> Result<Vec<Uuid>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let mut written = Vec::new();
        for item in items {
            let done = sqlx::query(
                "INSERT INTO memory_items (id, person, thread_id, task_id, seq, kind, text, subject, \
                 embedder, dim, vector, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (task_id, embedder, seq) DO NOTHING",
            )
            .bind(item.id.to_string())
            .bind(item.person.as_str())
            .bind(&item.thread_id)
            .bind(item.task_id.to_string())
            .bind(i64::from(item.seq))
            .bind(item.kind.as_str())
            .bind(&item.text)
            .bind(item.subject.as_deref())
            .bind(&item.embedder)
            .bind(i64::try_from(item.vector.len()).unwrap_or(i64::MAX))
            .bind(encode_vector(&item.vector))
            .bind(item.created_at)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 1 {
                written.push(item.id);
            }
        }
        tx.commit().await?;
        Ok(written)
    }

    async fn load(&self, since: Option<DateTime<Utc>>) -> Result<Vec<MemoryItem>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM memory_items WHERE (?1 IS NULL OR created_at >= ?1) ORDER BY created_at, id"
        ))
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    async fn load_person(&self, person: &Person, each: &mut Batches<'_>) -> Result<(), StoreError> {
        let query =
            format!("SELECT {COLUMNS} FROM memory_items WHERE person = ? ORDER BY created_at, id");
        let rows = sqlx::query(&query).bind(person.as_str()).fetch(&self.pool);
        in_batches(rows.map(|row| from_row(&row?)), each).await
    }

    async fn load_thread(
        &self,
        person: &Person,
        thread_id: &str,
        each: &mut Batches<'_>,
    ) -> Result<(), StoreError> {
        // The thread's index, not the person's: a person holds thousands of items, a
        // thread a few dozen.
        let query = format!(
            "SELECT {COLUMNS} FROM memory_items INDEXED BY memory_items_thread_created \
             WHERE thread_id = ? AND person = ? ORDER BY created_at, id"
        );
        let rows = sqlx::query(&query)
            .bind(thread_id)
            .bind(person.as_str())
            .fetch(&self.pool);
        in_batches(rows.map(|row| from_row(&row?)), each).await
    }

    async fn newest_fact(
        &self,
        person: &Person,
        subject: &str,
        embedder: &str,
    ) -> Result<Option<MemoryItem>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM memory_items WHERE person = ?1 AND kind = 'fact' \
             AND subject = ?2 AND embedder = ?3 ORDER BY created_at DESC, id DESC LIMIT 1"
        ))
        .bind(person.as_str())
        .bind(subject)
        .bind(embedder)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    async fn people(&self) -> Result<Vec<(Person, u64)>, StoreError> {
        people_named(sqlx::query_as(PEOPLE).fetch_all(&self.pool).await?)
    }

    async fn list(
        &self,
        person: Option<&Person>,
        thread_id: Option<&str>,
        max: u32,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM memory_items WHERE (?1 IS NULL OR thread_id = ?1) \
             AND (?3 IS NULL OR person = ?3) ORDER BY created_at DESC, id DESC LIMIT ?2"
        ))
        .bind(thread_id)
        .bind(limit(max))
        .bind(person.map(Person::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    async fn task_seqs(&self, task_id: TaskId, embedder: &str) -> Result<Vec<u32>, StoreError> {
        let rows: Vec<i64> = sqlx::query_scalar(
            "SELECT seq FROM memory_items WHERE task_id = ? AND embedder = ? ORDER BY seq",
        )
        .bind(task_id.to_string())
        .bind(embedder)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|s| u32::try_from(s).ok())
            .collect())
    }

    async fn delete(
        &self,
        id: Uuid,
        person: Option<&Person>,
    ) -> Result<Option<MemoryItem>, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE tasks SET remember = 0 WHERE task_id = \
             (SELECT task_id FROM memory_items WHERE id = ?1 AND (?2 IS NULL OR person = ?2))",
        )
        .bind(id.to_string())
        .bind(person.map(Person::as_str))
        .execute(&mut *tx)
        .await?;
        let gone = sqlx::query(&format!(
            "DELETE FROM memory_items WHERE id = ?1 AND (?2 IS NULL OR person = ?2) \
             RETURNING {COLUMNS}"
        ))
        .bind(id.to_string())
        .bind(person.map(Person::as_str))
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        gone.as_ref().map(from_row).transpose()
    }

    async fn delete_thread(
        &self,
        person: Option<&Person>,
        thread_id: &str,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE tasks SET remember = 0 WHERE thread_id = ?1 AND (?2 IS NULL OR person = ?2)",
        )
        .bind(thread_id)
        .bind(person.map(Person::as_str))
        .execute(&mut *tx)
        .await?;
        let rows = sqlx::query(&format!(
            "DELETE FROM memory_items WHERE thread_id = ?1 AND (?2 IS NULL OR person = ?2) \
             RETURNING {COLUMNS}"
        ))
        .bind(thread_id)
        .bind(person.map(Person::as_str))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.iter().map(from_row).collect()
    }
}

fn from_row(r: &SqliteRow) -> Result<MemoryItem, StoreError> {
    let id: String = r.try_get("id")?;
    let task: String = r.try_get("task_id")?;
    let dim: i64 = r.try_get("dim")?;
    let seq: i64 = r.try_get("seq")?;
    let bytes: Vec<u8> = r.try_get("vector")?;
    let vector = usize::try_from(dim)
        .ok()
        .and_then(|d| decode_vector(&bytes, d))
        .ok_or_else(|| {
            corrupt(
                &id,
                format!("vector of {} bytes for dim {dim}", bytes.len()),
            )
        })?;
    Ok(MemoryItem {
        id: Uuid::parse_str(&id).map_err(|e| corrupt(&id, e.to_string()))?,
        person: {
            let v: String = r.try_get("person")?;
            Person::parse(&v).map_err(|e| corrupt(&id, e.to_string()))?
        },
        thread_id: r.try_get("thread_id")?,
        task_id: TaskId::parse(&task).map_err(|e| corrupt(&id, e.to_string()))?,
        seq: u32::try_from(seq).map_err(|e| corrupt(&id, e.to_string()))?,
        kind: {
            let v: String = r.try_get("kind")?;
            v.parse().map_err(|e: String| corrupt(&id, e))?
        },
        text: r.try_get("text")?,
        subject: r.try_get("subject")?,
        superseded_by: None,
        embedder: r.try_get("embedder")?,
        vector,
        created_at: r.try_get("created_at")?,
    })
}
