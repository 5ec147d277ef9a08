//! Cluster mode: the row is durable before the job is queued, since a worker in another
//! process may take it at once and must find the row.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cancel::{self, Cancels};
use super::{DispatchError, spawn_to_completion};
use crate::domain::{Lane, TaskId};
use crate::events::{EventBus, EventStream};
use crate::queue::redis::connection::Redis;
use crate::queue::{Job, Queue};
use crate::store::{NewTask, TaskStore};

#[derive(Clone)]
pub struct Cluster {
    store: Arc<dyn TaskStore>,
    queue: Arc<dyn Queue>,
    events: Arc<dyn EventBus>,
    cancels: Cancels,
    cancel: Option<CancelChannel>,
    backlog: Arc<Backlog>,
}

/// How long the queue's depths, as last read, stand for the backlog.
const BACKLOG_FRESH_FOR: Duration = Duration::from_millis(500);

/// What waits in each lane, from the queue's depths read at most every
/// [`BACKLOG_FRESH_FOR`] plus the tasks this process queued since: a bound on a lane holds
/// without a round trip to Redis for every request.
#[derive(Default)]
struct Backlog {
    /// Held while the depths are read, so that one request reads them for all.
    reading: tokio::sync::Mutex<()>,
    seen: std::sync::Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    at: Option<Instant>,
    depths: HashMap<Lane, usize>,
    queued_since: HashMap<Lane, usize>,
}

impl Backlog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_fresh(seen: &Seen) -> bool {
        seen.at.is_some_and(|at| at.elapsed() < BACKLOG_FRESH_FOR)
    }

    fn estimate(&self, lane: &Lane) -> Option<usize> {
        let seen = self.lock();
        Self::is_fresh(&seen).then(|| {
            seen.depths.get(lane).copied().unwrap_or(0)
                + seen.queued_since.get(lane).copied().unwrap_or(0)
        })
    }

    /// Reads the queue's depths again when the last read is stale (one request reads them
    /// for all).
    async fn refresh(&self, queue: &dyn Queue) {
        if Self::is_fresh(&self.lock()) {
            return;
        }
        let _reading = self.reading.lock().await;
        if Self::is_fresh(&self.lock()) {
            return;
        }
        match queue.depths().await {
            Ok(depths) => {
                let mut seen = self.lock();
                seen.depths = depths.into_iter().collect();
                seen.queued_since.clear();
                seen.at = Some(Instant::now());
            }
            // A queue that cannot be read bounds nothing; queueing then fails on its own.
            Err(e) => tracing::warn!(error = %e, "could not read the queue's depths"),
        }
    }

    async fn waiting(&self, queue: &dyn Queue, lane: &Lane) -> usize {
        self.refresh(queue).await;
        self.estimate(lane).unwrap_or(0)
    }

    /// Calls `visit` with every lane that holds waiting jobs and how many (see
    /// [`Self::waiting`]); with none when the depths cannot be read.
    async fn each(&self, queue: &dyn Queue, mut visit: impl FnMut(&Lane, usize)) {
        self.refresh(queue).await;
        let seen = self.lock();
        if !Self::is_fresh(&seen) {
            return;
        }
        for (lane, n) in &seen.depths {
            visit(lane, n + seen.queued_since.get(lane).copied().unwrap_or(0));
        }
        for (lane, n) in &seen.queued_since {
            if !seen.depths.contains_key(lane) {
                visit(lane, *n);
            }
        }
    }

    fn queued(&self, lane: &Lane) {
        *self.lock().queued_since.entry(lane.clone()).or_default() += 1;
    }
}

/// Where cancellations are published for every process's workers: the Redis of the queue,
/// under its key prefix.
#[derive(Clone)]
pub struct CancelChannel {
    pub(super) redis: Arc<Redis>,
    pub(super) url: String,
    pub(super) prefix: String,
}

impl CancelChannel {
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        Ok(Self {
            redis: Arc::new(Redis::connect(url).await?),
            url: url.to_owned(),
            prefix: prefix.to_owned(),
        })
    }
}

impl Cluster {
    pub(super) fn new(
        store: Arc<dyn TaskStore>,
        queue: Arc<dyn Queue>,
        events: Arc<dyn EventBus>,
        cancel: Option<CancelChannel>,
    ) -> Self {
        Self {
            store,
            queue,
            events,
            cancels: Cancels::default(),
            cancel,
            backlog: Arc::default(),
        }
    }

    /// About how many tasks wait in `lane`, across every process (see [`Backlog`]).
    pub(super) async fn waiting(&self, lane: &Lane) -> usize {
        self.backlog.waiting(self.queue.as_ref(), lane).await
    }

    /// What waits before a job in `lane` (see [`super::Dispatcher::ahead`]): from the
    /// lanes' depths, every class counted, their prompts unknown.
    pub(super) async fn ahead(
        &self,
        lane: &Lane,
        statuses: &[crate::backend::registry::WorkerStatus],
    ) -> crate::placement::Waiting {
        let mut waiting = crate::placement::Waiting::default();
        self.backlog
            .each(self.queue.as_ref(), |l, n| {
                waiting.count(statuses, lane, l, crate::placement::Ahead::jobs(n));
            })
            .await;
        waiting
    }

    /// Tells the other processes' workers that task `id` was cancelled (this one's are
    /// told directly, through [`Cancels`]).
    pub(super) async fn cancel(&self, id: TaskId) {
        let Some(channel) = &self.cancel else { return };
        let published: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(cancel::channel(&channel.prefix))
            .arg(id.to_string())
            .query_async(&mut channel.redis.commands())
            .await;
        if let Err(e) = published {
            // The row has ended: a worker elsewhere that still runs it has its result refused.
            tracing::warn!(task_id = %id, error = %e, "could not tell other processes of a cancellation");
        }
    }

    /// Hears the cancellations other processes publish, until `stop` (see [`cancel::listen`]).
    pub(super) fn listener(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        let channel = self.cancel.clone()?;
        Some(cancel::listen(
            channel.url,
            channel.prefix,
            self.cancels.clone(),
            stop,
        ))
    }

    pub(super) fn cancels(&self) -> &Cancels {
        &self.cancels
    }

    /// Inserts the row, waits until it is durable, subscribes to the task's events and
    /// queues the job, all in a task of its own that a client going away does not cancel.
    pub(super) async fn dispatch(
        &self,
        task: NewTask,
        job: Job,
    ) -> Result<EventStream, DispatchError> {
        let task_id = task.task_id;
        self.backlog.queued(&job.lane);
        let (store, events, queue) = (self.store.clone(), self.events.clone(), self.queue.clone());
        spawn_to_completion(task_id, async move {
            store.insert(task).await?.await?;
            let events = events.subscribe(task_id).await;
            queue
                .enqueue(job)
                .await
                .map_err(|source| DispatchError::Queue { task_id, source })?;
            Ok(events)
        })
        .await
    }

    pub(super) fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    pub(super) fn queue(&self) -> Arc<dyn Queue> {
        self.queue.clone()
    }

    pub(super) fn events(&self) -> &Arc<dyn EventBus> {
        &self.events
    }
}
