//! The dispatch seam: records a task, starts it, tells the caller when its row is durable,
//! and cancels it.
//!
//! Sits between the service (which routes a turn and composes the worker's request) and
//! the workers in the request flow. Chosen once at start-up, with the queue:
//! - [`Embedded`] (in-process queue): every consumer runs in this process and writes
//!   through the same store handle, so a job may start while its row is still being
//!   committed (the store orders the worker's later writes after the insert), and a fresh
//!   job goes straight to a free local worker without passing through the queue;
//! - [`Cluster`] (Redis Streams): another process may take the job at once, so the row is
//!   durable before the job is queued.
//!
//! Nothing outside this module knows which: the service calls [`Dispatcher::dispatch`]
//! and gets the task's events back, and [`Dispatcher::cancel`] stops a task wherever it is.

pub mod cancel;
mod cluster;
mod embedded;

use std::sync::Arc;

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use cancel::Cancels;
pub use cluster::{CancelChannel, Cluster};
pub use embedded::Embedded;

use crate::domain::{TaskId, WorkerName};
use crate::events::{EventBus, EventStream, TaskEvent};
use crate::queue::in_process::InProcessQueue;
use crate::queue::{Job, Queue, QueueError};
use crate::store::{NewTask, StoreError, TaskStore};
use crate::worker::Worker;

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not queue task {task_id}: {source}")]
    Queue { task_id: TaskId, source: QueueError },
}

/// When [`Dispatcher::dispatch`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Once the task's row is durable: the caller answers with the task id only
    /// (`POST /route`).
    Recorded,
    /// As soon as the task is started or queued, while its row may still be being
    /// written: the caller waits for the answer. The events then hold back every piece of
    /// the answer (and any failure) until the row is durable, and end with the store's
    /// error if it could not be written: a client never hears an answer to a task that
    /// was not recorded.
    Started,
}

/// What [`Dispatcher::cancel`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// It was queued or running, and is now cancelled.
    Cancelled,
    /// It had already ended (done, failed or cancelled before).
    AlreadyEnded,
    /// No such task.
    Unknown,
}

/// How tasks are recorded and started in this process: one of the two modes.
#[derive(Clone)]
pub enum Dispatcher {
    Embedded(Embedded),
    Cluster(Cluster),
}

impl Dispatcher {
    /// Embedded mode: the in-process queue, and this process's workers for direct hand-off.
    pub fn embedded(
        store: Arc<dyn TaskStore>,
        queue: Arc<InProcessQueue>,
        events: Arc<dyn EventBus>,
    ) -> Self {
        Self::Embedded(Embedded::new(store, queue, events))
    }

    /// Cluster mode: a queue that other processes consume, and the channel that tells
    /// their workers of cancellations (`None`: this process's workers alone hear them).
    pub fn cluster(
        store: Arc<dyn TaskStore>,
        queue: Arc<dyn Queue>,
        events: Arc<dyn EventBus>,
        cancel: Option<CancelChannel>,
    ) -> Self {
        Self::Cluster(Cluster::new(store, queue, events, cancel))
    }

    /// Records `task` and starts `job`, expected to run on `expected` (the pinned worker,
    /// or the best candidate now); returns the task's events from the first, at the point
    /// `until` says. A task is never left recorded but not started: a caller that goes
    /// away meanwhile (a client that disconnects) does not interrupt the two.
    pub async fn dispatch(
        &self,
        task: NewTask,
        job: Job,
        expected: Option<&WorkerName>,
        until: Until,
    ) -> Result<EventStream, DispatchError> {
        match self {
            Self::Embedded(e) => e.dispatch(task, job, expected, until).await,
            Self::Cluster(c) => c.dispatch(task, job).await,
        }
    }

    /// About how many tasks wait in `lane` to be started: exactly in embedded mode; in
    /// cluster mode from the queue's depths read at most twice a second, plus what this
    /// process queued since.
    pub async fn waiting(&self, lane: &crate::domain::Lane) -> usize {
        match self {
            Self::Embedded(e) => e.waiting(lane),
            Self::Cluster(c) => c.waiting(lane).await,
        }
    }

    /// How many tasks `person` has waiting, in every lane: exactly in embedded mode (the
    /// in-process queue counts them); in cluster mode from the store's count, read at
    /// most twice a second, plus what this process queued since.
    pub async fn waiting_of(&self, person: &crate::domain::Person) -> usize {
        match self {
            Self::Embedded(e) => e.waiting_of(person),
            Self::Cluster(c) => c.waiting_of(person).await,
        }
    }

    /// What waits before a fresh job of `priority` in `lane`, for placement: the lane's
    /// jobs it would be taken after, and each machine's own backlog (the jobs of lanes only
    /// that machine among `statuses` serves: see [`crate::placement::backlog`]). Exactly,
    /// with their prompts, in embedded mode (one pass over the in-process queue); in
    /// cluster mode the waiting jobs of the classes it goes after (its own and the better
    /// ones: their ages are not known there), and in its own class those of the people
    /// whose turn comes first ([`crate::queue::turns::ahead_in_turn`]), from the depths
    /// [`Self::waiting`] reads (no Redis round trip on the request path; the worker that
    /// takes the job asks the queue itself).
    pub async fn ahead(
        &self,
        lane: &crate::domain::Lane,
        priority: crate::domain::Priority,
        person: &crate::domain::Person,
        statuses: &[crate::backend::registry::WorkerStatus],
    ) -> crate::placement::Waiting {
        match self {
            Self::Embedded(e) => e.ahead(lane, priority, person, statuses),
            Self::Cluster(c) => c.ahead(lane, priority, person, statuses).await,
        }
    }

