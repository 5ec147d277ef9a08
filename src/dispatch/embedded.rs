//! Embedded mode: the job starts while its row is being committed.
//!
//! Every consumer of the in-process queue runs in this process and writes through the same
//! store handle, which orders their writes after the insert: a claim made after the insert
//! sees the row even before it is committed. So the job is handed to a free local worker
//! (its row written already claimed by it) or queued as soon as the insert is ordered, and
//! whoever waits for the answer hears it only once the row is durable ([`HeldUntilRecorded`]).
//!
//! Direct hand-off: the service and the workers share one process. When the worker
//! expected to run a task has a free slot and no job waiting in the task's lane would be
//! taken before it (by priority and age: `InProcessQueue::first_in_line`), the job
//! skips the queue: the dispatcher writes the task's row already claimed by that worker and
//! starts the job in a task of its own at once. That saves the queue's hand-off to the
//! worker loop and the claim's separate write: a thread wake-up or two and one SQLite
//! transaction per request (see docs/BENCHMARKS.md).
//! Anything else (no free slot, jobs waiting, a worker out for a cool-down, shutdown)
//! goes through the queue as before, so the queue's order and the backends' limits hold.

use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll, ready};

use futures::{FutureExt, Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::cancel::Cancels;
use super::{DispatchError, Until, spawn_to_completion};
use crate::domain::{Priority, TaskId, TaskStatus, WorkerName};
use crate::events::{EventBus, EventStream, TaskEvent};
use crate::queue::in_process::InProcessQueue;
use crate::queue::{Delivery, Job, Queue};
use crate::store::{Durable, NewTask, TaskStore};
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
    /// The task's span, for a worker the job is handed to directly.
    span: tracing::Span,
}

impl Start {
    fn now(self) {
        match self.reservation {
            Some(r) => {
                let running = self.queue.start_running(&self.job.person);
                r.start(self.job, self.span, running);
            }
            None => self.queue.push(self.job),
        }
    }
}

impl Embedded {
    /// How many tasks wait in `lane` (exactly: every consumer is in this process).
    pub(super) fn waiting(&self, lane: &crate::domain::Lane) -> usize {
        self.queue.waiting(lane)
    }

    /// Takes task `id`'s job out of the queue, if it waits there (its row has ended).
    pub(super) fn withdraw(&self, id: TaskId) {
        if self.queue.withdraw(id) {
            tracing::debug!(task_id = %id, "cancelled while waiting; taken out of the queue");
        }
    }

    /// How many tasks of `person` wait (exactly, as [`Self::waiting`]).
    pub(super) fn waiting_of(&self, person: &crate::domain::Person) -> usize {
        self.queue.waiting_of(person)
    }

    /// What waits before a fresh job of `priority` in `lane` (see [`super::Dispatcher::ahead`]).
    pub(super) fn ahead(
        &self,
        lane: &crate::domain::Lane,
        priority: crate::domain::Priority,
        person: &crate::domain::Person,
        statuses: &[crate::backend::registry::WorkerStatus],
    ) -> crate::placement::Waiting {
        self.queue.waiting_before(lane, priority, person, statuses)
    }

