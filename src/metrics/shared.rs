//! Cluster mode: every machine's task times on `serve`'s `/metrics`.
//!
//! A `coordinator worker` records a finished task's times (see [`super::timing`]) into
//! its own [`Metrics`], which nobody scrapes. So every cluster-mode process also shares
//! them: [`Metrics::task_ended`] puts them in an [`Outbox`] (a bounded channel that is
//! never awaited: the task is already recorded and never waits for Redis), and a
//! [`Publisher`] writes them to one capped stream, `<prefix>metrics` (`XADD … MAXLEN ~`).
//! Every `serve` runs a [`Follower`] that reads that stream (`XREAD BLOCK`) from where it
//! ended when `serve` started, and records each entry into its own histograms.
//!
//! Each entry names the process that wrote it (a random id per process), and a follower
//! skips its own process's entries: `serve`'s own workers recorded those already. So
//! they are counted once, without a round trip through Redis, and even while Redis is
//! down; a second `serve` (two front doors) records them like any other machine's.
//!
//! Redis trouble: the publisher retries a write briefly, then drops it (logged); the
//! outbox drops what does not fit while the publisher is stuck (counted, and told once a
//! write succeeds again). The follower reconnects with backoff and continues after the
//! last entry it saw, so what was written meanwhile (within the cap) is still recorded.
//! Embedded mode has none of this: its `Metrics` has no outbox.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::RedisResult;
use redis::streams::StreamRangeReply;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};
use uuid::Uuid;

use super::{Metrics, TaskTimes};
use crate::domain::{ModelName, WorkerName};
use crate::queue::redis::{Backoff, Redis, read_json_after, with_retries};

const FIELD: &str = "times";
/// Entries the stream keeps (approximately): far more than a household finishes while a
/// follower reconnects.
pub const MAX_ENTRIES: usize = 10_000;
/// Task times waiting for the publisher; beyond this they are dropped, not waited for.
pub const OUTBOX_SIZE: usize = 1024;
/// Entries written in one pipeline, and read in one `XREAD`.
const BATCH: usize = 256;
/// The longest one `XREAD` blocks before it is issued again.
const BLOCK: Duration = Duration::from_secs(5);
/// How long a stopping process still tries to share what its last tasks took.
const FLUSH: Duration = Duration::from_secs(2);

/// One finished task's times as they travel between processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shared {
    /// The process that ran the task.
    origin: Uuid,
    model: ModelName,
    machine: WorkerName,
    queue_wait_ms: Option<i64>,
    first_token_ms: Option<i64>,
    total_ms: Option<i64>,
    completion_tokens: Option<i64>,
}

impl Shared {
    fn of(origin: Uuid, t: &TaskTimes<'_>) -> Self {
        Self {
            origin,
            model: t.model.clone(),
            machine: t.machine.clone(),
            queue_wait_ms: t.queue_wait_ms,
            first_token_ms: t.first_token_ms,
            total_ms: t.total_ms,
            completion_tokens: t.completion_tokens,
        }
    }

    fn times(&self) -> TaskTimes<'_> {
        TaskTimes {
            model: &self.model,
            machine: &self.machine,
            queue_wait_ms: self.queue_wait_ms,
            first_token_ms: self.first_token_ms,
            total_ms: self.total_ms,
            completion_tokens: self.completion_tokens,
        }
    }
}

/// Where a cluster-mode process's finished task times wait to be shared.
#[derive(Debug)]
pub struct Outbox {
    tx: mpsc::Sender<Shared>,
    origin: Uuid,
    dropped: Arc<AtomicU64>,
}