    /// What waits before task `task_id`, of `priority`, waiting in `lane`, for its
    /// expected wait: as [`Self::ahead`] counts it, but in embedded mode of the jobs the
    /// queue takes before this one (a job of another lane queued after it does not hold it
    /// up); in cluster mode as for a fresh job (the depths say nothing of the order).
    pub async fn ahead_of_waiting(
        &self,
        lane: &crate::domain::Lane,
        task_id: TaskId,
        priority: crate::domain::Priority,
        person: &crate::domain::Person,
        statuses: &[crate::backend::registry::WorkerStatus],
    ) -> crate::placement::Waiting {
        match self {
            Self::Embedded(e) => e.ahead_of_waiting(lane, task_id, priority, person, statuses),
            Self::Cluster(c) => c.ahead(lane, priority, person, statuses).await,
        }
    }

    /// Records a task that is finished already (an internal task answered by rules);
    /// returns once its row is durable.
    pub async fn record_finished(&self, task: NewTask) -> Result<(), DispatchError> {
        self.store().insert(task).await?.await?;
        Ok(())
    }

    /// Cancels task `id` for `reason` (safe to show): a queued job of it never starts, a
    /// running one stops and its backend call is dropped, and whoever waits for the answer
    /// hears that it was cancelled. The row ends `cancelled` with the reason (as its
    /// `error`); the worker that ran it then adds what it had sent its client
    /// ([`TaskStore::record_partial`]). A task that already ended is left as it is.
    ///
    /// This process's workers are told first, before the row is written: the backend
    /// call stops without waiting for the store, and the worker's write of the partial
    /// answer gives the same row before or after the cancel's ([`TaskStore::cancel`]).
    /// Other processes' workers are told once the row's write is ordered. Telling them of
    /// a task that had ended changes nothing: it runs nowhere.
    ///
    /// A job still waiting leaves the queue once the row is durably cancelled: the tasks
    /// behind it move up at once (their places, expected waits and the bounds count it no
    /// more). In cluster mode one that a worker's read took already is skipped by it.
    pub async fn cancel(&self, id: TaskId, reason: &str) -> Result<Cancelled, DispatchError> {
        self.cancels().cancel(id);
        let message = format!("task {id} was cancelled: {reason}");
        let recording = self.store().cancel(id, Utc::now(), &message).await?;
        if let Self::Cluster(c) = self {
            c.cancel(id).await;
        }
        if !recording.await? {
            return Ok(match self.store().get(id).await? {
                Some(_) => Cancelled::AlreadyEnded,
                None => Cancelled::Unknown,
            });
        }
        match self {
            Self::Embedded(e) => e.withdraw(id),
            Self::Cluster(c) => c.withdraw(id).await,
        }
        self.events()
            .publish(id, TaskEvent::Failed { message })
            .await;
        tracing::info!(task_id = %id, reason, "task cancelled");
        Ok(Cancelled::Cancelled)
    }

    /// Cluster mode: what hears the cancellations other processes publish, to run until
    /// `stop` beside this process's workers.
    pub fn cancel_listener(
        &self,
        stop: CancellationToken,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        match self {
            Self::Embedded(_) => None,
            Self::Cluster(c) => c.listener(stop),
        }
    }

    /// This process's cancellations, which its workers watch.
    pub fn cancels(&self) -> &Cancels {
        match self {
            Self::Embedded(e) => e.cancels(),
            Self::Cluster(c) => c.cancels(),
        }
    }

    /// Makes `worker` (of this process) available for direct hand-off until `stop`; its
    /// jobs are tracked by `tracker`. Only embedded mode hands jobs over directly: in
    /// cluster mode every job goes through the shared queue.
    pub fn adopt(&self, worker: Worker, tracker: TaskTracker, stop: CancellationToken) {
        if let Self::Embedded(e) = self {
            e.adopt(worker, tracker, stop);
        }
    }

    pub fn store(&self) -> &Arc<dyn TaskStore> {
        match self {
            Self::Embedded(e) => e.store(),
            Self::Cluster(c) => c.store(),
        }
    }

    /// The queue the workers take from (and recovery puts unfinished tasks back on).
    pub fn queue(&self) -> Arc<dyn Queue> {
        match self {
            Self::Embedded(e) => e.queue(),
            Self::Cluster(c) => c.queue(),
        }
    }

    pub fn events(&self) -> &Arc<dyn EventBus> {
        match self {
            Self::Embedded(e) => e.events(),
            Self::Cluster(c) => c.events(),
        }
    }
}

/// Runs `work` in a task of its own and waits for it: dropping the caller (a client that
/// went away) does not cancel it.
async fn spawn_to_completion<T: Send + 'static>(
    task_id: TaskId,
    work: impl Future<Output = Result<T, DispatchError>> + Send + 'static,
) -> Result<T, DispatchError> {
    match tokio::spawn(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only when the runtime is shutting down.
        Err(_) => Err(DispatchError::Queue {
            task_id,
            source: QueueError::Closed,
        }),
    }
}