    /// What waits before task `task_id` in `lane` (see
    /// [`super::Dispatcher::ahead_of_waiting`]); for a fresh job of `priority` when it no
    /// longer waits there.
    pub(super) fn ahead_of_waiting(
        &self,
        lane: &crate::domain::Lane,
        task_id: TaskId,
        priority: crate::domain::Priority,
        person: &crate::domain::Person,
        statuses: &[crate::backend::registry::WorkerStatus],
    ) -> crate::placement::Waiting {
        self.queue
            .waiting_before_task(lane, task_id, statuses)
            .unwrap_or_else(|| self.ahead(lane, priority, person, statuses))
    }

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
    /// no job waiting in the lane would be taken before it (none waits, or only jobs of a
    /// worse effective priority; the row is then written already claimed by it), queues
    /// it otherwise.
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
            .filter(|_| {
                self.queue
                    .first_in_line(&job.lane, job.priority, &job.person)
            })
            .and_then(|w| self.local.reserve(w, &job, &self.queue));
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
            span: tracing::Span::current(),
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

/// This process's workers, as the dispatcher sees them. Cheap to clone; empty (and every
/// job queued) until the workers start, and in a process whose queue is shared.
#[derive(Clone, Default)]
pub struct LocalWorkers(Arc<RwLock<Vec<Local>>>);

#[derive(Clone)]
struct Local {
    worker: Worker,
    tracker: TaskTracker,
    stop: CancellationToken,
}

/// A slot held on a worker for one job, from before its row is written until it ends.
pub struct Reservation {
    local: Local,
    slot: crate::backend::slots::Slot,
}

impl LocalWorkers {
    /// Makes `worker` available for direct hand-over until `stop`; its jobs are tracked by
    /// `tracker` like those it takes from the queue.
    pub fn add(&self, worker: Worker, tracker: TaskTracker, stop: CancellationToken) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Local {
                worker,
                tracker,
                stop,
            });
    }

    /// A free slot on worker `name` for `job`, if it serves the job's lane, is healthy, is
    /// not stopping, and takes the job there now (background work is held back where it
    /// would push out a model people need: [`Worker::takes`]). The caller checks that no
    /// job waiting in the lane goes first.
    pub fn reserve(
        &self,
        name: &WorkerName,
        job: &Job,
        queue: &InProcessQueue,
    ) -> Option<Reservation> {
        let locals = self.0.read().unwrap_or_else(PoisonError::into_inner);
        let local = locals.iter().find(|l| l.worker.handle.name() == name)?;
        if local.stop.is_cancelled() || !local.worker.handle.is_healthy() {
            return None;
        }
        let takes_it = if job.priority == Priority::Interactive {
            local.worker.lanes().contains(&job.lane)
        } else {
            let takes = local.worker.takes_now(queue);
            takes.lanes.contains(&job.lane) && takes.allows(&job.lane, job.priority)
        };
        if !takes_it {
            return None;
        }
        let model = local.worker.answer_model(job);
        let slot = local.worker.handle.try_slot(&model)?;
        Some(Reservation {
            local: local.clone(),
            slot,
        })
    }
}

impl Reservation {
    pub fn worker(&self) -> &WorkerName {
        self.local.worker.handle.name()
    }

    /// Starts `job`, whose row was written claimed by this worker, in a task of its own.
    /// Returns at once.
    pub fn start(self, job: Job, span: tracing::Span, running: crate::queue::turns::Running) {
        let Self { local, slot } = self;
        local
            .worker
            .spawn_job(&local.tracker, Delivery::direct(job, span, running), slot);
    }
}

/// A task's events, of which the answer's pieces and any failure are held back until the
/// task's row is durable; if it could not be written, [`TaskEvent::Unrecorded`] is the last
/// event (and the store's error is logged).
/// `Started` and `Retrying` (news of the queue, not of the answer) pass at once.
///
/// The recording is looked at only when a held event is ready, so a row committed before
/// the answer's first piece arrives (the usual case: a backend takes longer than a local
/// write) costs the reader no extra wake-up.
pub(super) struct HeldUntilRecorded {
    task_id: TaskId,
    events: EventStream,
    state: State,
    /// The task's span (the one it is made in), for the one line it may log.
    span: tracing::Span,
}

enum State {
    /// Waiting for the recording; `held` is the event that waits with it (`Some(None)`:
    /// the events ended).
    Recording {
        recording: Durable,
        held: Option<Option<TaskEvent>>,
    },
    /// The row is durable: events pass as they come.
    Recorded,
    /// The row could not be written and the reader was told.
    Ended,
}

impl HeldUntilRecorded {
    pub(super) fn new(task_id: TaskId, events: EventStream, recording: Durable) -> Self {
        Self {
            task_id,
            events,
            state: State::Recording {
                recording,
                held: None,
            },
            span: tracing::Span::current(),
        }
    }
}

impl Stream for HeldUntilRecorded {
    type Item = TaskEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        let this = self.get_mut();
        let State::Recording { recording, held } = &mut this.state else {
            return match this.state {
                State::Ended => Poll::Ready(None),
                _ => this.events.poll_next_unpin(cx),
            };
        };
        let event = match held.take() {
            Some(event) => event,
            None => match ready!(this.events.poll_next_unpin(cx)) {
                Some(event @ (TaskEvent::Started { .. } | TaskEvent::Retrying { .. })) => {
                    return Poll::Ready(Some(event));
                }
                other => other,
            },
        };
        match recording.poll_unpin(cx) {
            Poll::Pending => {
                *held = Some(event);
                Poll::Pending
            }
            Poll::Ready(Ok(())) => {
                this.state = State::Recorded;
                Poll::Ready(event)
            }
            Poll::Ready(Err(e)) => {
                this.span
                    .in_scope(|| tracing::error!(task_id = %this.task_id, error = %e, "could not record the task; its answer is not shown"));
                this.state = State::Ended;
                Poll::Ready(Some(TaskEvent::Unrecorded))
            }
        }
    }
}

#[cfg(test)]
#[path = "embedded_tests.rs"]
mod tests;
