//! Taking entries from the lane streams for `dequeue`: new ones (`XREADGROUP BLOCK` on a
//! dedicated connection), stale ones of dead consumers (`XAUTOCLAIM`, with their delivery
//! count from `XPENDING`), the first waiting entry of each stream (looked at, not taken,
//! to pick the best, and to set aside the streams it holds back: [`SetAside`]) and each
//! person's first behind it ([`super::turns`]), one waiting entry of the best stream
//! (`XREADGROUP` without a block) or the entry taken out of turn,
//! and the extra ones a read across several lanes returned, held per worker for its next
//! `dequeue`.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use redis::RedisResult;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamPendingCountReply, StreamReadReply};

use super::connection::lock;
use super::turns::Choice;
use super::{
    Aging, FIELD_AHEAD, FIELD_JOB, FIELD_PASSES, FIELD_QUEUED, GROUP, Inner, Job, Lent, Priority,
    millis,
};
use crate::backend::clock::moved;
use crate::domain::WorkerName;

/// A Lua function for the scripts that look at waiting entries: `last_delivered(key,
/// group)` gives whether `key` is a stream, and the id of the last entry it delivered to
/// `group` (`nil` when there is no such group): the entries after it wait.
macro_rules! lua_last_delivered {
    () => {
        r"
local function last_delivered(key, group)
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', key)
  if not ok then return false, nil end
  for _, g in ipairs(groups) do
    local name, delivered
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1]
      elseif g[j] == 'last-delivered-id' then delivered = g[j + 1] end
    end
    if name == group then return true, delivered end
  end
  return true, nil
end
"
    };
}
pub(super) use lua_last_delivered;

/// The first waiting entry (after the group's last delivered id) of each stream in `KEYS`,
/// at most `ARGV[2]` of them per stream (0: all), for group `ARGV[1]`: per stream, a list
/// of `[id, job, ahead]` (fields `ARGV[3]` and `ARGV[4]`, `ahead` empty when the entry has
/// none); empty when none waits or the stream or group does not exist.
pub(super) const WAITING_SCRIPT: &str = concat!(
    lua_last_delivered!(),
    r"
local out = {}
for i, key in ipairs(KEYS) do
  local found = {}
  local _, last = last_delivered(key, ARGV[1])
  if last then
    local entries
    if tonumber(ARGV[2]) > 0 then
      entries = redis.call('XRANGE', key, '(' .. last, '+', 'COUNT', ARGV[2])
    else
      entries = redis.call('XRANGE', key, '(' .. last, '+')
    end
    for _, e in ipairs(entries) do
      local job, ahead = '', ''
      for j = 1, #e[2], 2 do
        if e[2][j] == ARGV[3] then job = e[2][j + 1]
        elseif e[2][j] == ARGV[4] then ahead = e[2][j + 1] end
      end
      found[#found + 1] = {e[1], job, ahead}
    end
  end
  out[i] = found
end
return out
"
);

/// Milliseconds since the epoch now on Redis's clock, which makes the stream ids and
/// reads `ahead` of this process's.
pub(super) fn now_ms(ahead: TimeDelta) -> u64 {
    let now = Utc::now();
    let on_redis = now.checked_add_signed(ahead).unwrap_or(now);
    u64::try_from(on_redis.timestamp_millis()).unwrap_or(0)
}

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
    /// How far Redis's clock read ahead of the writer's, which the job's times are on
    /// (`FIELD_AHEAD`); `None` for entries of older versions.
    pub(super) writer_ahead_ms: Option<i64>,
    /// For an entry taken out of turn, its id in its class's stream (`FIELD_QUEUED`).
    pub(super) queued_id: Option<String>,
}

/// The order in which entries are taken: smaller first.
pub(super) type Order = (u8, u64, Option<DateTime<Utc>>, u64);

impl Taken {
    /// Best effective priority first ([`Aging::rank`], `now` in ms), then oldest: by when
    /// the job began to wait (a job queued again carries it; any other since its entry's
    /// time, which its id holds; ids of different streams may share a millisecond), then
    /// by when the job was made.
    pub(super) fn order(&self, aging: Aging, now: u64) -> Order {
        let (queued_ms, seq) = id_order(self.queued());
        let ms = self
            .job
            .as_ref()
            .and_then(|j| j.waiting_since)
            .map_or(queued_ms, |t| {
                u64::try_from(t.timestamp_millis()).unwrap_or(0)
            });
        let priority = self
            .job
            .as_ref()
            .map_or(Priority::Interactive, |j| j.priority);
        let waited = std::time::Duration::from_millis(now.saturating_sub(ms));
        (
            aging.rank(priority, waited),
            ms,
            self.job.as_ref().map(|j| j.created_at),
            seq,
        )
    }

    /// The id whose time is when the entry was queued: its own, or the one it had before
    /// it was taken out of turn.
    fn queued(&self) -> &str {
        self.queued_id.as_deref().unwrap_or(&self.id)
    }

