//! Redis Streams lanes for cluster mode (`[queue] type = "redis"`): how a stored task
//! travels from `coordinator serve` to a `coordinator worker` on another machine.
//!
//! One stream per lane and priority class: `<prefix><lane>` for interactive jobs (and
//! every job queued before priorities existed), `<prefix>background:<lane>` and
//! `<prefix>batch:<lane>` for the others (no lane key starts with those words, so the
//! two never mix), and one consumer group ([`GROUP`]) per stream, created with
//! `MKSTREAM` from id `0` on first use (and again after a Redis restart lost it).
//! `enqueue` is `XADD` of the serialised [`Job`] to its class's stream; `ack` is `XACK`
//! plus `XDEL`, so a stream holds only jobs that are waiting or running.
//!
//! A job queued again (handed on to a sooner worker, held back by the guard, or retried
//! elsewhere) has waited already: it carries when it began ([`Job::waiting_since`], set
//! on every delivery) and goes to the same three streams under `requeued:`
//! (`<prefix>requeued:<lane>`, `<prefix>requeued:background:<lane>`, …), not behind the
//! jobs queued after it in its class's stream: a stream is read in order only, so the
//! end of the fresh jobs' stream would be its place by the time it was queued again.
//!
//! `dequeue` takes the job of best effective priority across a worker's streams, oldest
//! first among equals ([`Aging::rank`]): it looks at the first waiting entry of each
//! stream (one script, `take::heads`), whose age is the job's `waiting_since` or else the
//! enqueue time in ms its id carries, which gives the aging without extra state, and
//! reads (`XREADGROUP`, no block) from the best one; with nothing waiting it blocks
//! (`XREADGROUP … BLOCK`) over all of them. Among jobs queued again in one lane and
//! class, the one queued again first goes first. Within a class, the household's people
//! take turns ([`turns`]): a job of a person with fewer running, or served longer ago,
//! is taken out of turn from behind others, through a third stream per lane and class
//! (`<prefix>taken:<lane>`, `<prefix>taken:background:<lane>`, …) that every worker of
//! the lane reads too; each stream's index of whose its entries are
//! (`<prefix>who:<stream>`) is written and deleted with them.
//!
//! Delivery is at least once. A job stays pending for its consumer until acknowledged.
//! While this process is alive it renews the lease of every job it holds (`XCLAIM` to
//! itself, `JUSTID`, every third of the lease), so long generations are not taken away.
//! When a process dies, its jobs' leases run out and the next `dequeue` of any consumer
//! takes them over (`XAUTOCLAIM`) and hands them out again with
//! [`Delivery::deliveries`] above 1. Past [`RedisQueueOptions::max_deliveries`] the job
//! comes out once more with [`Delivery::dead_letter`] set: the worker must fail the task
//! with that reason and acknowledge it, instead of running it.
//!
//! A job's `avoid` list is honoured on a best-effort basis: a consumer on the list puts
//! the job back at the end of its lane (a new entry; the original is acknowledged) so a
//! waiting worker can take it, at most [`RedisQueueOptions::max_avoid_passes`] times;
//! then it runs where it lands rather than wait for ever. A job left for a sooner worker
//! carries until when it waits for the others ([`Job::avoid_until`]): meanwhile a
//! consumer on its list reads none of the streams it heads (a stream hands out its
//! entries in order) and looks again often; then it takes the job as it comes. Without
//! that, an idle avoided worker would get it back at once, its passes gone in
//! milliseconds, while the worker it was left for is still finishing its answer.
//!
//! Consumer names are the worker's name plus a per-queue-instance suffix, so a restarted
//! worker does not inherit its dead self's pending entries (they are reclaimed instead).
//! The names of gone processes are swept out of the groups once they hold nothing (see
//! `lease`).
//!
//! A Redis restart is survived: commands reconnect in the background, `dequeue` waits
//! with backoff until Redis answers again and re-creates lost consumer groups; other
//! calls report [`QueueError::Backend`] and work again once Redis is back. Redis keeps no
//! data the store lacks: start-up recovery queues unfinished tasks again from the store.

pub(crate) mod clock;
pub(crate) mod connection;
mod inventory;
mod lease;
mod take;
mod turns;

pub(crate) use connection::{
    Backoff, Lent, MAX_BLOCK, Redis, is_transient, read_json_after, with_retries,
};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::{RedisError, RedisResult};
use tokio_util::task::AbortOnDropHandle;

