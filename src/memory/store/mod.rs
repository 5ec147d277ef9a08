//! Where memory items are kept: the `memory_items` table of the task store's database
//! (SQLite in embedded mode, PostgreSQL in cluster mode), the source of truth that every
//! process loads its in-memory index from.
//!
//! Items are unique per (task, embedder, seq), so writing the same task twice (the
//! producer and a backfill, or two backfills) adds nothing. Forgetting an item also marks
//! its task `remember = false`, so that a later backfill cannot bring it back.

pub mod in_memory;
pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::config::StoreConfig;
use crate::domain::{Person, TaskId};
use crate::store::StoreError;

/// One remembered piece of an exchange.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryItem {
    pub id: Uuid,
    /// Whose memory it is: recalled, listed and forgotten only for them (or an admin).
    pub person: Person,
    pub thread_id: String,
    pub task_id: TaskId,
    /// Position among the items condensed from one task (0 = the exchange itself).
    pub seq: u32,
    pub kind: ItemKind,
    pub text: String,
    /// For a fact about a single-valued subject (`home`, `router`, `猫の名前`): that
    /// subject. The person's newest fact on a subject supersedes the older ones.
    pub subject: Option<String>,
    /// The newer fact that supersedes this one: derived from the person's facts when
    /// listed or searched, never stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<Uuid>,
    /// The embedder that made `vector`.
    pub embedder: String,
    #[serde(skip)]
    pub vector: Vec<f32>,
    pub created_at: DateTime<Utc>,
}

/// What a memory item holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    /// The prompt and the start of the answer: context for its own thread.
    Exchange,
    /// A later part of a long answer: context for its own thread.
    Answer,
    /// A statement the person made (see `memory::facts`): recalled in every thread.
    Fact,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exchange => "exchange",
            Self::Answer => "answer",
            Self::Fact => "fact",
        }
    }
}

impl std::fmt::Display for ItemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ItemKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "exchange" => Ok(Self::Exchange),
            "answer" => Ok(Self::Answer),
            "fact" => Ok(Self::Fact),
            other => Err(format!("unknown memory item kind {other:?}")),
        }
    }
}

#[async_trait]
pub trait MemoryStore: Send + Sync + 'static {
    /// Writes items, skipping any whose (task, embedder, seq) is already stored. Returns
    /// the ids of the items actually written.
    async fn insert(&self, items: &[MemoryItem]) -> Result<Vec<Uuid>, StoreError>;

    /// Every item (to build the in-memory index), or those made at or after `since` (to
    /// bring an index up to date), oldest first.
    async fn load(&self, since: Option<DateTime<Utc>>) -> Result<Vec<MemoryItem>, StoreError>;

    /// Every item of one person, oldest first (to build their in-memory index when they
    /// are first recalled for), handed to `each` in batches of at most [`LOAD_BATCH`] as
    /// they are read: a person's years of memory are never all in flight at once. On an
    /// error, the batches already handed over stay handed over.
    async fn load_person(&self, person: &Person, each: &mut Batches<'_>) -> Result<(), StoreError>;

    /// Every item of one thread of one person, oldest first, handed over as
    /// [`load_person`](Self::load_person) does: what a thread's first turn reads.
    async fn load_thread(
        &self,
        person: &Person,
        thread_id: &str,
        each: &mut Batches<'_>,
    ) -> Result<(), StoreError>;

    /// `person`'s newest fact on `subject` by `embedder`: what becomes current when the
    /// current one is forgotten.
    async fn newest_fact(
        &self,
        person: &Person,
        subject: &str,
        embedder: &str,
    ) -> Result<Option<MemoryItem>, StoreError>;

    /// The people who hold any item, with how many, by name.
    async fn people(&self) -> Result<Vec<(Person, u64)>, StoreError>;

    /// Newest first, of one person or everyone, of one thread or all.
    async fn list(
        &self,
        person: Option<&Person>,
        thread_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<MemoryItem>, StoreError>;

    /// The positions (`seq`) of the items a task already has from `embedder`.
    async fn task_seqs(&self, task_id: TaskId, embedder: &str) -> Result<Vec<u32>, StoreError>;

    /// Deletes one item (when `person` is given, only theirs) and marks its task not to be
    /// remembered again. Returns the item it deleted, if there was one.
    async fn delete(
        &self,
        id: Uuid,
        person: Option<&Person>,
    ) -> Result<Option<MemoryItem>, StoreError>;

    /// Deletes every item of a thread (when `person` is given, only theirs) and marks
    /// those tasks not to be remembered again. Returns the items it deleted.
    async fn delete_thread(
        &self,
        person: Option<&Person>,
        thread_id: &str,
    ) -> Result<Vec<MemoryItem>, StoreError>;
}

/// How many items [`MemoryStore::load_person`] and [`MemoryStore::load_thread`] hand over
/// at once.
pub const LOAD_BATCH: usize = 256;

/// Where [`MemoryStore::load_person`] hands its batches.
pub type Batches<'a> = dyn FnMut(Vec<MemoryItem>) + Send + 'a;

/// Hands `items`, as they come, to `each` in batches of at most [`LOAD_BATCH`].
pub(super) async fn in_batches(
    items: impl futures::Stream<Item = Result<MemoryItem, StoreError>>,
    each: &mut Batches<'_>,
) -> Result<(), StoreError> {
    use futures::TryStreamExt;
    let mut items = std::pin::pin!(items);
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    while let Some(item) = items.try_next().await? {
        batch.push(item);
        if batch.len() == LOAD_BATCH {
            each(std::mem::replace(
                &mut batch,
                Vec::with_capacity(LOAD_BATCH),
            ));
        }
    }
    if !batch.is_empty() {
        each(batch);
    }
    Ok(())
}

/// Opens the memory store in the database `[store]` names (applying the migrations).
pub async fn open(config: &StoreConfig) -> Result<Arc<dyn MemoryStore>, StoreError> {
    Ok(match crate::store::Database::open(config).await? {
        crate::store::Database::Sqlite(pool) => Arc::new(sqlite::SqliteMemoryStore::new(pool)),
        crate::store::Database::Postgres(pool) => {
            Arc::new(postgres::PostgresMemoryStore::new(pool))
        }
    })
}

/// A vector as stored: little-endian f32s.
pub fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Reads a stored vector back; `None` when its length does not match `dim`.
pub fn decode_vector(bytes: &[u8], dim: usize) -> Option<Vec<f32>> {
    if bytes.len() != dim.checked_mul(4)? {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

fn corrupt(id: &str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        task_id: format!("memory item {id}"),
        detail: detail.into(),
    }
}

/// Who holds any item, and how many (the same in both databases; the index on
/// `(person, created_at)` covers it).
const PEOPLE: &str = "SELECT person, count(*) FROM memory_items GROUP BY person ORDER BY person";

/// The people of stored names, with their counts.
fn people_named(rows: Vec<(String, i64)>) -> Result<Vec<(Person, u64)>, StoreError> {
    rows.into_iter()
        .map(|(n, count)| {
            let person = Person::parse(&n).map_err(|e| corrupt(&n, e.to_string()))?;
            Ok((person, u64::try_from(count).unwrap_or_default()))
        })
        .collect()
}

/// The largest `LIMIT` a listing asks for.
fn limit(limit: u32) -> i64 {
    i64::from(limit.clamp(1, 10_000))
}
