//! Workers: take tasks from the lanes their backend can serve, run them, stream the
//! tokens back as events and record the result.
//!
//! In embedded mode `serve` runs one worker per configured backend. A worker respects its
//! backend's `max_concurrency`, fails over before the first token when another worker
//! serves the model, and reports a clear error after it.

mod run;

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, Span};

use crate::backend::registry::WorkerStatus;
use crate::backend::{BackendHandle, Registry};
use crate::dispatch::Cancels;
use crate::domain::{Lane, ModelName, ThreadId, WorkerName};
use crate::events::EventBus;
use crate::placement::Ask;
use crate::queue::{Delivery, Job, Queue};
use crate::routing::Catalog;
use crate::store::TaskStore;
use crate::web::WebContext;

/// Which workers exist and what they serve: the registry in embedded mode, worker
/// heartbeats in cluster mode.
pub trait Directory: Send + Sync + 'static {
    /// What every worker serves right now.
    fn catalog(&self) -> Catalog;

    /// The worker expected to give the ask's first token soonest now (see
    /// [`crate::placement::best_of`]).
    fn best_worker_for(&self, ask: &Ask<'_>) -> Option<WorkerName>;

    fn statuses(&self) -> Vec<WorkerStatus>;

    /// Whether any worker can run anything.
    fn any_healthy(&self) -> bool;

    /// How many healthy workers, other than those in `except`, serve `model`.
    fn others_serving(&self, model: &ModelName, except: &[WorkerName]) -> usize;
}

impl Directory for Registry {
    fn catalog(&self) -> Catalog {
        Registry::catalog(self)
    }

    fn best_worker_for(&self, ask: &Ask<'_>) -> Option<WorkerName> {
        Registry::best_worker_for(self, ask)
    }

    fn statuses(&self) -> Vec<WorkerStatus> {
        Registry::statuses(self)
    }

    fn any_healthy(&self) -> bool {
        Registry::any_healthy(self)
    }

    fn others_serving(&self, model: &ModelName, except: &[WorkerName]) -> usize {
        self.handles()
            .iter()
            .filter(|h| h.is_healthy() && h.serves(model) && !except.contains(h.name()))
            .count()
    }
}

/// How many workers may try one task before it fails.
pub const MAX_ATTEMPTS: u32 = 3;

/// How long a worker whose backend is failing stays out before probing it again.
pub const COOL_DOWN: std::time::Duration = std::time::Duration::from_secs(5);

/// One backend's worker.
#[derive(Clone)]
pub struct Worker {
    pub handle: Arc<BackendHandle>,
    pub queue: Arc<dyn Queue>,
    pub store: Arc<dyn TaskStore>,
    pub events: Arc<dyn EventBus>,
    pub directory: Arc<dyn Directory>,
    /// The model that serves `tasks:utility`, if any.
    pub utility_model: Option<ModelName>,
    /// The web lane's context, when this worker serves `tasks:web`; it takes web jobs
    /// when its backend serves `web_model`.
    pub web: Option<Arc<WebContext>>,
    pub web_model: Option<ModelName>,
    /// The RAG lane's context, when this worker serves `tasks:rag` (see `docs::lane`).
    pub rag: Option<Arc<crate::docs::lane::RagContext>>,
    /// Conversation memory: every finished turn is written to it after delivery.
    pub memory: Option<crate::memory::Memory>,
    /// Cancelled when shutdown's grace period is over: running jobs are abandoned without
    /// writing anything, so the store still has them as running and the next start
    /// queues them again.
    pub abort: CancellationToken,
    /// This process's cancellations: a job whose task is cancelled stops, or never starts.
    pub cancels: Cancels,
    /// The backend's slots (`max_concurrency`): a job runs only while it holds one.
    pub slots: Arc<Semaphore>,
}

/// The worker's span of a job's task (see [`crate::telemetry::task_span`]).
pub fn task_span(job: &Job) -> Span {
    // A job queued before jobs carried their thread has it only when it may be remembered.
    let from_note = job
        .memory
        .as_ref()
        .and_then(|note| ThreadId::parse(&note.thread_id).ok());
    let thread_id = job.thread_id.as_ref().or(from_note.as_ref());
    crate::telemetry::task_span(job.task_id, thread_id, &job.lane)
}