use self::connection::{is_no_group, lock};
use self::lease::{Unleased, keep_leases};
use self::take::Taken;
use super::priority::{Aging, Priority};
use super::{Delivery, Job, Queue, QueueError, Takes};
use crate::domain::{Lane, TaskId, WorkerName};

/// The consumer group of every lane stream.
pub const GROUP: &str = "workers";
const FIELD_JOB: &str = "job";
/// How often a job was put back because the consumer that got it was on its avoid list.
const FIELD_PASSES: &str = "passes";
/// How far Redis's clock read ahead of the clock of the process that wrote the entry, in
/// milliseconds: the job's times are on that clock (see [`clock`]). Entries of older
/// versions have none, and are read as on the reader's clock.
const FIELD_AHEAD: &str = "redis_ahead_ms";
/// What the streams of jobs queued again start with, after the prefix.
const REQUEUED: &str = "requeued:";
/// What each stream's index of whose its entries are starts with, after the prefix (then
/// the stream's key): one tiny entry per entry of a person other than
/// [`crate::domain::Person::DEFAULT`], of the same id, whose field `p` names them; added
/// and deleted with the entry. The looks at the people's work read the indexes, not the
/// entries' jobs (see [`turns`]).
const WHO: &str = "who:";
/// The id an entry taken out of turn had in its class's stream, whose time is when it
/// was queued (see [`turns`]).
const FIELD_QUEUED: &str = "queued_id";
/// What the streams of jobs taken out of turn start with, after the prefix.
const TAKEN: &str = "taken:";

/// Tuning of [`RedisQueue`]. The defaults suit production; tests shorten the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisQueueOptions {
    /// How long a delivered job may go without a lease renewal (its process is gone)
    /// before another consumer takes it over. Default 60 s.
    pub lease: Duration,
    /// How many times one job may be handed out, the first delivery included, before the
    /// queue gives up on it and reports it as a dead letter. Default 3.
    pub max_deliveries: u32,
    /// The longest one `XREADGROUP` blocks; an idle consumer looks for stale jobs this
    /// often. Capped at half the lease and at 10 s. Default 5 s.
    pub block: Duration,
    /// How many times a job may be put back at the end of its lane because the consumer
    /// that got it is on the job's avoid list; after that it runs where it lands.
    /// Default 3.
    pub max_avoid_passes: u32,
    /// How waiting jobs are promoted (`[scheduler] aging_s`). Default 60 s.
    pub aging: Aging,
}

impl Default for RedisQueueOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            max_deliveries: 3,
            block: Duration::from_secs(5),
            max_avoid_passes: 3,
            aging: Aging::default(),
        }
    }
}

/// The cluster-mode queue. Cheap to share behind an `Arc`; drop stops its lease keeper.
#[derive(Debug)]
pub struct RedisQueue {
    inner: Arc<Inner>,
    _keeper: AbortOnDropHandle<()>,
}

#[derive(Debug)]
struct Inner {
    redis: Redis,
    prefix: String,
    options: RedisQueueOptions,
    /// Makes this instance's consumer names unique among live and dead processes.
    instance: String,
    /// Streams whose consumer group this instance created or found.
    groups: Mutex<HashSet<String>>,
    /// Where the next `XAUTOCLAIM` of each stream starts.
    cursors: Mutex<HashMap<String, String>>,
    /// Jobs read in one call beyond the one returned, per worker, oldest first.
    held: Mutex<HashMap<WorkerName, Vec<Taken>>>,
    /// Every entry this instance holds (held or running): (stream key, id) → consumer.
    leases: Mutex<HashMap<(String, String), String>>,
    /// This process's clock against Redis's, which stream ids and entries are read by;
    /// shared with the process's heartbeats and directory ([`RedisQueue::clock`]).
    clock: Arc<clock::RedisClock>,
}

impl RedisQueue {
    /// Connects to `url` (`redis://host:6379/0`). Every key starts with `prefix` (empty in
    /// production; tests use a unique one).
    pub async fn connect(
        url: &str,
        prefix: &str,
        options: RedisQueueOptions,
    ) -> Result<Self, QueueError> {
        let redis = Redis::connect(url).await.map_err(backend)?;
        let suffix = uuid::Uuid::now_v7().simple().to_string();
        let instance = format!("{}-{}", std::process::id(), &suffix[suffix.len() - 8..]);
        let inner = Arc::new(Inner {
            redis,
            prefix: prefix.to_owned(),
            options,
            instance,
            groups: Mutex::default(),
            cursors: Mutex::default(),
            held: Mutex::default(),
            leases: Mutex::default(),
            clock: Arc::default(),
        });
        let every = (inner.options.lease / 3).max(Duration::from_millis(10));
        let keeper = tokio::spawn(keep_leases(Arc::downgrade(&inner), every));
        Ok(Self {
            inner,
            _keeper: AbortOnDropHandle::new(keeper),
        })
    }

