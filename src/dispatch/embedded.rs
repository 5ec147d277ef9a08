//! Embedded mode: the job starts while its row is being committed.
//!
//! Every consumer of the in-process queue runs in this process and writes through the same
//! store handle, which orders their writes after the insert: a claim made after the insert
//! sees the row even before it is committed. So the job is handed to a free local worker
//! (its row written already claimed by it) or queued as soon as the insert is ordered, and
//! whoever waits for the answer hears it only once the row is durable ([`HeldUntilRecorded`]).

use std::sync::Arc;
use std::task::Poll;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::cancel::Cancels;
use super::held::HeldUntilRecorded;
use super::local::{LocalWorkers, Reservation};
use super::{DispatchError, Until, spawn_to_completion};
use crate::domain::{TaskStatus, WorkerName};
use crate::events::{EventBus, EventStream};
use crate::queue::in_process::InProcessQueue;
use crate::queue::{Job, Queue};
use crate::store::{NewTask, TaskStore};
use crate::worker::Worker;

#[derive(Clone)]
pub struct Embedded {
    store: Arc<dyn TaskStore>,
    queue: Arc<InProcessQueue>,
    events: Arc<dyn EventBus>,
    local: LocalWorkers,
    cancels: Cancels,
}

/// A job ready to start: on the worker holding a slot for it, or into its lane.
struct Start {
    job: Job,
    reservation: Option<Reservation>,
    queue: Arc<InProcessQueue>,
}

impl Start {
    fn now(self) {
        match self.reservation {
            Some(r) => r.start(self.job),
            None => self.queue.push(self.job),
        }
    }
}

impl Embedded {
    pub(super) fn new(
        store: Arc<dyn TaskStore>,
        queue: Arc<InProcessQueue>,
        events: Arc<dyn EventBus>,
    ) -> Self {
        Self {
            store,
            queue,
            events,
            local: LocalWorkers::default(),
            cancels: Cancels::default(),
        }
    }

    /// Hands `job` to `expected` directly when that worker runs here with a free slot and
    /// nobody waits in the lane (the row is then written already claimed by it), queues it
    /// otherwise.
    ///
    /// A task is never left recorded but not started: when the store orders the insert at
    /// its first poll (a local writer with room), nothing is awaited between it and the
    /// job's start; otherwise both run in a task of their own, which a client going away
    /// does not cancel. If the insert fails after it was ordered, a queued job's claim finds
    /// no row and is skipped; either way the client hears the store's error.
    pub(super) async fn dispatch(
        &self,
        mut task: NewTask,
        job: Job,
        expected: Option<&WorkerName>,
        until: Until,
    ) -> Result<EventStream, DispatchError> {
        let task_id = task.task_id;
        let reservation = expected
            .filter(|_| self.queue.is_empty(&job.lane))
            .and_then(|w| self.local.reserve(w, &job.lane));
        if let Some(r) = &reservation {
            task.status = TaskStatus::Running;
            task.worker_id = Some(r.worker().clone());
            task.attempts = 1;
        }
        // Subscribed before the job can start, so that no event is missed.
        let events = self.events.subscribe(task_id).await;
        let start = Start {
            job,
            reservation,
            queue: self.queue.clone(),
        };
        let store = self.store.clone();
        let mut insert = Box::pin(async move { store.insert(task).await });
        let recording = match futures::poll!(insert.as_mut()) {
            Poll::Ready(ordered) => {
                let recording = ordered?;
                start.now();
                recording
            }
            Poll::Pending => {
                spawn_to_completion(task_id, async move {
                    let recording = insert.await?;
                    start.now();
                    Ok(recording)
                })
                .await?
            }
        };
        Ok(match until {
            Until::Recorded => {
                recording.await?;
                events
            }
            Until::Started => Box::pin(HeldUntilRecorded::new(task_id, events, recording)),
        })
    }

    pub(super) fn adopt(&self, worker: Worker, tracker: TaskTracker, stop: CancellationToken) {
        self.local.add(worker, tracker, stop);
    }

    pub(super) fn cancels(&self) -> &Cancels {
        &self.cancels
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
