//! Task events over Redis for cluster mode: how tokens travel from a `coordinator worker`
//! on one machine to the front door (`coordinator serve`) that holds the client's request.
//!
//! One stream per task (`<prefix>events:<task_id>`), one entry per event (`XADD`, capped
//! with `MAXLEN ~`). A subscriber reads the stream from `0` and then blocks (`XREAD
//! BLOCK`) for what follows, so it sees every event from the first whenever it subscribes,
//! each as soon as it is written, and ends after the terminal event. Streams expire: a
//! day after the last event of a task that never ended (its worker died), an hour after
//! the terminal event.
//!
//! Redis trouble does not end a subscription: it waits, reconnects with backoff and
//! continues after the last event it saw. `publish` retries briefly and logs what it
//! could not write (the result itself is safe in the task store).

use std::time::Duration;

use async_trait::async_trait;

use super::{EventBus, EventStream, TaskEvent};
use crate::domain::TaskId;
use crate::queue::redis::{Backoff, Redis, read_json_after, with_retries};

const FIELD_EVENT: &str = "event";
/// Events kept per task (approximately): far more than one answer's chunks.
const MAX_EVENTS: usize = 50_000;
/// Lifetime of a stream whose task is still running, renewed by every event.
const RUNNING_TTL: Duration = Duration::from_secs(24 * 3600);
/// Lifetime of a stream after its terminal event.
const FINISHED_TTL: Duration = Duration::from_secs(3600);
/// The longest one `XREAD` blocks before it is issued again.
const BLOCK: Duration = Duration::from_secs(5);
/// Entries fetched per read.
const READ_BATCH: usize = 256;

/// The cluster-mode event bus.
#[derive(Debug, Clone)]
pub struct RedisEvents {
    redis: Redis,
    prefix: String,
}

impl RedisEvents {
    /// Connects to `url` (`redis://host:6379/0`). Every key starts with `prefix` (empty in
    /// production; tests use a unique one).
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        Ok(Self {
            redis: Redis::connect(url).await?,
            prefix: prefix.to_owned(),
        })
    }

    /// The stream key of `task`'s events.
    pub fn stream_key(&self, task: TaskId) -> String {
        format!("{}events:{task}", self.prefix)
    }

    /// Checks Redis answers (for readiness).
    pub async fn ping(&self) -> Result<(), redis::RedisError> {
        redis::cmd("PING")
            .query_async::<String>(&mut self.redis.commands())
            .await
            .map(drop)
    }
}

#[async_trait]
impl EventBus for RedisEvents {
    async fn publish(&self, task: TaskId, event: TaskEvent) {
        let key = self.stream_key(task);
        let text = match serde_json::to_string(&event) {
            Ok(text) => text,
            Err(e) => {
                tracing::error!(task_id = %task, error = %e, "could not serialise a task event");
                return;
            }
        };
        let ttl = if event.is_terminal() {
            FINISHED_TTL
        } else {
            RUNNING_TTL
        };
        let written = with_retries(|| async {
            redis::pipe()
                .cmd("XADD")
                .arg(&key)
                .arg("MAXLEN")
                .arg("~")
                .arg(MAX_EVENTS)
                .arg("*")
                .arg(FIELD_EVENT)
                .arg(&text)
                .ignore()
                .cmd("EXPIRE")
                .arg(&key)
                .arg(ttl.as_secs())
                .ignore()
                .query_async::<()>(&mut self.redis.commands())
                .await
        })
        .await;
        if let Err(e) = written {
            tracing::warn!(task_id = %task, error = %e, "could not publish a task event");
        }
    }

    async fn subscribe(&self, task: TaskId) -> EventStream {
        let redis = self.redis.clone();
        let key = self.stream_key(task);
        Box::pin(async_stream::stream! {
            let mut last = "0-0".to_owned();
            let mut backoff = Backoff::new();
            loop {
                match read_json_after::<TaskEvent>(&redis, &key, &last, FIELD_EVENT, READ_BATCH, BLOCK).await {
                    Ok(batch) => {
                        backoff.reset();
                        for (id, event) in batch {
                            last = id;
                            let Some(event) = event else {
                                continue;
                            };
                            let terminal = event.is_terminal();
                            yield event;
                            if terminal {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(task_id = %task, error = %e, "event stream unreachable; trying again");
                        backoff.wait().await;
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
