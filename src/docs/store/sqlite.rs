//! Documents in the SQLite task database (embedded mode), with an FTS5 index over the
//! chunks' terms.

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};

use super::{
    ChunkVector, DocStore, DocumentInfo, NewDocument, StoredChunk, corrupt, metadata_json,
    parse_collection, parse_metadata,
};
use crate::docs::Collection;
use crate::memory::store::{decode_vector, encode_vector};
use crate::store::StoreError;

#[derive(Debug, Clone)]
pub struct SqliteDocStore {
    pool: SqlitePool,
}

impl SqliteDocStore {
    /// Uses a pool on a database the task store's migrations have been applied to.
    pub fn new(pool: SqlitePool) -> Self {
        Self { pool }
    }
}

async fn drop_chunks(
    tx: &mut sqlx::SqliteConnection,
    collection: &str,
    path: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM doc_chunks_fts WHERE rowid IN \
         (SELECT id FROM doc_chunks WHERE collection = ?1 AND (?2 IS NULL OR path = ?2))",
    )
    .bind(collection)
    .bind(path)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM doc_chunks WHERE collection = ?1 AND (?2 IS NULL OR path = ?2)")
        .bind(collection)
        .bind(path)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

async fn bump(tx: &mut sqlx::SqliteConnection) -> Result<(), StoreError> {
    sqlx::query("UPDATE doc_generation SET n = n + 1 WHERE id = 1")
        .execute(&mut *tx)
        .await?;
    Ok(())
}

#[async_trait]
impl DocStore for SqliteDocStore {
    async fn documents(
        &self,
        collection: Option<&Collection>,
    ) -> Result<Vec<DocumentInfo>, StoreError> {
        let rows = sqlx::query(
            "SELECT collection, path, display, title, metadata, hash, chunks, ingested_at \
             FROM doc_documents WHERE (?1 IS NULL OR collection = ?1) ORDER BY collection, path",
        )
        .bind(collection.map(Collection::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(document).collect()
    }

    async fn collections(&self) -> Result<Vec<Collection>, StoreError> {
        let names: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT collection FROM doc_documents ORDER BY collection")
                .fetch_all(&self.pool)
                .await?;
        names.iter().map(|n| parse_collection(n)).collect()
    }

    async fn put(&self, doc: &NewDocument) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let collection = doc.collection.as_str();
        drop_chunks(&mut tx, collection, Some(&doc.path)).await?;
        sqlx::query(
            "INSERT INTO doc_documents (collection, path, display, title, metadata, hash, chunks, ingested_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (collection, path) DO UPDATE SET \
             display = ?3, title = ?4, metadata = ?5, hash = ?6, chunks = ?7, ingested_at = ?8",
        )
        .bind(collection)
        .bind(&doc.path)
        .bind(&doc.display)
        .bind(&doc.title)
        .bind(metadata_json(&doc.metadata))
        .bind(&doc.hash)
        .bind(i64::try_from(doc.chunks.len()).unwrap_or(i64::MAX))
        .bind(doc.ingested_at)
        .execute(&mut *tx)
        .await?;
        for (ordinal, chunk) in doc.chunks.iter().enumerate() {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO doc_chunks (collection, path, ordinal, heading, text, embedder, dim, vector) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            )
            .bind(collection)
            .bind(&doc.path)
            .bind(i64::try_from(ordinal).unwrap_or(i64::MAX))
            .bind(&chunk.heading)
            .bind(&chunk.text)
            .bind(&chunk.embedder)
            .bind(i64::try_from(chunk.vector.len()).unwrap_or(i64::MAX))
            .bind(encode_vector(&chunk.vector))
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query("INSERT INTO doc_chunks_fts (rowid, terms, collection) VALUES (?, ?, ?)")
                .bind(id)
                .bind(chunk.terms.join(" "))
                .bind(collection)
                .execute(&mut *tx)
                .await?;
        }
        bump(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn forget(&self, collection: &Collection, path: Option<&str>) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        drop_chunks(&mut tx, collection.as_str(), path).await?;
        let gone = sqlx::query(
            "DELETE FROM doc_documents WHERE collection = ?1 AND (?2 IS NULL OR path = ?2)",
        )
        .bind(collection.as_str())
        .bind(path)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if gone > 0 {
            bump(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(gone)
    }

    async fn text_search(
        &self,
        collection: Option<&Collection>,
        terms: &[String],
        limit: u32,
    ) -> Result<Vec<i64>, StoreError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Terms hold only letters and digits (`docs::terms`), so quoting each is safe.
        let expression = terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "")))
            .collect::<Vec<_>>()
            .join(" OR ");
        let ids = sqlx::query_scalar(
            "SELECT rowid FROM doc_chunks_fts WHERE doc_chunks_fts MATCH ?1 \
             AND (?2 IS NULL OR collection = ?2) ORDER BY rank LIMIT ?3",
        )
        .bind(expression)
        .bind(collection.map(Collection::as_str))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(ids)
    }

    async fn vectors(&self, embedder: &str) -> Result<Vec<ChunkVector>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, collection, dim, vector FROM doc_chunks WHERE embedder = ? ORDER BY id",
        )
        .bind(embedder)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let id: i64 = row.try_get("id")?;
                let dim: i64 = row.try_get("dim")?;
                let bytes: Vec<u8> = row.try_get("vector")?;
                let vector = decode_vector(&bytes, usize::try_from(dim).unwrap_or(0))
                    .ok_or_else(|| corrupt(&format!("chunk {id}"), "vector length != dim"))?;
                Ok(ChunkVector {
                    id,
                    collection: parse_collection(row.try_get("collection")?)?,
                    vector,
                })
            })
            .collect()
    }

    async fn chunks(&self, ids: &[i64]) -> Result<Vec<StoredChunk>, StoreError> {
        let ids = serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned());
        let rows = sqlx::query(
            "SELECT c.id, c.collection, c.path, d.display, c.heading, c.text FROM doc_chunks c \
             JOIN doc_documents d ON d.collection = c.collection AND d.path = c.path \
             WHERE c.id IN (SELECT value FROM json_each(?))",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(StoredChunk {
                    id: row.try_get("id")?,
                    collection: parse_collection(row.try_get("collection")?)?,
                    path: row.try_get("path")?,
                    display: row.try_get("display")?,
                    heading: row.try_get("heading")?,
                    text: row.try_get("text")?,
                })
            })
            .collect()
    }

    async fn generation(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT n FROM doc_generation WHERE id = 1")
                .fetch_one(&self.pool)
                .await?,
        )
    }
}

fn document(row: &SqliteRow) -> Result<DocumentInfo, StoreError> {
    let chunks: i64 = row.try_get("chunks")?;
    Ok(DocumentInfo {
        collection: parse_collection(row.try_get("collection")?)?,
        path: row.try_get("path")?,
        display: row.try_get("display")?,
        title: row.try_get("title")?,
        metadata: parse_metadata(row.try_get("metadata")?)?,
        hash: row.try_get("hash")?,
        chunks: u32::try_from(chunks).unwrap_or(u32::MAX),
        ingested_at: row.try_get("ingested_at")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (tempfile::TempDir, SqliteDocStore) {
        let dir = tempfile::tempdir().unwrap();
        let tasks = crate::store::sqlite::SqliteStore::open(&dir.path().join("t.db"))
            .await
            .unwrap();
        (dir, SqliteDocStore::new(tasks.pool().clone()))
    }

    #[tokio::test]
    async fn contract() {
        let (_dir, s) = store().await;
        super::super::contract_tests::documents(&s).await;
    }
}
