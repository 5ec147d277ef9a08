//! Embedded mode: handing a fresh job straight to a worker of this process.
//!
//! In embedded mode the service and the workers share one process. When the worker
//! expected to run a task has a free slot and no job waits in the task's lane, the job
//! skips the queue: the dispatcher writes the task's row already claimed by that worker and
//! starts the job in a task of its own at once. That saves the queue's hand-off to the
//! worker loop and the claim's separate write: a thread wake-up or two and one SQLite
//! transaction per request (see docs/BENCHMARKS.md).
//! Anything else (no free slot, jobs waiting, a worker out for a cool-down, shutdown)
//! goes through the queue as before, so the queue's order and the backends' limits hold.

use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::{Lane, WorkerName};
use crate::queue::{Delivery, Job};
use crate::worker::Worker;

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
    permit: OwnedSemaphorePermit,
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

    /// A free slot on worker `name` for a job of `lane`, if it serves the lane, is healthy
    /// and is not stopping. The caller checks that no job waits in the lane.
    pub fn reserve(&self, name: &WorkerName, lane: &Lane) -> Option<Reservation> {
        let locals = self.0.read().unwrap_or_else(PoisonError::into_inner);
        let local = locals.iter().find(|l| l.worker.handle.name() == name)?;
        if local.stop.is_cancelled()
            || !local.worker.handle.is_healthy()
            || !local.worker.lanes().contains(lane)
        {
            return None;
        }
        let permit = local.worker.slots.clone().try_acquire_owned().ok()?;
        Some(Reservation {
            local: local.clone(),
            permit,
        })
    }
}

impl Reservation {
    pub fn worker(&self) -> &WorkerName {
        self.local.worker.handle.name()
    }

    /// Starts `job`, whose row was written claimed by this worker, in a task of its own.
    /// Returns at once.
    pub fn start(self, job: Job) {
        let Self { local, permit } = self;
        local
            .worker
            .spawn_job(&local.tracker, Delivery::direct(job), permit);
    }
}
