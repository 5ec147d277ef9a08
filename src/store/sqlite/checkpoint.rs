//! Checkpoints of the SQLite task store's write-ahead log, off the writer's thread.
//!
//! With WAL a commit appends pages to the log; a checkpoint copies them into the database
//! file and syncs both (with `synchronous = NORMAL` the only syncs there are), after which
//! the log is written again from its start. SQLite runs one by itself inside the commit
//! that takes the log past 1,000 pages, on the committing connection: the writer thread
//! then stops for the syncs (about 4 ms on the machines measured), and every write behind
//! it, a person's turn among them, waits as long. At one request at a time that was one
//! request in a hundred, and so the whole of the added p99.
//!
//! Here one of the pool's reading connections checkpoints soon after writes happen, at
//! most every [`PACE`] (a task on the runtime; the connection's own thread does the work).
//! Its checkpoints are `PASSIVE`: they take no lock the writer needs, so the writer goes on
//! appending while pages are copied and synced. A passive checkpoint copies what was
//! committed when it began, and the log is reused from its start once all of it has been
//! copied: whenever writes pause for as long as a checkpoint takes, which at home is almost
//! always. Writes that never pause may never leave that moment, so the writer's own
//! automatic checkpoint stays as the bound on the log, at [`WRITER_CHECKPOINT_PAGES`]
//! (about 40 MiB) instead of 1,000 pages: it then finds most of the log copied already,
//! and runs a tenth as often.
//!
//! Durability is unchanged: a commit is in the log before its caller hears of it, as
//! before, and a checkpoint syncs the log before it copies from it, whichever connection
//! runs it.

use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::mpsc;

/// The least time between two checkpoints: about what a busy store commits of 1,000 pages
/// in (the log SQLite would checkpoint by itself).
pub(super) const PACE: Duration = Duration::from_millis(50);

/// The writing connection's own automatic checkpoint, in pages of log: the bound on the
/// log when writes never pause long enough for a checkpoint to copy all of it.
pub(super) const WRITER_CHECKPOINT_PAGES: i64 = 10_000;

/// Wakes the checkpointer after a commit; callable from any thread. Dropping it ends the
/// checkpointer (and its hold on the pool).
#[derive(Debug)]
pub(super) struct Kick(mpsc::Sender<()>);

impl Kick {
    /// Something was committed: a checkpoint is due (at most one waits).
    pub(super) fn committed(&self) {
        match self.0.try_send(()) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(())) => {}
            Err(mpsc::error::TrySendError::Closed(())) => {}
        }
    }
}

/// Starts the checkpointer on `pool`'s connections. Needs a Tokio runtime.
pub(super) fn start(pool: SqlitePool) -> Kick {
    let (kick, kicked) = mpsc::channel(1);
    tokio::spawn(run(pool, kicked));
    Kick(kick)
}

async fn run(pool: SqlitePool, mut kicked: mpsc::Receiver<()>) {
    while kicked.recv().await.is_some() {
        if let Err(e) = checkpoint(&pool).await {
            // A checkpoint under way elsewhere, a closed pool at shutdown: the next one,
            // or the writer's own, copies the pages.
            tracing::debug!(error = %e, "a WAL checkpoint did not run");
        }
        // Pacing, not waiting for anything: commits meanwhile leave one kick waiting.
        tokio::time::sleep(PACE).await;
    }
}

/// One passive checkpoint: the pages in the log, and how many of them are copied.
pub(super) async fn checkpoint(pool: &SqlitePool) -> Result<(i64, i64), sqlx::Error> {
    let (_, pages, copied): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(pool)
        .await?;
    Ok((pages, copied))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;
    use std::time::Instant;

    use rusqlite::Connection;
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    use super::*;

    /// Pages committed on a connection that never checkpoints by itself are copied into
    /// the database file by the checkpointer, on the pool, once it is told of them.
    #[tokio::test]
    async fn the_checkpointer_copies_the_log_into_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                 PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (x TEXT);",
            )
            .unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        for i in 0..200 {
            writer
                .execute("INSERT INTO t VALUES (?)", [format!("{i:0>2000}")])
                .unwrap();
        }
        let wal = std::fs::metadata(dir.path().join("c.db-wal"))
            .unwrap()
            .len();
        assert!(wal > 200 * 2000, "the log holds the rows: {wal} bytes");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), before);

        let options = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(&path);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .unwrap();
        let kick = start(pool);
        kick.committed();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(&path).unwrap().len() < 200 * 2000 {
            assert!(Instant::now() < deadline, "the log was never copied");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(kick);
    }
}