impl Worker {
    /// Runs one job in a task of its own, inside the task's span, holding `permit` (one of
    /// the backend's slots) until it ends; abandoned when shutdown's grace period is over.
    pub(crate) fn spawn_job(
        self,
        tracker: &TaskTracker,
        delivery: Delivery,
        permit: OwnedSemaphorePermit,
    ) {
        let span = match &delivery.span {
            Some(span) => span.clone(),
            None => task_span(&delivery.job),
        };
        let job = async move {
            // One token for both ends: the task's cancellation, and shutdown's (its parent).
            match self.cancels.watch(delivery.job.task_id, &self.abort) {
                Some(watch) => {
                    // What the answer sent so far outlives the run, which a cancel drops
                    // (and with it the backend call) at once.
                    let mut got = run::Collected::default();
                    let stopped = tokio::select! {
                        () = self.execute(&delivery, &mut got) => false,
                        () = watch.cancelled() => true,
                    };
                    if stopped {
                        self.stopped(&delivery, &got).await;
                    }
                }
                None => {
                    tracing::info!(worker = %self.handle.name(), "task cancelled before it started; skipped");
                    self.ack(&delivery).await;
                }
            }
            drop(permit);
        };
        tracker.spawn(job.instrument(span));
    }

    /// The lanes this worker takes from, given the models its backend serves now.
    pub fn lanes(&self) -> Vec<Lane> {
        let me = self.handle.name();
        let mut lanes = Vec::new();
        for m in self.handle.models() {
            lanes.push(Lane::llm(&m.name));
            lanes.push(Lane::llm_pinned(&m.name, me));
            if self.utility_model.as_ref() == Some(&m.name) {
                lanes.push(Lane::Utility);
            }
            // The web lane: with a web (or default) model configured, the workers serving
            // it; otherwise every worker, answering with its own model.
            if self.web.is_some()
                && self.web_model.as_ref().is_none_or(|w| w == &m.name)
                && !lanes.contains(&Lane::Web)
            {
                lanes.push(Lane::Web);
            }
            // The RAG lane likewise: the workers serving its model, or every worker.
            if let Some(rag) = &self.rag
                && rag.model.as_ref().is_none_or(|r| r == &m.name)
                && !lanes.contains(&Lane::Rag)
            {
                lanes.push(Lane::Rag);
            }
        }
        lanes
    }

    /// Whether another healthy worker serves one of this worker's models.
    fn others_can_serve(&self) -> bool {
        let me = std::slice::from_ref(self.handle.name());
        self.handle
            .models()
            .iter()
            .any(|m| self.directory.others_serving(&m.name, me) > 0)
    }

    /// Takes and runs jobs until `shutdown`; running jobs are tracked by `tracker`.
    pub async fn run(self, shutdown: CancellationToken, tracker: TaskTracker) {
        let name = self.handle.name().clone();
        let slots = self.slots.clone();
        let mut models = self.handle.watch_models();
        tracing::info!(worker = %name, slots = self.handle.max_concurrency, "worker started");
        let mut cooling = false;
        loop {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                () = shutdown.cancelled() => break,
            };
            // A failing backend steps out while another worker can serve its models, and is
            // probed back in after a cool-down. With nobody else, it keeps taking tasks, so
            // they fail with a clear error instead of waiting.
            if !self.handle.is_healthy() && self.others_can_serve() {
                if !cooling {
                    tracing::warn!(worker = %name, cool_down_s = COOL_DOWN.as_secs(), "backend failing; taken out for a cool-down");
                    cooling = true;
                }
                tokio::select! {
                    () = tokio::time::sleep(COOL_DOWN) => {}
                    () = shutdown.cancelled() => break,
                }
                drop(permit);
                self.handle.refresh().await;
                continue;
            }
            if cooling {
                tracing::info!(worker = %name, "backend answers again; back in service");
                cooling = false;
            }
            models.mark_unchanged();
            let lanes = self.lanes();
            let delivery = tokio::select! {
                d = self.queue.dequeue(&lanes, &name), if !lanes.is_empty() => d,
                changed = models.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    continue;
                }
                () = shutdown.cancelled() => break,
            };
            match delivery {
                Ok(delivery) => self.clone().spawn_job(&tracker, delivery, permit),
                Err(e) => {
                    tracing::error!(worker = %name, error = %e, "queue failed; worker stops");
                    break;
                }
            }
        }
        tracing::info!(worker = %name, "worker stopped taking tasks");
    }
}

#[cfg(test)]
mod tests;
