//! Where documents are kept: `doc_documents` and `doc_chunks` in the task store's database
//! (SQLite with an FTS5 index in embedded mode, PostgreSQL with a GIN-indexed tsvector in
//! cluster mode, where every process sees the same collections).
//!
//! A document is replaced as a whole in one transaction (its old chunks go, the new ones
//! come), so a search never sees half a file. Every change bumps one generation counter,
//! which tells each process when its in-memory vectors are stale.

pub mod postgres;
pub mod sqlite;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Collection;
use crate::config::StoreConfig;
use crate::store::StoreError;

/// A document to write, with all its chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDocument {
    pub collection: Collection,
    pub path: String,
    pub display: String,
    pub title: String,
    pub metadata: BTreeMap<String, String>,
    pub hash: String,
    pub chunks: Vec<NewChunk>,
    pub ingested_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewChunk {
    pub heading: String,
    pub text: String,
    pub embedder: String,
    pub vector: Vec<f32>,
    /// The full-text terms ([`super::terms::terms`]).
    pub terms: Vec<String>,
}

/// A stored document, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DocumentInfo {
    pub collection: Collection,
    pub path: String,
    pub display: String,
    pub title: String,
    pub metadata: BTreeMap<String, String>,
    pub hash: String,
    pub chunks: u32,
    pub ingested_at: DateTime<Utc>,
}

/// A stored chunk, as retrieved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredChunk {
    pub id: i64,
    pub collection: Collection,
    pub path: String,
    pub display: String,
    pub heading: String,
    pub text: String,
}

/// One chunk's vector, for the in-memory index.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVector {
    pub id: i64,
    pub collection: Collection,
    pub vector: Vec<f32>,
}

#[async_trait]
pub trait DocStore: Send + Sync {
    /// Every document of `collection` (of all collections when `None`), by collection
    /// and path.
    async fn documents(
        &self,
        collection: Option<&Collection>,
    ) -> Result<Vec<DocumentInfo>, StoreError>;

    /// The collections that hold at least one document, by name.
    async fn collections(&self) -> Result<Vec<Collection>, StoreError>;

    /// Writes `doc`, replacing the document of the same collection and path if any.
    async fn put(&self, doc: &NewDocument) -> Result<(), StoreError>;

    /// Drops one document (`path`) or a whole collection (`None`); returns how many
    /// documents went.
    async fn forget(&self, collection: &Collection, path: Option<&str>) -> Result<u64, StoreError>;

    /// The ids of the chunks that match any of `terms`, best first, at most `limit`.
    async fn text_search(
        &self,
        collection: Option<&Collection>,
        terms: &[String],
        limit: u32,
    ) -> Result<Vec<i64>, StoreError>;

    /// Every chunk's vector made by `embedder`.
    async fn vectors(&self, embedder: &str) -> Result<Vec<ChunkVector>, StoreError>;

    /// The chunks with these ids, in any order (missing ones are left out).
    async fn chunks(&self, ids: &[i64]) -> Result<Vec<StoredChunk>, StoreError>;

    /// A number that changes with every write.
    async fn generation(&self) -> Result<i64, StoreError>;
}

/// Opens the document store in the database `[store]` names (applying the migrations).
pub async fn open(config: &StoreConfig) -> Result<Arc<dyn DocStore>, StoreError> {
    Ok(match crate::store::Database::open(config).await? {
        crate::store::Database::Sqlite(pool) => Arc::new(sqlite::SqliteDocStore::new(pool)),
        crate::store::Database::Postgres(pool) => Arc::new(postgres::PostgresDocStore::new(pool)),
    })
}

fn corrupt(what: &str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        task_id: what.to_owned(),
        detail: detail.into(),
    }
}

fn parse_collection(s: &str) -> Result<Collection, StoreError> {
    Collection::parse(s).map_err(|e| corrupt("document", e.to_string()))
}

fn parse_metadata(s: &str) -> Result<BTreeMap<String, String>, StoreError> {
    serde_json::from_str(s).map_err(|e| corrupt("document metadata", e.to_string()))
}

fn metadata_json(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".to_owned())
}

#[cfg(test)]
pub(crate) mod contract_tests;
