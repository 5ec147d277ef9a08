//! Documents in PostgreSQL (cluster mode): every process sees the same collections. The
//! full-text terms (already split by `docs::terms`) are stored as a tsvector built with
//! `array_to_tsvector`, so no text-search parser or locale changes them, and searched
//! through a GIN index.

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};

use super::{
    ChunkVector, DocStore, DocumentInfo, NewDocument, StoredChunk, corrupt, metadata_json,
    parse_collection, parse_metadata,
};
use crate::docs::Collection;
use crate::memory::store::{decode_vector, encode_vector};
use crate::store::StoreError;

#[derive(Debug, Clone)]
pub struct PostgresDocStore {
    pool: PgPool,
}

impl PostgresDocStore {
    /// Uses a pool on a database the task store's migrations have been applied to.
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }
}

async fn bump(tx: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    sqlx::query("UPDATE doc_generation SET n = n + 1 WHERE id = 1")
        .execute(&mut *tx)
        .await?;
    Ok(())
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[async_trait]
impl DocStore for PostgresDocStore {
    async fn documents(
        &self,
        collection: Option<&Collection>,
    ) -> Result<Vec<DocumentInfo>, StoreError> {
        let rows = sqlx::query(
            "SELECT collection, path, display, title, metadata, hash, chunks, ingested_at \
             FROM doc_documents WHERE ($1::text IS NULL OR collection = $1) ORDER BY collection, path",
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
        sqlx::query("DELETE FROM doc_chunks WHERE collection = $1 AND path = $2")
            .bind(collection)
            .bind(&doc.path)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO doc_documents (collection, path, display, title, metadata, hash, chunks, ingested_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (collection, path) DO UPDATE SET \
             display = $3, title = $4, metadata = $5, hash = $6, chunks = $7, ingested_at = $8",
        )
        .bind(collection)
        .bind(&doc.path)
        .bind(&doc.display)
        .bind(&doc.title)
        .bind(metadata_json(&doc.metadata))
        .bind(&doc.hash)
        .bind(to_i32(doc.chunks.len()))
        .bind(doc.ingested_at)
        .execute(&mut *tx)
        .await?;
        for (ordinal, chunk) in doc.chunks.iter().enumerate() {
            sqlx::query(
                "INSERT INTO doc_chunks (collection, path, ordinal, heading, text, embedder, dim, vector, terms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, array_to_tsvector($9::text[]))",
            )
            .bind(collection)
            .bind(&doc.path)
            .bind(to_i32(ordinal))
            .bind(&chunk.heading)
            .bind(&chunk.text)
            .bind(&chunk.embedder)
            .bind(to_i32(chunk.vector.len()))
            .bind(encode_vector(&chunk.vector))
            .bind(&chunk.terms)
            .execute(&mut *tx)
            .await?;
        }
        bump(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn forget(&self, collection: &Collection, path: Option<&str>) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "DELETE FROM doc_chunks WHERE collection = $1 AND ($2::text IS NULL OR path = $2)",
        )
        .bind(collection.as_str())
        .bind(path)
        .execute(&mut *tx)
        .await?;
        let gone = sqlx::query(
            "DELETE FROM doc_documents WHERE collection = $1 AND ($2::text IS NULL OR path = $2)",
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
        // Lexemes as given: `array_to_tsvector` on the stored side, an OR of quoted
        // literals here (terms hold only letters and digits).
        let query = terms
            .iter()
            .map(|t| format!("'{}'", t.replace(['\'', '\\'], "")))
            .collect::<Vec<_>>()
            .join(" | ");
        let ids = sqlx::query_scalar(
            "SELECT id FROM doc_chunks WHERE terms @@ $1::tsquery \
             AND ($2::text IS NULL OR collection = $2) \
             ORDER BY ts_rank(terms, $1::tsquery) DESC, id LIMIT $3",
        )
        .bind(query)
        .bind(collection.map(Collection::as_str))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(ids)
    }

    async fn vectors(&self, embedder: &str) -> Result<Vec<ChunkVector>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, collection, dim, vector FROM doc_chunks WHERE embedder = $1 ORDER BY id",
        )
        .bind(embedder)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let id: i64 = row.try_get("id")?;
                let dim: i32 = row.try_get("dim")?;
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
        let rows = sqlx::query(
            "SELECT c.id, c.collection, c.path, d.display, c.heading, c.text FROM doc_chunks c \
             JOIN doc_documents d ON d.collection = c.collection AND d.path = c.path \
             WHERE c.id = ANY($1)",
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

fn document(row: &PgRow) -> Result<DocumentInfo, StoreError> {
    let chunks: i32 = row.try_get("chunks")?;
    Ok(DocumentInfo {
        collection: parse_collection(row.try_get("collection")?)?,
        path: row.try_get("path")?,
        display: row.try_get("display")?,
        title: row.try_get("title")?,
        metadata: parse_metadata(row.try_get("metadata")?)?,
        hash: row.try_get("hash")?,
        chunks: u32::try_from(chunks).unwrap_or(0),
        ingested_at: row.try_get("ingested_at")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::postgres::PostgresStore;

    #[tokio::test]
    async fn contract() {
        let Ok(url) = std::env::var("DATABASE_URL") else {
            eprintln!("note: DATABASE_URL is not set; PostgreSQL test skipped");
            return;
        };
        let schema = format!("test_{}", uuid::Uuid::now_v7().simple());
        let tasks = PostgresStore::connect_with_schema(&url, &schema)
            .await
            .unwrap();
        let s = PostgresDocStore::new(tasks.pool().clone());
        super::super::contract_tests::documents(&s).await;
        tasks.drop_schema(&schema).await.unwrap();
    }
}
