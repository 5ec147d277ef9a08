//! Workers: take tasks from the lanes their backend can serve, run them, stream the
//! tokens back as events and record the result.
//!
//! In embedded mode `serve` runs one worker per configured backend. A worker respects its
//! backend's slots ([`crate::backend::slots`]), fails over before the first token when another worker
//! serves the model, and reports a clear error after it.

mod late;
mod run;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, Span};

use crate::backend::registry::WorkerStatus;
use crate::backend::slots::Slot;
use crate::backend::{BackendHandle, Registry};
use crate::dispatch::Cancels;
use crate::domain::{Lane, ModelName, Priority, ThreadId, WorkerName};
use crate::events::EventBus;
use crate::placement::{Ask, guard};
use crate::queue::{Delivery, Job, Queue, QueueError, Takes};
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

/// What [`Worker::takes`] looks at when a load here would push out a model: the lanes,
/// the machine, and the lanes of its resident models.
struct GuardView {
    lanes: Vec<Lane>,
    status: WorkerStatus,
    resident: Vec<Lane>,
}

/// How often a worker that holds background work back looks again whether it still must.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(500);

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
    /// Where a finished task's times are recorded (`/metrics`).
    pub metrics: Arc<crate::metrics::Metrics>,
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
    /// Runs one job in a task of its own, inside the task's span, holding `slot` (one of
    /// the backend's slots for the job's model) until it ends; abandoned when shutdown's
    /// grace period is over.
    pub(crate) fn spawn_job(self, tracker: &TaskTracker, delivery: Delivery, slot: Slot) {
        if let Some(running) = &delivery.running {
            running.began();
        }
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
            drop(slot);
        };
        // Boxed: the job's state machine (the backend call, the late rule's race, the
        // answer's forwarding) runs to some kilobytes, and the runtime moves a task's
        // future by value several times as it spawns it and again as it ends it; the
        // box is moved instead.
        tracker.spawn(Box::pin(job).instrument(span));
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

    /// What this worker takes now: every lane of [`Self::lanes`], but only people's jobs
    /// from the lanes of a model whose load here would push out a model people need
    /// ([`crate::placement::guard`]). The queue is asked only when a load here would push
    /// out some model at all.
    pub async fn takes(&self) -> Takes {
        match self.guard_view() {
            Ok(all) => all,
            Err(view) => {
                let awaited = self.queue.awaited(&view.resident).await;
                self.guarded(view, awaited)
            }
        }
    }

    /// [`Self::takes`] without an await, for the embedded dispatcher's direct hand-off.
    pub fn takes_now(&self, queue: &crate::queue::in_process::InProcessQueue) -> Takes {
        match self.guard_view() {
            Ok(all) => all,
            Err(view) => {
                let awaited = Ok(queue.awaited_now(&view.resident));
                self.guarded(view, awaited)
            }
        }
    }

    /// Every lane when no load here would push out a model (`Ok`), else what the guard
    /// must look at (`Err`).
    fn guard_view(&self) -> Result<Takes, Box<GuardView>> {
        let lanes = self.lanes();
        if !self.handle.is_full() {
            return Ok(Takes::all(lanes));
        }
        let status = self.handle.status();
        let may_push = |l: &Lane| {
            self.model_of(l)
                .is_some_and(|m| guard::may_push_out(&status, m))
        };
        if !lanes.iter().any(may_push) {
            return Ok(Takes::all(lanes));
        }
        let resident = lanes
            .iter()
            .filter(|l| self.model_of(l).is_some_and(|m| status.loaded.contains(m)))
            .cloned()
            .collect();
        Err(Box::new(GuardView {
            lanes,
            status,
            resident,
        }))
    }

    /// The lanes of `view` from which only people's jobs are taken, given the resident
    /// models' lanes where people's jobs wait (`awaited`).
    fn guarded(&self, view: Box<GuardView>, awaited: Result<Vec<Lane>, QueueError>) -> Takes {
        let GuardView { lanes, status, .. } = *view;
        let awaited: Vec<ModelName> = match awaited {
            Ok(lanes) => lanes
                .iter()
                .filter_map(|l| self.model_of(l))
                .cloned()
                .collect(),
            Err(e) => {
                // Not knowing who waits, every resident model counts as needed.
                tracing::warn!(worker = %self.handle.name(), error = %e, "cannot see who waits; background work keeps off resident models");
                status.loaded.clone()
            }
        };
        let interactive_only = lanes
            .iter()
            .filter(|l| {
                self.model_of(l)
                    .is_some_and(|m| guard::pushes_out_needed(&status, m, &awaited))
            })
            .cloned()
            .collect();
        Takes {
            lanes,
            interactive_only,
        }
    }

    /// Whether a job just taken must wait after all: background work that would push out
    /// a model people need now. What the worker took it with was worked out before it
    /// waited, and the machine may have changed since (a person's answer started there).
    async fn holds_back(&self, delivery: &Delivery) -> bool {
        let job = &delivery.job;
        job.priority != Priority::Interactive
            && delivery.dead_letter.is_none()
            && !self.takes().await.allows(&job.lane, job.priority)
    }

    /// Queues a job taken too soon again (`why`) and acknowledges the delivery. `Err` gives
    /// it back when it cannot be queued: it runs here after all rather than be lost.
    async fn put_back(&self, delivery: Delivery, why: &'static str) -> Result<(), Delivery> {
        if let Err(e) = self.queue.enqueue(delivery.job.clone()).await {
            tracing::warn!(worker = %self.handle.name(), error = %e, why, "could not queue a job taken too soon again; running it");
            return Err(delivery);
        }
        tracing::debug!(worker = %self.handle.name(), task_id = %delivery.job.task_id, why, "queued again");
        self.ack(&delivery).await;
        Ok(())
    }

    /// The model this worker answers `lane`'s jobs with, when it is one model.
    fn model_of<'a>(&'a self, lane: &'a Lane) -> Option<&'a ModelName> {
        match lane {
            Lane::Llm { model, .. } => Some(model),
            Lane::Utility => self.utility_model.as_ref(),
            Lane::Web => self.web_model.as_ref(),
            Lane::Rag => None,
        }
    }

    /// Whether another healthy worker serves one of this worker's models.
    fn others_can_serve(&self) -> bool {
        let me = std::slice::from_ref(self.handle.name());
        self.handle
            .models()
            .iter()
            .any(|m| self.directory.others_serving(&m.name, me) > 0)
    }

    /// Keeps the lanes of `lanes` whose jobs could start here now: those whose model (this
    /// worker's first for a lane of no one model) has a free slot
    /// ([`crate::backend::slots`]). Whether any was left out.
    fn keep_lanes_with_a_slot(&self, lanes: &mut Vec<Lane>) -> bool {
        let at_once = self.handle.models_at_once();
        let first = self.handle.models().into_iter().next().map(|m| m.name);
        let all = lanes.len();
        lanes.retain(|lane| {
            self.model_of(lane)
                .or(first.as_ref())
                .is_none_or(|model| self.handle.slots.can_start(model, at_once))
        });
        lanes.len() < all
    }

    /// The slot a job just taken from the queue runs in. Its lane had a free slot when the
    /// worker began to read it, but a job handed straight to this worker meanwhile may have
    /// taken it: then the job goes back to the queue, keeping its place, until a slot is
    /// free (`None`). A job answered by another model than the one its lane was read for,
    /// as a web or RAG job may be, runs anyway (its lane would be read again at once), and
    /// so does one the queue cannot take back.
    async fn slot_for_taken(&self, delivery: Delivery) -> Option<(Delivery, Slot)> {
        let model = self.answer_model(&delivery.job);
        if let Some(slot) = self.handle.try_slot(&model) {
            return Some((delivery, slot));
        }
        if self.model_of(&delivery.job.lane) == Some(&model) {
            match self.put_back(delivery, "no free slot for its model").await {
                Ok(()) => return None,
                Err(delivery) => return Some((delivery, self.handle.slots.take(&model))),
            }
        }
        Some((delivery, self.handle.slots.take(&model)))
    }

    /// Takes and runs jobs until `shutdown`; running jobs are tracked by `tracker`. A lane
    /// is read only while its model has a free slot here; when a slot is given back, the
    /// worker looks again.
    pub async fn run(self, shutdown: CancellationToken, tracker: TaskTracker) {
        let name = self.handle.name().clone();
        let mut models = self.handle.watch_models();
        let mut freed = self.handle.slots.watch_freed();
        tracing::info!(worker = %name, parallel = self.handle.slots.parallel(), "worker started");
        let mut cooling = false;
        loop {
            freed.mark_unchanged();
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
                self.handle.refresh().await;
                continue;
            }
            if cooling {
                tracing::info!(worker = %name, "backend answers again; back in service");
                cooling = false;
            }
            models.mark_unchanged();
            let mut takes = self.takes().await;
            // A lane left out for want of a slot is read again once one is given back;
            // with every lane read, a slot given back changes nothing here.
            let waits_for_slot = self.keep_lanes_with_a_slot(&mut takes.lanes);
            // Who waits, and what is resident, change without the queue saying so: while
            // background work is held back, the worker looks again every so often.
            let guarded = !takes.interactive_only.is_empty();
            let delivery = tokio::select! {
                d = self.queue.dequeue_from(&takes, &name), if !takes.lanes.is_empty() => d,
                changed = models.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    continue;
                }
                changed = freed.changed(), if waits_for_slot => {
                    if changed.is_err() {
                        break;
                    }
                    continue;
                }
                () = tokio::time::sleep(LOOK_AGAIN), if guarded => continue,
                () = shutdown.cancelled() => break,
            };
            match delivery {
                Ok(delivery) if self.holds_back(&delivery).await => {
                    let why = "background work would push out a model people need";
                    if let Err(delivery) = self.put_back(delivery, why).await {
                        let slot = self.handle.slots.take(&self.answer_model(&delivery.job));
                        self.clone().spawn_job(&tracker, delivery, slot);
                    }
                }
                Ok(delivery) => {
                    if let Some((delivery, slot)) = self.slot_for_taken(delivery).await {
                        self.clone().spawn_job(&tracker, delivery, slot);
                    }
                }
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