    /// The entry's `job` with its times on this process's clock, where Redis's reads
    /// `ahead`: moved from its writer's, and when it began to wait (what it carries when
    /// it was queued again, else its entry's time on Redis's clock).
    pub(super) fn on_this_clock(&self, mut job: Job, ahead: TimeDelta) -> Job {
        if let Some(writer) = self.writer_ahead_ms {
            job.shift_times(TimeDelta::milliseconds(writer) - ahead);
        }
        let queued = || {
            let ms = i64::try_from(id_order(self.queued()).0).unwrap_or(i64::MAX);
            DateTime::from_timestamp_millis(ms)
                .and_then(|t| t.checked_sub_signed(ahead))
                .unwrap_or_else(Utc::now)
        };
        job.waiting_since = Some(job.waiting_since.unwrap_or_else(queued));
        job
    }
}

/// How often a worker looks again at the streams it set aside: the entries behind a job
/// left for another worker wait for it to be taken, and a worker blocked on other
/// streams would not see that.
const LOOK_AGAIN: Duration = Duration::from_millis(200);

/// The streams whose first waiting job was left for workers other than this one, until
/// a time not yet come ([`Job::avoid_until`]): this worker reads none of them meanwhile,
/// since a stream hands out its entries in order.
struct SetAside {
    keys: Vec<String>,
    /// The soonest of those times.
    until: Option<DateTime<Utc>>,
}

impl SetAside {
    /// The streams of `heads` set aside for `worker` at `now`, where Redis's clock reads
    /// `ahead` of this one.
    fn of(heads: &[Taken], worker: &WorkerName, now: DateTime<Utc>, ahead: TimeDelta) -> Self {
        let mut aside = Self {
            keys: Vec::new(),
            until: None,
        };
        for t in heads {
            let Some(job) = &t.job else { continue };
            // The job's time on this clock, and `now` on its writer's.
            let by = t
                .writer_ahead_ms
                .map_or(TimeDelta::zero(), |w| TimeDelta::milliseconds(w) - ahead);
            let Some(until) = job
                .avoid_until
                .filter(|_| job.avoids(worker, moved(now, -by)))
                .map(|u| moved(u, by))
            else {
                continue;
            };
            aside.keys.push(t.key.clone());
            aside.until = Some(aside.until.map_or(until, |u| u.min(until)));
        }
        aside
    }

    fn holds(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }

    /// How long to wait for new entries elsewhere: `block`, or while streams are set
    /// aside, until the soonest of their times and at most [`LOOK_AGAIN`].
    fn block(&self, block: Duration, now: DateTime<Utc>) -> Duration {
        let Some(until) = self.until else {
            return block;
        };
        let left = (until - now).to_std().unwrap_or_default();
        block
            .min(LOOK_AGAIN)
            .min(left)
            .max(Duration::from_millis(1))
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
        writer_ahead_ms: e.get(FIELD_AHEAD),
        queued_id: e.get(FIELD_QUEUED),
        ..waiting_entry(
            key,
            e.id.clone(),
            text,
            e.get(FIELD_PASSES).unwrap_or(0),
            deliveries,
        )
    }
}

fn waiting_entry(
    key: &str,
    id: String,
    text: Option<String>,
    passes: u32,
    deliveries: u32,
) -> Taken {
    Taken {
        key: key.to_owned(),
        id,
        job: text.as_deref().and_then(|t| serde_json::from_str(t).ok()),
        text,
        passes,
        deliveries,
        writer_ahead_ms: None,
        queued_id: None,
    }
}