impl Outbox {
    /// Hands `t` to the publisher, or drops it when the outbox is full: never waits.
    pub(super) fn put(&self, t: &TaskTimes<'_>) {
        if self.tx.try_send(Shared::of(self.origin, t)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// This process's part in sharing task times: the publisher of its own, and (for
/// `serve`) the follower that records everyone else's.
pub struct Sharing {
    publisher: Publisher,
    follower: Option<Follower>,
}

impl Sharing {
    /// Connects to the Redis at `url` and returns the process's [`Metrics`], sharing its
    /// task times through `<prefix>metrics`; with `follow`, the metrics also get every
    /// other process's from now on.
    pub async fn open(url: &str, prefix: &str, follow: bool) -> RedisResult<(Arc<Metrics>, Self)> {
        let redis = Redis::connect(url).await?;
        let key = stream_key(prefix);
        let origin = Uuid::now_v7();
        let (tx, rx) = mpsc::channel(OUTBOX_SIZE);
        let dropped = Arc::new(AtomicU64::new(0));
        let outbox = Outbox {
            tx,
            origin,
            dropped: dropped.clone(),
        };
        let metrics = Arc::new(Metrics::default().sharing_to(outbox));
        let follower = if follow {
            Some(Follower {
                last: end_of(&redis, &key).await,
                redis: redis.clone(),
                key: key.clone(),
                origin,
                metrics: metrics.clone(),
            })
        } else {
            None
        };
        let publisher = Publisher {
            redis,
            key,
            rx,
            dropped,
        };
        Ok((
            metrics,
            Self {
                publisher,
                follower,
            },
        ))
    }

    /// Starts the follower on `tracker` until `stop`, and the publisher on its own: it
    /// outlives the drain, so tasks that end in the grace period are shared too, and
    /// ends with [`Publishing::finish`].
    pub fn start(self, tracker: &TaskTracker, stop: &CancellationToken) -> Publishing {
        if let Some(follower) = self.follower {
            tracker.spawn(follower.run(stop.clone()));
        }
        let done = CancellationToken::new();
        let task = tokio::spawn(self.publisher.run(done.clone()));
        Publishing {
            task: AbortOnDropHandle::new(task),
            done,
        }
    }
}

/// The stream's key under `prefix`.
pub fn stream_key(prefix: &str) -> String {
    format!("{prefix}metrics")
}

/// A running publisher.
pub struct Publishing {
    task: AbortOnDropHandle<()>,
    done: CancellationToken,
}

impl Publishing {
    /// Writes what the outbox still holds (for a short while at most) and stops.
    pub async fn finish(self) {
        self.done.cancel();
        if tokio::time::timeout(FLUSH, self.task).await.is_err() {
            tracing::warn!("the last task times could not be shared before the process stopped");
        }
    }
}

/// Writes what the outbox gets to the stream.
struct Publisher {
    redis: Redis,
    key: String,
    rx: mpsc::Receiver<Shared>,
    dropped: Arc<AtomicU64>,
}

impl Publisher {
    /// Writes until `done`, then what the outbox holds at that moment.
    async fn run(mut self, done: CancellationToken) {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            tokio::select! {
                got = self.rx.recv_many(&mut batch, BATCH) => {
                    if got == 0 {
                        return;
                    }
                    self.write(&mut batch).await;
                }
                () = done.cancelled() => {
                    while let Ok(s) = self.rx.try_recv() {
                        batch.push(s);
                        if batch.len() == BATCH {
                            self.write(&mut batch).await;
                        }
                    }
                    self.write(&mut batch).await;
                    return;
                }
            }
        }
    }

    /// Writes `batch` in one pipeline (retried briefly) and empties it.
    async fn write(&self, batch: &mut Vec<Shared>) {
        if batch.is_empty() {
            return;
        }
        let texts: Vec<String> = batch
            .drain(..)
            .filter_map(|s| serde_json::to_string(&s).ok())
            .collect();
        let written = with_retries(|| async {
            let mut pipe = redis::pipe();
            for text in &texts {
                pipe.cmd("XADD")
                    .arg(&self.key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(MAX_ENTRIES)
                    .arg("*")
                    .arg(FIELD)
                    .arg(text)
                    .ignore();
            }
            pipe.query_async::<()>(&mut self.redis.commands()).await
        })
        .await;
        match written {
            Ok(()) => {
                let dropped = self.dropped.swap(0, Ordering::Relaxed);
                if dropped > 0 {
                    tracing::warn!(
                        dropped,
                        "task times that did not fit the outbox while Redis was slow were not shared; serve's /metrics misses them"
                    );
                }
            }
            Err(e) => tracing::warn!(
                entries = texts.len(),
                error = %e,
                "could not share task times through Redis; serve's /metrics misses them"
            ),
        }
    }
}

/// Records into `serve`'s metrics the task times other processes share.
struct Follower {
    redis: Redis,
    key: String,
    origin: Uuid,
    metrics: Arc<Metrics>,
    /// The id of the last entry read (`$` only when the end could not be read at start).
    last: String,
}

impl Follower {
    async fn run(mut self, stop: CancellationToken) {
        let mut backoff = Backoff::new();
        loop {
            let read = tokio::select! {
                read = read_json_after::<Shared>(&self.redis, &self.key, &self.last, FIELD, BATCH, BLOCK) => read,
                () = stop.cancelled() => return,
            };
            match read {
                Ok(entries) => {
                    backoff.reset();
                    for (id, shared) in entries {
                        self.last = id;
                        if let Some(s) = shared.filter(|s| s.origin != self.origin) {
                            self.metrics.record_times(&s.times());
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "shared task times unreachable; trying again");
                    tokio::select! {
                        () = backoff.wait() => {}
                        () = stop.cancelled() => return,
                    }
                }
            }
        }
    }
}

/// The id of the stream's last entry (`0-0` when it has none): a follower starts after
/// it, so it records what is shared after it started and nothing twice. `$` when Redis
/// cannot say (the first read then starts at whatever is last by then).
async fn end_of(redis: &Redis, key: &str) -> String {
    let last: RedisResult<StreamRangeReply> = redis::cmd("XREVRANGE")
        .arg(key)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut redis.commands())
        .await;
    match last {
        Ok(reply) => reply
            .ids
            .into_iter()
            .next()
            .map_or_else(|| "0-0".to_owned(), |e| e.id),
        Err(e) => {
            tracing::warn!(error = %e, "could not read where the shared task times end; following from the next read");
            "$".to_owned()
        }
    }
}

#[cfg(test)]
mod tests;