    /// This process's reading of Redis's clock, for the other parts of the process that
    /// read times through it (heartbeats, the directory): one `TIME` every few seconds
    /// for all, and one reading.
    pub(crate) fn clock(&self) -> Arc<clock::RedisClock> {
        Arc::clone(&self.inner.clock)
    }

    /// Checks Redis answers (for readiness).
    pub async fn ping(&self) -> Result<(), QueueError> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.inner.redis.commands())
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// The consumer name this instance uses for `worker` in every group.
    pub fn consumer_name(&self, worker: &WorkerName) -> String {
        self.inner.consumer(worker)
    }

    /// The stream key of `lane`'s interactive jobs (and of jobs queued before priorities).
    pub fn stream_key(&self, lane: &Lane) -> String {
        self.inner.key(lane, Priority::Interactive)
    }

    /// The stream key of `lane`'s jobs of `priority`.
    pub fn class_stream_key(&self, lane: &Lane, priority: Priority) -> String {
        self.inner.key(lane, priority)
    }

    /// The stream key of `lane`'s jobs of `priority` queued again.
    pub fn requeued_stream_key(&self, lane: &Lane, priority: Priority) -> String {
        self.inner.requeued_key(lane, priority)
    }
}

fn backend(e: RedisError) -> QueueError {
    QueueError::Backend(e.to_string())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A delivery's receipt: the stream and the entry id, so `ack` finds the entry whichever
/// of the lane's streams it came from.
fn receipt(key: &str, id: &str) -> String {
    format!("{key} {id}")
}

/// The stream and entry id of a receipt ([`receipt`]); an id alone (no stream) is `None`.
fn from_receipt(receipt: &str) -> Option<(&str, &str)> {
    receipt.rsplit_once(' ')
}

impl Inner {
    /// The stream of `lane`'s jobs of `priority` (see the module doc).
    fn key(&self, lane: &Lane, priority: Priority) -> String {
        match priority {
            Priority::Interactive => format!("{}{lane}", self.prefix),
            other => format!("{}{other}:{lane}", self.prefix),
        }
    }

    /// The stream of `lane`'s jobs of `priority` queued again (see the module doc).
    fn requeued_key(&self, lane: &Lane, priority: Priority) -> String {
        match priority {
            Priority::Interactive => format!("{}{REQUEUED}{lane}", self.prefix),
            other => format!("{}{REQUEUED}{other}:{lane}", self.prefix),
        }
    }

    /// The stream `job` is queued to: its class's, or the one of jobs queued again when
    /// it has waited before.
    fn key_of(&self, job: &Job) -> String {
        match job.waiting_since {
            Some(_) => self.requeued_key(&job.lane, job.priority),
            None => self.key(&job.lane, job.priority),
        }
    }

    /// The stream of `lane`'s jobs of `priority` taken out of turn (see [`turns`]).
    fn taken_key(&self, lane: &Lane, priority: Priority) -> String {
        match priority {
            Priority::Interactive => format!("{}{TAKEN}{lane}", self.prefix),
            other => format!("{}{TAKEN}{other}:{lane}", self.prefix),
        }
    }

    /// Both streams of `lane`'s jobs of `priority` that hold waiting jobs: the fresh ones
    /// and those queued again.
    fn class_keys(&self, lane: &Lane, priority: Priority) -> [String; 2] {
        [self.key(lane, priority), self.requeued_key(lane, priority)]
    }

    /// Every stream of `lane`'s jobs of `priority`: [`Inner::class_keys`] and the one of
    /// jobs taken out of turn.
    fn all_class_keys(&self, lane: &Lane, priority: Priority) -> [String; 3] {
        let [fresh, again] = self.class_keys(lane, priority);
        [fresh, again, self.taken_key(lane, priority)]
    }

    /// The streams `takes` reads: each lane's of every class it takes there.
    fn keys(&self, takes: &Takes) -> Vec<String> {
        takes
            .lanes
            .iter()
            .flat_map(|l| {
                takes
                    .classes(l)
                    .iter()
                    .flat_map(move |p| self.all_class_keys(l, *p))
            })
            .collect()
    }

    /// The lane and class of a stream key, when it is one of this queue's.
    fn lane_of(&self, key: &str) -> Option<(Lane, Priority)> {
        let rest = key.strip_prefix(&self.prefix)?;
        let rest = rest.strip_prefix(REQUEUED).unwrap_or(rest);
        let rest = rest.strip_prefix(TAKEN).unwrap_or(rest);
        for p in [Priority::Background, Priority::Batch] {
            if let Some(lane) = rest
                .strip_prefix(p.as_str())
                .and_then(|r| r.strip_prefix(':'))
            {
                return Lane::parse(lane).ok().map(|l| (l, p));
            }
        }
        Lane::parse(rest).ok().map(|l| (l, Priority::Interactive))
    }

    fn consumer(&self, worker: &WorkerName) -> String {
        format!("{worker}#{}", self.instance)
    }

    fn block(&self) -> Duration {
        self.options
            .block
            .min(self.options.lease / 2)
            .min(MAX_BLOCK)
            .max(Duration::from_millis(1))
    }

    /// Creates the consumer group of each stream not known to have one.
    async fn ensure_groups(&self, keys: &[String]) -> RedisResult<()> {
        let missing: Vec<String> = {
            let known = lock(&self.groups);
            keys.iter()
                .filter(|k| !known.contains(*k))
                .cloned()
                .collect()
        };
        for key in missing {
            let created: RedisResult<()> = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(&key)
                .arg(GROUP)
                .arg("0")
                .arg("MKSTREAM")
                .query_async(&mut self.redis.commands())
                .await;
            match created {
                Ok(()) => {}
                Err(e) if e.code() == Some("BUSYGROUP") => {}
                Err(e) => return Err(e),
            }
            lock(&self.groups).insert(key);
        }
        Ok(())
    }

    fn forget_groups(&self) {
        lock(&self.groups).clear();
        lock(&self.cursors).clear();
    }

    /// One round of `dequeue` (what it takes: [`Inner::pick`]). `Ok(None)` when nothing
    /// came or what came was not for this worker.
    async fn next(&self, worker: &WorkerName, keys: &[String]) -> RedisResult<Option<Delivery>> {
        let consumer = self.consumer(worker);
        // Stream ids and the jobs' times are read on this clock through Redis's.
        let ahead = self.clock.ask_if_stale(&mut self.redis.commands()).await;
        let mut taken = self.pick(worker, keys, &consumer, ahead).await?;
        // From here until a delivery is returned or held, this instance keeps the
        // entries alive; the guard below gives the first one up on any exit.
        self.lease(&taken, &consumer);
        let now = take::now_ms(ahead);
        taken.sort_by_key(|t| t.order(self.options.aging, now));
        let mut taken = taken.into_iter();
        let Some(first) = taken.next() else {
            return Ok(None);
        };
        self.hold(worker, taken.collect());
        let mut guard = Unleased {
            inner: self,
            key: first.key.clone(),
            id: first.id.clone(),
            armed: true,
        };
        let delivery = self.screen(first, worker, ahead).await?;
        guard.armed = delivery.is_none();
        if let Some(d) = delivery.as_ref().filter(|d| d.dead_letter.is_none()) {
            // Its person's turn is taken (see `turns`); a failure here loses no job, only
            // the place of this take among the people's.
            if let Err(e) = self.mark_served(&d.job.person, take::now_ms(ahead)).await {
                tracing::warn!(task_id = %d.job.task_id, error = %e, "could not record whose turn was taken");
            }
        }
        Ok(delivery)
    }

    /// Turns an entry into a delivery (its times on this clock, where Redis's reads
    /// `ahead`), or deals with it here: an unreadable job is dropped, a job that must
    /// avoid this worker is put back.
    async fn screen(
        &self,
        t: Taken,
        worker: &WorkerName,
        ahead: chrono::TimeDelta,
    ) -> RedisResult<Option<Delivery>> {
        let Some(job) = t.job.clone() else {
            tracing::error!(stream = %t.key, entry = %t.id, "queue entry holds no readable job; dropped");
            self.remove(&t.key, &t.id).await?;
            return Ok(None);
        };
        let job = t.on_this_clock(job, ahead);
        if t.deliveries > self.options.max_deliveries {
            let reason = format!(
                "the task was handed to a worker {} times and no worker finished it \
                 (each stopped or lost contact); it is not tried again",
                t.deliveries
            );
            tracing::warn!(task_id = %job.task_id, deliveries = t.deliveries, "job over the delivery limit; reported as a dead letter");
            return Ok(Some(Delivery {
                receipt: receipt(&t.key, &t.id),
                job,
                deliveries: t.deliveries,
                dead_letter: Some(reason),
                claimed: false,
                span: None,
                running: None,
            }));
        }
        if job.avoids(worker, chrono::Utc::now()) && t.passes < self.options.max_avoid_passes {
            self.pass_on(&t, &job, ahead).await?;
            tracing::debug!(task_id = %job.task_id, worker = %worker, "job avoids this worker; put back in its lane");
            return Ok(None);
        }
        Ok(Some(Delivery {
            receipt: receipt(&t.key, &t.id),
            job,
            deliveries: t.deliveries.max(1),
            dead_letter: None,
            claimed: false,
            span: None,
            running: None,
        }))
    }

    /// Re-adds `job` (with when it began to wait, its times on this clock, where Redis's
    /// reads `ahead`) at the end of its stream and removes the original, atomically. The
    /// end, not its place by age: the worker it avoids takes others first, which gives the
    /// workers it waits for time to free up.
    async fn pass_on(&self, t: &Taken, job: &Job, ahead: chrono::TimeDelta) -> RedisResult<()> {
        let text = serde_json::to_string(job).ok();
        let mut add = turns::add(self, &t.key, &job.person);
        add.arg(FIELD_JOB)
            .arg(text.as_deref().or(t.text.as_deref()).unwrap_or_default())
            .arg(FIELD_PASSES)
            .arg(t.passes + 1);
        if text.is_some() {
            // The job as read here: on this process's clock.
            add.arg(FIELD_AHEAD).arg(ahead.num_milliseconds());
        } else if let Some(writer) = t.writer_ahead_ms {
            add.arg(FIELD_AHEAD).arg(writer);
        }
        if let Some(queued) = &t.queued_id {
            add.arg(FIELD_QUEUED).arg(queued);
        }
        let mut pipe = redis::pipe();
        pipe.atomic().add_command(add);
        pipe.ignore()
            .cmd("XACK")
            .arg(&t.key)
            .arg(GROUP)
            .arg(&t.id)
            .ignore()
            .cmd("XDEL")
            .arg(&t.key)
            .arg(&t.id)
            .ignore()
            .cmd("XDEL")
            .arg(self.who_key(&t.key))
            .arg(&t.id)
            .ignore();
        pipe.query_async::<()>(&mut self.redis.commands()).await?;
        self.release(&t.key, &t.id);
        Ok(())
    }

    /// Acknowledges and deletes an entry.
    async fn remove(&self, key: &str, id: &str) -> RedisResult<()> {
        self.release(key, id);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("XACK")
            .arg(key)
            .arg(GROUP)
            .arg(id)
            .ignore()
            .cmd("XDEL")
            .arg(key)
            .arg(id)
            .ignore()
            .cmd("XDEL")
            .arg(self.who_key(key))
            .arg(id)
            .ignore();
        pipe.query_async::<()>(&mut self.redis.commands()).await
    }
}

#[async_trait]
impl Queue for RedisQueue {
    /// `XADD` to the job's lane (to its stream of jobs queued again when it waited
    /// before). Retried briefly while the connection is re-established; a retry after a
    /// lost reply may add the job twice, which at-least-once delivery and the store's
    /// idempotent `claim`/`finish` absorb.
    async fn enqueue(&self, job: Job) -> Result<(), QueueError> {
        let inner = &self.inner;
        let key = inner.key_of(&job);
        let text = serde_json::to_string(&job)
            .map_err(|e| QueueError::Backend(format!("cannot serialise the job: {e}")))?;
        with_retries(|| async {
            inner.ensure_groups(std::slice::from_ref(&key)).await?;
            let mut conn = inner.redis.commands();
            let ahead = inner.clock.ask_if_stale(&mut conn).await;
            turns::add(inner, &key, &job.person)
                .arg(FIELD_JOB)
                .arg(&text)
                .arg(FIELD_PASSES)
                .arg(0)
                .arg(FIELD_AHEAD)
                .arg(ahead.num_milliseconds())
                .query_async::<String>(&mut conn)
                .await
        })
        .await
        .map_err(backend)?;
        Ok(())
    }

    /// Waits for the next job from any of `lanes`, oldest first among what one read
    /// returns. Redis trouble does not end the wait: it logs, backs off and tries again
    /// (re-creating consumer groups a restart lost) until Redis answers; only errors a
    /// retry cannot fix are returned.
    ///
    /// Cancel safety: dropping the future while it blocks cancels the read on the server,
    /// so no job is lost. If the drop comes just after Redis handed a job over, the job
    /// stays pending without a lease renewal and another consumer takes it over after
    /// the lease: delayed, not lost.
    async fn dequeue_from(
        &self,
        takes: &Takes,
        consumer: &WorkerName,
    ) -> Result<Delivery, QueueError> {
        let inner = &self.inner;
        let keys = inner.keys(takes);
        if keys.is_empty() {
            return std::future::pending().await;
        }
        let mut backoff = Backoff::new();
        loop {
            match inner.next(consumer, &keys).await {
                Ok(Some(delivery)) => return Ok(delivery),
                Ok(None) => backoff.reset(),
                Err(e) if is_no_group(&e) => {
                    tracing::warn!(worker = %consumer, "consumer groups are gone (Redis restarted?); creating them again");
                    inner.forget_groups();
                    backoff.wait().await;
                }
                Err(e) if is_transient(&e) => {
                    tracing::warn!(worker = %consumer, error = %e, "queue unreachable; trying again");
                    backoff.wait().await;
                }
                Err(e) => return Err(backend(e)),
            }
        }
    }

    /// `XACK` + `XDEL` of the receipt's entry. A job whose group or stream is gone (Redis
    /// restarted) counts as acknowledged.
    async fn ack(&self, delivery: &Delivery) -> Result<(), QueueError> {
        let Some((key, id)) = from_receipt(&delivery.receipt) else {
            return Err(QueueError::Backend(format!(
                "{:?} is not a receipt of this queue",
                delivery.receipt
            )));
        };
        let done = with_retries(|| self.inner.remove(key, id)).await;
        match done {
            Err(e) if !is_no_group(&e) => Err(backend(e)),
            _ => Ok(()),
        }
    }

    /// Looks at the first waiting entry of each lane's interactive stream (one script).
    async fn awaited(&self, lanes: &[Lane]) -> Result<Vec<Lane>, QueueError> {
        inventory::awaited(&self.inner, lanes).await
    }

    /// Jobs waiting (not yet handed out) per lane and class: the entries after each
    /// group's last delivered id; those with none are left out.
    async fn class_depths(&self) -> Result<Vec<(Lane, Priority, usize)>, QueueError> {
        inventory::class_depths(&self.inner).await
    }

    async fn ahead(
        &self,
        lane: &Lane,
        priority: Priority,
        person: &crate::domain::Person,
    ) -> Result<crate::placement::Ahead, QueueError> {
        inventory::ahead(&self.inner, lane, priority, person, false).await
    }

    /// As [`Self::ahead`] for a fresh job of `job`'s class and person, `job` itself (taken,
    /// so pending) not counted among its person's running jobs.
    async fn ahead_of(
        &self,
        lane: &Lane,
        job: &Job,
    ) -> Result<crate::placement::Ahead, QueueError> {
        inventory::ahead(&self.inner, lane, job.priority, &job.person, true).await
    }

    /// Each person's entries per lane and class: those after each group's last delivered
    /// id wait, the group's pending ones run.
    async fn people_depths(&self) -> Result<Vec<super::Depth>, QueueError> {
        inventory::people_depths(&self.inner, None).await
    }

    /// Counts the waiting entries of `lane`'s streams (those after each group's last
    /// delivered id) that go before the task's, by [`Aging::rank`] and age now.
    async fn position(&self, lane: &Lane, task_id: TaskId) -> Result<Option<usize>, QueueError> {
        inventory::position(&self.inner, lane, task_id).await
    }

    async fn ping(&self) -> Result<(), QueueError> {
        RedisQueue::ping(self).await
    }

    async fn task_ids(&self) -> Result<HashSet<TaskId>, QueueError> {
        inventory::task_ids(&self.inner).await
    }

    /// Deletes the task's entry from its class's streams (fresh and queued again) in one
    /// script, unless the group has delivered it.
    async fn withdraw(
        &self,
        lane: &Lane,
        priority: Priority,
        task_id: TaskId,
    ) -> Result<bool, QueueError> {
        inventory::withdraw(&self.inner, lane, priority, task_id).await
    }
}

#[cfg(test)]
mod avoid_tests;
#[cfg(test)]
mod priority_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod turns_tests;