impl Inner {
    /// Releases the entries held for `worker` of lanes it no longer asks for (their lease
    /// runs out and others take them), and returns its held entries that remain.
    fn held_in<'a>(
        &self,
        held: &'a mut std::collections::HashMap<WorkerName, Vec<Taken>>,
        worker: &WorkerName,
        keys: &[String],
    ) -> Option<&'a mut Vec<Taken>> {
        let mine = held.get_mut(worker)?;
        let (keep, drop): (Vec<Taken>, Vec<Taken>) =
            mine.drain(..).partition(|t| keys.contains(&t.key));
        *mine = keep;
        for t in &drop {
            self.release(&t.key, &t.id);
        }
        Some(mine)
    }

    /// The order of the best entry held for `worker` in one of `keys`.
    pub(super) fn best_held(
        &self,
        worker: &WorkerName,
        keys: &[String],
        aging: Aging,
        now: u64,
    ) -> Option<Order> {
        let mut held = lock(&self.held);
        let mine = self.held_in(&mut held, worker, keys)?;
        mine.iter().map(|t| t.order(aging, now)).min()
    }

    /// The best entry held for `worker` in one of `keys`, taken out of its hold.
    pub(super) fn take_held(
        &self,
        worker: &WorkerName,
        keys: &[String],
        aging: Aging,
        now: u64,
    ) -> Option<Taken> {
        let mut held = lock(&self.held);
        let mine = self.held_in(&mut held, worker, keys)?;
        let best = (0..mine.len()).min_by_key(|&i| mine[i].order(aging, now))?;
        Some(mine.remove(best))
    }

    pub(super) fn hold(&self, worker: &WorkerName, more: Vec<Taken>) {
        if more.is_empty() {
            return;
        }
        lock(&self.held)
            .entry(worker.clone())
            .or_default()
            .extend(more);
    }

    /// Up to `per_stream` waiting entries of each of `keys` (0: all), oldest first, without
    /// taking them.
    pub(super) async fn waiting(
        &self,
        keys: &[String],
        per_stream: usize,
    ) -> RedisResult<Vec<Taken>> {
        let found: Vec<Vec<(String, String, String)>> = redis::cmd("EVAL")
            .arg(WAITING_SCRIPT)
            .arg(keys.len())
            .arg(keys)
            .arg(GROUP)
            .arg(per_stream)
            .arg(FIELD_JOB)
            .arg(FIELD_AHEAD)
            .query_async(&mut self.redis.commands())
            .await?;
        Ok(keys
            .iter()
            .zip(found)
            .flat_map(|(key, entries)| {
                entries
                    .into_iter()
                    .map(|(id, text, ahead)| Taken {
                        writer_ahead_ms: ahead.parse().ok(),
                        ..waiting_entry(key, id, Some(text), 0, 0)
                    })
                    .collect::<Vec<_>>()
            })
            .collect())
    }

    /// The first waiting entry of each of `keys`, without taking them.
    pub(super) async fn heads(&self, keys: &[String]) -> RedisResult<Vec<Taken>> {
        self.waiting(keys, 1).await
    }

    /// Takes the next waiting entry of stream `key`, if any, without blocking.
    pub(super) async fn read_waiting(&self, key: &str, consumer: &str) -> RedisResult<Vec<Taken>> {
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(1)
            .arg("STREAMS")
            .arg(key)
            .arg(">")
            .query_async(&mut self.redis.commands())
            .await?;
        Ok(read_reply(reply))
    }

    /// What one round of `dequeue` takes (see [`Inner::next`]): the best of the entries
    /// held for `worker` (stale ones of dead consumers taken over now among them) and the
    /// waiting entries of each stream, people taking turns ([`super::turns`]), else new
    /// ones (blocking), Redis's clock reading `ahead` of this one. The held entry comes
    /// out of its hold; the others are taken now.
    pub(super) async fn pick(
        &self,
        worker: &WorkerName,
        keys: &[String],
        consumer: &str,
        ahead: TimeDelta,
    ) -> RedisResult<Vec<Taken>> {
        self.ensure_groups(keys).await?;
        let stale = self.reclaim(keys, consumer).await?;
        self.lease(&stale, consumer);
        self.hold(worker, stale);
        let heads = self.heads(keys).await?;
        let aside = SetAside::of(&heads, worker, Utc::now(), ahead);
        let now = now_ms(ahead);
        let aging = self.options.aging;
        // Nothing waits but in streams set aside (or at all): nothing to choose among.
        let best = if heads.iter().any(|h| !aside.holds(&h.key)) {
            let people = self.people(keys, true).await?;
            people.best(self, &heads, |key| aside.holds(key), aging, now)
        } else {
            None
        };
        let best_held = self
            .best_held(worker, keys, aging, now)
            .map(super::turns::held);
        Ok(match (best_held, best) {
            (Some(held), Some(choice)) if choice.order < held => {
                self.take_choice(&choice, consumer).await?
            }
            (Some(_), _) => self
                .take_held(worker, keys, aging, now)
                .into_iter()
                .collect(),
            (None, Some(choice)) => self.take_choice(&choice, consumer).await?,
            (None, None) => {
                let open: Vec<String> = keys.iter().filter(|k| !aside.holds(k)).cloned().collect();
                self.read_new(&open, consumer, aside.block(self.block(), Utc::now()))
                    .await?
            }
        })
    }

    /// Takes the entry chosen: the next of its stream as it comes, or one behind others
    /// taken out of turn.
    async fn take_choice(&self, choice: &Choice, consumer: &str) -> RedisResult<Vec<Taken>> {
        if choice.heads {
            self.read_waiting(&choice.key, consumer).await
        } else {
            self.take_out_of_turn(choice, consumer).await
        }
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

    /// Waits up to `block` for new entries on any of `keys` (only waits when there are
    /// none to read).
    pub(super) async fn read_new(
        &self,
        keys: &[String],
        consumer: &str,
        block: Duration,
    ) -> RedisResult<Vec<Taken>> {
        if keys.is_empty() {
            tokio::time::sleep(block).await;
            return Ok(Vec::new());
        }
        let mut lent: Lent = self.redis.lend().await?;
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(1)
            .arg("BLOCK")
            .arg(millis(block))
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
        Ok(read_reply(reply))
    }
}

/// The entries of an `XREADGROUP` reply, first deliveries all.
pub(super) fn read_reply(reply: Option<StreamReadReply>) -> Vec<Taken> {
    reply
        .into_iter()
        .flat_map(|r| r.keys)
        .flat_map(|k| {
            k.ids
                .iter()
                .map(|e| entry(&k.key, e, 1))
                .collect::<Vec<_>>()
        })
        .collect()
}
