//! What placement learned of each machine, kept across restarts: its rates per model and
//! how many models it keeps resident. A machine's speed does not change when Coordinator
//! restarts; without this, every start would place its first tasks on guesses (the
//! slowest turns of a day are those after a start).
//!
//! One row per worker in the task database (`machine_learned`), written by the process
//! that runs that worker, at most every [`SAVE_EVERY`] while it learns, and read back when
//! the process starts.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::backend::perf::ModelPerf;
use crate::config::StoreConfig;
use crate::domain::{ModelName, WorkerName};
use crate::store::StoreError;

/// How often, at most, a worker writes what it learned.
pub const SAVE_EVERY: Duration = Duration::from_secs(30);

/// One machine's learned figures, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    #[serde(default)]
    pub perf: Vec<ModelPerf>,
    /// Learned from a load that evicted a model (a configured value is not stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_loaded: Option<usize>,
    /// Models loaded here with more than Ollama's default window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wide: Vec<ModelName>,
}

#[async_trait]
pub trait LearnedStore: Send + Sync + std::fmt::Debug + 'static {
    /// What was learned of `worker`, if anything was kept.
    async fn load(&self, worker: &WorkerName) -> Result<Option<Learned>, StoreError>;

    /// Keeps what was learned of `worker`, replacing what was kept.
    async fn save(
        &self,
        worker: &WorkerName,
        learned: &Learned,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
}

fn decode(worker: &WorkerName, text: &str) -> Result<Learned, StoreError> {
    // Named as the memory store names its rows: by what the row is of.
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        task_id: format!("machine_learned/{worker}"),
        detail: e.to_string(),
    })
}

fn encode(learned: &Learned) -> String {
    // Plain data (numbers, names): it always serializes.
    serde_json::to_string(learned).unwrap_or_else(|_| "{}".to_owned())
}

/// `machine_learned` in SQLite.
#[derive(Debug)]
pub struct SqliteLearned(pub sqlx::SqlitePool);

#[async_trait]
impl LearnedStore for SqliteLearned {
    async fn load(&self, worker: &WorkerName) -> Result<Option<Learned>, StoreError> {
        let row = sqlx::query("SELECT learned FROM machine_learned WHERE worker = ?")
            .bind(worker.as_str())
            .fetch_optional(&self.0)
            .await?;
        row.map(|r| decode(worker, &r.get::<String, _>(0)))
            .transpose()
    }

    async fn save(
        &self,
        worker: &WorkerName,
        learned: &Learned,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO machine_learned (worker, learned, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT (worker) DO UPDATE SET learned = excluded.learned, updated_at = excluded.updated_at",
        )
        .bind(worker.as_str())
        .bind(encode(learned))
        .bind(at)
        .execute(&self.0)
        .await?;
        Ok(())
    }
}

/// `machine_learned` in PostgreSQL.
#[derive(Debug)]
pub struct PostgresLearned(pub sqlx::PgPool);

#[async_trait]
impl LearnedStore for PostgresLearned {
    async fn load(&self, worker: &WorkerName) -> Result<Option<Learned>, StoreError> {
        let row = sqlx::query("SELECT learned FROM machine_learned WHERE worker = $1")
            .bind(worker.as_str())
            .fetch_optional(&self.0)
            .await?;
        row.map(|r| decode(worker, &r.get::<String, _>(0)))
            .transpose()
    }

    async fn save(
        &self,
        worker: &WorkerName,
        learned: &Learned,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO machine_learned (worker, learned, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (worker) DO UPDATE SET learned = excluded.learned, updated_at = excluded.updated_at",
        )
        .bind(worker.as_str())
        .bind(encode(learned))
        .bind(at)
        .execute(&self.0)
        .await?;
        Ok(())
    }
}

/// Gives every backend of `registry` back what was learned of it before, and the store to
/// keep what it learns. Nothing here stops a start: a store that cannot be read leaves
/// placement to learn again.
pub async fn restore(registry: &crate::backend::Registry, config: &StoreConfig) {
    let store = match open(config).await {
        Ok(store) => store,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read what placement learned of the machines; learning again");
            return;
        }
    };
    for handle in registry.handles() {
        let learned = match store.load(handle.name()).await {
            Ok(learned) => learned,
            Err(e) => {
                tracing::warn!(backend = %handle.name(), error = %e, "cannot read what placement learned of this machine; learning again");
                None
            }
        };
        if let Some(l) = &learned {
            tracing::info!(backend = %handle.name(), models = l.perf.len(), max_loaded = ?l.max_loaded, "placement knows this machine from before");
        }
        handle.restore_learned(learned, store.clone());
    }
}

/// Opens the learned figures in the database `[store]` names (applying the migrations).
pub async fn open(config: &StoreConfig) -> Result<Arc<dyn LearnedStore>, StoreError> {
    Ok(match crate::store::Database::open(config).await? {
        crate::store::Database::Sqlite(pool) => Arc::new(SqliteLearned(pool)),
        crate::store::Database::Postgres(pool) => Arc::new(PostgresLearned(pool)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned() -> Learned {
        let mut p = ModelPerf::new(ModelName::parse("qwen2.5:7b").unwrap());
        p.load_s = Some(3.0);
        p.eval_tps = Some(80.0);
        p.samples = 4;
        Learned {
            perf: vec![p],
            max_loaded: Some(2),
            wide: vec![ModelName::parse("qwen2.5:7b").unwrap()],
        }
    }

    async fn round_trip(store: &dyn LearnedStore) {
        let moon = WorkerName::parse("moon").unwrap();
        let laptop = WorkerName::parse("laptop").unwrap();
        assert_eq!(store.load(&moon).await.unwrap(), None);
        store.save(&moon, &learned(), Utc::now()).await.unwrap();
        assert_eq!(store.load(&moon).await.unwrap(), Some(learned()));
        assert_eq!(store.load(&laptop).await.unwrap(), None);
        // A later save replaces the row.
        let mut newer = learned();
        newer.max_loaded = None;
        store.save(&moon, &newer, Utc::now()).await.unwrap();
        assert_eq!(store.load(&moon).await.unwrap(), Some(newer));
    }

    #[tokio::test]
    async fn what_was_learned_of_a_machine_reads_back_from_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&StoreConfig::Sqlite {
            path: dir.path().join("t.db"),
            synchronous: Default::default(),
        })
        .await
        .unwrap();
        round_trip(store.as_ref()).await;
    }

    #[tokio::test]
    async fn what_was_learned_of_a_machine_reads_back_from_postgres() {
        let Ok(url) = std::env::var("DATABASE_URL") else {
            eprintln!("note: DATABASE_URL is not set; PostgreSQL test skipped");
            return;
        };
        let schema = format!("test_{}", uuid::Uuid::now_v7().simple());
        let tasks = crate::store::postgres::PostgresStore::connect_with_schema(&url, &schema)
            .await
            .unwrap();
        round_trip(&PostgresLearned(tasks.pool().clone())).await;
        tasks.drop_schema(&schema).await.unwrap();
    }
}
