//! Checkpoints of the SQLite task store's write-ahead log, off the writer's thread.
//!
//! With WAL a commit appends pages to the log; a checkpoint copies them into the database
//! file and syncs both (with `synchronous = NORMAL` the only syncs there are: until one,
//! the last commits are in the operating system's cache, safe from a crash of the process
//! but not of the machine). SQLite runs one by itself inside the commit that takes the log
//! past 1,000 pages, on the committing connection: the writer thread then stops for the
//! syncs, and every write behind it, a person's turn among them, waits as long.
//!
//! Every sync is paid twice: by the checkpoint, and by the commits that run beside the
//! log's writeback it starts (measured on ext4; the kernel's own early writeback slows
//! them the same way; the cause is not isolated). So checkpoints are timed by the writes,
//! not by the clock:
//!
//! - **When writes pause** for [`QUIET`], one of the pool's reading connections runs a
//!   `PASSIVE` checkpoint (a task on the runtime; the connection's own thread does the
//!   work). At home writes come a few at a time, seconds apart: the log is synced and
//!   copied about [`QUIET`] after each, and no commit meets it.
//! - **While writes go on without a pause**, at most [`AT_MOST`] after the first commit
//!   that no checkpoint has covered: the bound on what a crash of the machine can take.
//! - **The writer's own automatic checkpoint**, at [`WRITER_CHECKPOINT_PAGES`] pages
//!   (about 40 MiB) instead of 1,000, bounds the log: a passive checkpoint copies what was
//!   committed when it began, and the log is only reused from its start once all of it is
//!   copied, which under writes without a pause only the writer itself achieves.
//!
//! At one request at a time this keeps the added p99 at less than half of what a
//! checkpoint every 50 ms left; the price is under many requests at once, where the
//! writer's own checkpoints copy more and stop the writes for tens of milliseconds
//! (docs/BENCHMARKS.md, twenty-first session). A passive checkpoint takes no lock the
//! writer needs, and a commit is in the log before its caller hears of it, whichever
//! connection checkpoints.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::SqlitePool;
use tokio::sync::mpsc;

/// A pause in writes this long is a moment to checkpoint.
pub(super) const QUIET: Duration = Duration::from_millis(20);

/// The longest a commit waits for a checkpoint while writes go on without a pause.
pub(super) const AT_MOST: Duration = Duration::from_secs(1);

/// The writing connection's own automatic checkpoint, in pages of log: the bound on the
/// log when writes never pause long enough for a checkpoint to copy all of it.
pub(super) const WRITER_CHECKPOINT_PAGES: i64 = 10_000;

/// Tells the checkpointer of commits; callable from any thread. Dropping it ends the
/// checkpointer (and its hold on the pool).
#[derive(Debug)]
pub(super) struct Kick {
    wake: mpsc::Sender<()>,
    last: Arc<LastCommit>,
}

impl Kick {
    /// Something was committed: a checkpoint is due (at most one wake-up waits).
    pub(super) fn committed(&self) {
        self.last.now();
        match self.wake.try_send(()) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(())) => {}
            Err(mpsc::error::TrySendError::Closed(())) => {}
        }
    }
}

/// When the last commit was, as nanoseconds since the checkpointer started.
#[derive(Debug)]
struct LastCommit {
    origin: Instant,
    nanos: AtomicU64,
}

impl LastCommit {
    fn now(&self) {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(nanos, Ordering::Relaxed);
    }

    /// How long ago the last commit was.
    fn ago(&self) -> Duration {
        let at = Duration::from_nanos(self.nanos.load(Ordering::Relaxed));
        self.origin.elapsed().saturating_sub(at)
    }
}

/// Starts the checkpointer on `pool`'s connections. Needs a Tokio runtime.
pub(super) fn start(pool: SqlitePool) -> Kick {
    let (wake, woken) = mpsc::channel(1);
    let last = Arc::new(LastCommit {
        origin: Instant::now(),
        nanos: AtomicU64::new(0),
    });
    tokio::spawn(run(pool, woken, last.clone()));
    Kick { wake, last }
}

async fn run(pool: SqlitePool, mut woken: mpsc::Receiver<()>, last: Arc<LastCommit>) {
    while woken.recv().await.is_some() {
        let first = Instant::now();
        // Timing, not waiting for anything: a commit meanwhile only moves `last`.
        loop {
            let quiet_for = last.ago();
            let waited = first.elapsed();
            if quiet_for >= QUIET || waited >= AT_MOST {
                break;
            }
            tokio::time::sleep((QUIET - quiet_for).min(AT_MOST - waited)).await;
        }
        // This checkpoint covers every commit so far; one after it wakes the next.
        while woken.try_recv().is_ok() {}
        if let Err(e) = checkpoint(&pool).await {
            // A checkpoint under way elsewhere, a closed pool at shutdown: the next one,
            // or the writer's own, copies the pages.
            tracing::debug!(error = %e, "a WAL checkpoint did not run");
        }
    }
}

/// One passive checkpoint (it copies what it can; one that cannot finish is not an error).
async fn checkpoint(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .execute(pool)
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::str::FromStr;
    use std::time::Instant;

    use rusqlite::Connection;
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    use super::*;

    /// A WAL database at `path` with one table, and a connection that writes to it and
    /// never checkpoints by itself.
    fn log_only_writer(path: &Path) -> Connection {
        let writer = Connection::open(path).unwrap();
        writer
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                 PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (x TEXT);",
            )
            .unwrap();
        writer
    }

    /// A checkpointer on a pool of one connection to `path`.
    async fn checkpointer_on(path: &Path) -> Kick {
        let options = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(path);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .unwrap();
        start(pool)
    }

    fn size(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    /// Pages committed on a connection that never checkpoints by itself are copied into
    /// the database file by the checkpointer, on the pool, once it is told of them and
    /// the writes pause.
    #[tokio::test]
    async fn the_checkpointer_copies_the_log_into_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let writer = log_only_writer(&path);
        let before = size(&path);
        for i in 0..200 {
            writer
                .execute("INSERT INTO t VALUES (?)", [format!("{i:0>2000}")])
                .unwrap();
        }
        let wal = size(&dir.path().join("c.db-wal"));
        assert!(wal > 200 * 2000, "the log holds the rows: {wal} bytes");
        assert_eq!(size(&path), before);

        let kick = checkpointer_on(&path).await;
        kick.committed();
        let deadline = Instant::now() + Duration::from_secs(10);
        while size(&path) < 200 * 2000 {
            assert!(Instant::now() < deadline, "the log was never copied");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(kick);
    }

    /// Writes that never pause for [`QUIET`] still get a checkpoint, within [`AT_MOST`] of
    /// the first commit it covers: the log reaches the database file while they go on.
    #[tokio::test]
    async fn writes_without_a_pause_are_checkpointed_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let writer = log_only_writer(&path);
        let before = size(&path);
        let kick = checkpointer_on(&path).await;
        // Commits every millisecond (a twentieth of QUIET) until the database file grows,
        // or for three times the bound; says when it grew while they went on.
        let grew = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let mut i = 0_u64;
            while started.elapsed() < AT_MOST * 3 {
                writer
                    .execute("INSERT INTO t VALUES (?)", [format!("{i:0>500}")])
                    .unwrap();
                kick.committed();
                i += 1;
                if size(&path) > before {
                    return Some(started.elapsed());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            None
        })
        .await
        .unwrap();
        let grew = grew.expect("no checkpoint while the writes went on");
        assert!(
            grew < AT_MOST * 2,
            "the first checkpoint came after {grew:?}"
        );
    }
}
