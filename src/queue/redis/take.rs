//! Taking entries from the lane streams for `dequeue`: new ones (`XREADGROUP BLOCK` on a
//! dedicated connection), stale ones of dead consumers (`XAUTOCLAIM`, with their delivery
//! count from `XPENDING`), and the extra ones a read across several lanes returned,
//! held per worker for its next `dequeue`.

use chrono::{DateTime, Utc};
use redis::RedisResult;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamPendingCountReply, StreamReadReply};

use super::connection::lock;
use super::{FIELD_JOB, FIELD_PASSES, GROUP, Inner, Job, Lent, millis};
use crate::domain::WorkerName;

/// A stream entry taken by a consumer, before it becomes a [`super::Delivery`].
#[derive(Debug, Clone)]
pub(super) struct Taken {
    pub(super) key: String,
    pub(super) id: String,
    /// The entry's text, as written by `enqueue`.
    pub(super) text: Option<String>,
    /// The job, when the text is one.
    pub(super) job: Option<Job>,
    pub(super) passes: u32,
    pub(super) deliveries: u32,
}

impl Taken {
    /// Oldest first: by the entry's time (ids of different streams may share a
    /// millisecond), then by when the job was made.
    pub(super) fn age(&self) -> (u64, Option<DateTime<Utc>>, u64) {
        let (ms, seq) = id_order(&self.id);
        (ms, self.job.as_ref().map(|j| j.created_at), seq)
    }
}

/// Sorts stream ids (`<ms>-<seq>`) by time.
pub(super) fn id_order(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (
        ms.parse().unwrap_or(u64::MAX),
        seq.parse().unwrap_or(u64::MAX),
    )
}

pub(super) fn entry(key: &str, e: &StreamId, deliveries: u32) -> Taken {
    let text: Option<String> = e.get(FIELD_JOB);
    Taken {
        key: key.to_owned(),
        id: e.id.clone(),
        job: text.as_deref().and_then(|t| serde_json::from_str(t).ok()),
        text,
        passes: e.get(FIELD_PASSES).unwrap_or(0),
        deliveries,
    }
}

impl Inner {
    /// The oldest entry held for `worker` in one of `keys`. Held entries of lanes the
    /// worker no longer asks for are released: their lease runs out and others take them.
    pub(super) fn take_held(&self, worker: &WorkerName, keys: &[String]) -> Option<Taken> {
        let mut held = lock(&self.held);
        let mine = held.get_mut(worker)?;
        let (keep, drop): (Vec<Taken>, Vec<Taken>) =
            mine.drain(..).partition(|t| keys.contains(&t.key));
        *mine = keep;
        for t in &drop {
            self.release(&t.key, &t.id);
        }
        (!mine.is_empty()).then(|| mine.remove(0))
    }

    pub(super) fn hold(&self, worker: &WorkerName, more: Vec<Taken>) {
        if more.is_empty() {
            return;
        }
        let mut held = lock(&self.held);
        let mine = held.entry(worker.clone()).or_default();
        mine.extend(more);
        mine.sort_by_key(Taken::age);
    }

    /// Takes over entries whose lease ran out, at most one per stream.
    pub(super) async fn reclaim(&self, keys: &[String], consumer: &str) -> RedisResult<Vec<Taken>> {
        let starts: Vec<String> = {
            let cursors = lock(&self.cursors);
            keys.iter()
                .map(|k| cursors.get(k).cloned().unwrap_or_else(|| "0-0".to_owned()))
                .collect()
        };
        let mut pipe = redis::pipe();
        for (key, start) in keys.iter().zip(&starts) {
            pipe.cmd("XAUTOCLAIM")
                .arg(key)
                .arg(GROUP)
                .arg(consumer)
                .arg(millis(self.options.lease))
                .arg(start)
                .arg("COUNT")
                .arg(1);
        }
        let replies: Vec<StreamAutoClaimReply> =
            pipe.query_async(&mut self.redis.commands()).await?;
        let mut taken = Vec::new();
        {
            let mut cursors = lock(&self.cursors);
            for (key, reply) in keys.iter().zip(replies) {
                cursors.insert(key.clone(), reply.next_stream_id.clone());
                taken.extend(reply.claimed.iter().map(|e| entry(key, e, 0)));
            }
        }
        if taken.is_empty() {
            return Ok(taken);
        }
        let mut pipe = redis::pipe();
        for t in &taken {
            pipe.cmd("XPENDING")
                .arg(&t.key)
                .arg(GROUP)
                .arg(&t.id)
                .arg(&t.id)
                .arg(1);
        }
        let counts: Vec<StreamPendingCountReply> =
            pipe.query_async(&mut self.redis.commands()).await?;
        for (t, c) in taken.iter_mut().zip(counts) {
            let times = c.ids.first().map_or(1, |p| p.times_delivered);
            t.deliveries = u32::try_from(times).unwrap_or(u32::MAX);
        }
        Ok(taken)
    }

    /// Waits up to one block for new entries on any of `keys`.
    pub(super) async fn read_new(
        &self,
        keys: &[String],
        consumer: &str,
    ) -> RedisResult<Vec<Taken>> {
        let mut lent: Lent = self.redis.lend().await?;
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(1)
            .arg("BLOCK")
            .arg(millis(self.block()))
            .arg("STREAMS")
            .arg(keys);
        for _ in keys {
            cmd.arg(">");
        }
        let Some(conn) = lent.conn() else {
            return Ok(Vec::new());
        };
        let reply: Option<StreamReadReply> = cmd.query_async(conn).await?;
        lent.give_back();
        let taken: Vec<Taken> = reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| {
                k.ids
                    .iter()
                    .map(|e| entry(&k.key, e, 1))
                    .collect::<Vec<_>>()
            })
            .collect();
        Ok(taken)
    }
}
