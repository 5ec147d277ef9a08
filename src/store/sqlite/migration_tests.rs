//! Migration 0005 (the `cancelled` status) rebuilds the `tasks` table: every row, column
//! and index of a database made before it is kept.

use rusqlite::types::Value;

use super::SqliteStore;
use crate::domain::TaskStatus;
use crate::testkit::samples::sample_task;

/// Every row of `tasks` (the columns named, by task id) and the names of its indexes.
fn snapshot(path: &std::path::Path, columns: &[String]) -> (Vec<Vec<Value>>, Vec<String>) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut rows = conn
        .prepare(&format!(
            "SELECT {} FROM tasks ORDER BY task_id",
            columns.join(", ")
        ))
        .unwrap();
    let width = rows.column_count();
    let rows = rows
        .query_map([], |r| (0..width).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<Result<Vec<Vec<Value>>, _>>()
        .unwrap();
    let mut indexes = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL ORDER BY name")
        .unwrap();
    let indexes = indexes
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<Vec<String>, _>>()
        .unwrap();
    (rows, indexes)
}

#[tokio::test]
async fn the_table_rebuild_keeps_every_row_and_index_and_allows_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old-migrations");
    std::fs::create_dir(&old).unwrap();
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    for entry in std::fs::read_dir(&from).unwrap() {
        let name = entry.unwrap().file_name();
        if name.to_string_lossy().as_ref() < "0005" {
            std::fs::copy(from.join(&name), old.join(&name)).unwrap();
        }
    }
    let path = dir.path().join("c.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        drop(conn);
        let url = format!("sqlite://{}", path.display());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        sqlx::migrate::Migrator::new(old.as_path())
            .await
            .unwrap()
            .run(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        for (i, status) in ["queued", "running", "done", "failed"].iter().enumerate() {
            let t = sample_task(&format!("question {i}"));
            conn.execute(
                "INSERT INTO tasks (task_id, created_at, updated_at, thread_id, prompt, domain, \
                 model, worker_id, queue, status, response, error, internal_task, web_search, \
                 fallback_used, fallback_reason, reasons, job, attempts, queue_wait_ms, \
                 first_token_ms, total_ms, prompt_tokens, completion_tokens, remember, person) \
                 VALUES (?1, ?2, ?2, 't1', ?3, 'general', 'm', 'moon', 'tasks:llm:m', ?4, 'an answer', \
                 'an error', 'title_generation', 1, 1, 'no web', '[\"auto\"]', '{}', 2, 3, 4, 5, 6, 7, 0, 'alice')",
                rusqlite::params![t.task_id.to_string(), t.created_at.to_rfc3339(), t.prompt, status],
            )
            .unwrap();
        }
        let refused = conn.execute(
            "UPDATE tasks SET status = 'cancelled' WHERE status = 'queued'",
            [],
        );
        assert!(refused.is_err(), "0001's CHECK refuses 'cancelled'");
    }
    let columns: Vec<String> = {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let stmt = conn.prepare("SELECT * FROM tasks").unwrap();
        stmt.column_names()
            .iter()
            .map(|c| (*c).to_owned())
            .collect()
    };
    let before = snapshot(&path, &columns);
    assert_eq!(before.0.len(), 4);

    // Every migration from 0005 on runs here; later ones may add columns and indexes.
    let store = SqliteStore::open(&path).await.unwrap();
    let after = snapshot(&path, &columns);
    assert_eq!(after.0, before.0, "rows and columns survive the rebuild");
    for index in &before.1 {
        assert!(
            after.1.contains(index),
            "index {index} survives: {:?}",
            after.1
        );
    }
    let mut t = sample_task("stopped");
    t.status = TaskStatus::Cancelled;
    use crate::store::TaskStore;
    store.insert(t.clone()).await.unwrap().await.unwrap();
    let got = store.get(t.task_id).await.unwrap().unwrap();
    assert_eq!(got.status, TaskStatus::Cancelled);
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert!(
        conn.execute("UPDATE tasks SET status = 'lost'", [])
            .is_err(),
        "any other status is still refused"
    );
}
