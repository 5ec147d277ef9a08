//! The service layer: one turn in, one recorded and queued task out.
//!
//! Every front door calls [`Coordinator::submit`]: it routes the turn, records the task
//! with the user's original prompt, composes what the worker receives (history +
//! original prompt), subscribes to the task's events and queues it. Ids and timestamps
//! are made here; the store only persists them.

use std::sync::Arc;

use chrono::Utc;

use crate::backend::BackendRequest;
use crate::chat::{ChatMessage, Chunk, FinishReason, Role, Usage};
use crate::config::Config;
use crate::domain::{Lane, TaskId, TaskStatus, WorkerName};
use crate::events::{EventBus, EventStream, TaskEvent};
use crate::queue::{Job, MemoryNote, Queue, QueueError};
use crate::routing::{RouteDecision, RouteError, Router};
use crate::store::{NewTask, Recording, StoreError, TaskStore};
use crate::turn::{History, Turn};
use crate::worker::{Directory, LocalWorkers};

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not queue task {task_id}: {source}")]
    Queue { task_id: TaskId, source: QueueError },
}

/// A submitted task: its id, the decision, and its events from the first.
pub struct Submission {
    pub task_id: TaskId,
    pub decision: RouteDecision,
    /// The worker expected to run the task (the pinned one, or the best candidate now).
    pub worker_hint: Option<WorkerName>,
    pub events: EventStream,
}

/// Cheap to clone: every field is a handle.
#[derive(Clone)]
pub struct Coordinator {
    pub config: Arc<Config>,
    pub store: Arc<dyn TaskStore>,
    pub queue: Arc<dyn Queue>,
    pub events: Arc<dyn EventBus>,
    pub router: Router,
    pub directory: Arc<dyn Directory>,
    /// When this process started (shown as model creation times).
    pub started_at: chrono::DateTime<Utc>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Conversation memory (`[memory]`); `None` when it could not be opened at start.
    pub memory: Option<crate::memory::Memory>,
    /// This process's workers, for jobs handed over without the queue (embedded mode).
    pub local: LocalWorkers,
}

impl Coordinator {
    /// The routing decision for a turn, without running anything.
    pub async fn preview(&self, turn: &Turn) -> Result<RouteDecision, RouteError> {
        self.router.decide(turn, &self.directory.catalog()).await
    }

    /// Routes, records, composes and queues one turn; returns once its row is durable.
    pub async fn submit(&self, turn: Turn) -> Result<Submission, SubmitError> {
        let (submission, recording) = self.submit_recording(turn).await?;
        recording.durable().await?;
        Ok(submission)
    }

    /// Like [`submit`](Self::submit), for a client that waits for the answer: returns as
    /// soon as the task is started or queued, while its row may still be being written.
    /// The submission's events hold back every piece of the answer (and any failure)
    /// until the row is durable, and end with the store's error if it could not be
    /// written: a client never hears an answer to a task that was not recorded.
    pub async fn submit_for_answer(&self, turn: Turn) -> Result<Submission, SubmitError> {
        let (mut submission, recording) = self.submit_recording(turn).await?;
        submission.events = Box::pin(crate::events::HeldUntilRecorded::new(
            submission.task_id,
            submission.events,
            recording,
        ));
        Ok(submission)
    }

    async fn submit_recording(&self, turn: Turn) -> Result<(Submission, Recording), SubmitError> {
        let decision = self.router.decide(&turn, &self.directory.catalog()).await?;
        self.metrics.record(&turn.prompt, &decision);
        let task_id = TaskId::new();
        let created_at = Utc::now();
        tracing::info!(
            task_id = %task_id,
            thread_id = %turn.thread_id,
            domain = %decision.domain,
            model = %decision.model,
            queue = %decision.lane,
            internal_task = decision.internal_task.map(|k| k.as_str()),
            web_search = decision.web_search,
            named = decision.named,
            rules_answer = decision.rules_answer.is_some(),
            reasons = ?decision.reasons,
            "turn routed"
        );
        let worker_hint = decision
            .worker
            .clone()
            .or_else(|| self.directory.best_worker_for(&decision.model));
        let mut task = NewTask {
            task_id,
            created_at,
            thread_id: turn.thread_id.to_string(),
            prompt: turn.prompt.clone(),
            domain: decision.domain.clone(),
            model: decision.model.to_string(),
            queue: decision.lane.to_string(),
            status: TaskStatus::Queued,
            response: None,
            worker_id: None,
            attempts: 0,
            internal_task: decision.internal_task,
            web_search: decision.web_search,
            reasons: decision.reasons.clone(),
            job: None,
            remember: turn.remember,
        };

        if let Some(answer) = &decision.rules_answer {
            task.status = TaskStatus::Done;
            task.response = Some(answer.clone());
            task.worker_id = Some(RULES_WORKER.to_owned());
            self.store.insert(&task).await?;
            let events = rules_answer_events(answer);
            let submission = Submission {
                task_id,
                decision,
                worker_hint: WorkerName::parse(RULES_WORKER).ok(),
                events,
            };
            return Ok((submission, Recording::committed()));
        }

        // Memory is read for the model's lanes only: never for internal tasks, web or RAG.
        let memory_context = match &self.memory {
            Some(m) if decision.memory && decision.lane.as_str().starts_with("tasks:llm:") => {
                m.context_for(&turn.prompt, &turn.thread_id).await
            }
            _ => None,
        };
        let job = Job {
            task_id,
            lane: decision.lane.clone(),
            created_at,
            request: compose(&turn, &decision, &self.config, memory_context.as_deref()),
            internal_task: decision.internal_task,
            attempt: 0,
            avoid: Vec::new(),
            response: turn.response,
            memory: self.memory_note(&turn, &decision),
        };
        task.job = serde_json::to_string(&job).ok();
        let (events, recording) = self
            .record_and_start(task, job, worker_hint.as_ref())
            .await?;
        let submission = Submission {
            task_id,
            decision,
            worker_hint,
            events,
        };
        Ok((submission, recording))
    }

    /// Records `task` and starts `job`: handed straight to the expected worker when it runs
    /// in this process with a free slot and nobody waits in the lane (the row is then
    /// written already claimed by it), queued otherwise. Returns the task's events and its
    /// recording.
    ///
    /// A task is never left recorded but not started: when the store can order the insert
    /// at once, nothing is awaited between it and the job's start or queueing; otherwise
    /// both run in a task of their own, which a client going away does not cancel.
    async fn record_and_start(
        &self,
        mut task: NewTask,
        job: Job,
        worker_hint: Option<&WorkerName>,
    ) -> Result<(EventStream, Recording), SubmitError> {
        let task_id = task.task_id;
        let Some(local_queue) = self.queue.in_process() else {
            // Another process may take the job at once: its row must be durable first.
            let (store, events, queue) =
                (self.store.clone(), self.events.clone(), self.queue.clone());
            let events = spawn_to_completion(task_id, async move {
                store.insert(&task).await?;
                let events = events.subscribe(task_id).await;
                queue
                    .enqueue(job)
                    .await
                    .map_err(|source| SubmitError::Queue { task_id, source })?;
                Ok(events)
            })
            .await?;
            return Ok((events, Recording::committed()));
        };
        let reservation = worker_hint
            .filter(|_| local_queue.is_empty(&job.lane))
            .and_then(|w| self.local.reserve(w, &job.lane));
        if let Some(r) = &reservation {
            task.status = TaskStatus::Running;
            task.worker_id = Some(r.worker().to_string());
            task.attempts = 1;
        }
        // Subscribed before the job can start, so that no event is missed.
        let events = self.events.subscribe(task_id).await;
        // In process, the job starts (or is queued) while its row is being committed: the
        // store orders the worker's later writes after the insert. If the insert fails,
        // a queued job's claim finds no row and is skipped; either way the client hears
        // the store's error from the recording.
        match self.store.try_insert_ordered(Box::new(task)) {
            Ok(recording) => {
                match reservation {
                    Some(r) => r.start(job),
                    None => local_queue.push(job),
                }
                Ok((events, recording))
            }
            Err(task) => {
                let (store, queue) = (self.store.clone(), self.queue.clone());
                let recording = spawn_to_completion(task_id, async move {
                    let recording = store.insert_ordered(&task).await?;
                    match reservation {
                        Some(r) => r.start(job),
                        None => queue
                            .enqueue(job)
                            .await
                            .map_err(|source| SubmitError::Queue { task_id, source })?,
                    }
                    Ok(recording)
                })
                .await?;
                Ok((events, recording))
            }
        }
    }
}

/// Runs `work` in a task of its own and waits for it: dropping the caller (a client that
/// went away) does not cancel it.
async fn spawn_to_completion<T: Send + 'static>(
    task_id: TaskId,
    work: impl Future<Output = Result<T, SubmitError>> + Send + 'static,
) -> Result<T, SubmitError> {
    match tokio::spawn(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only when the runtime is shutting down.
        Err(_) => Err(SubmitError::Queue {
            task_id,
            source: QueueError::Closed,
        }),
    }
}

impl Coordinator {
    /// What the worker needs to remember the turn once answered, when it may be.
    fn memory_note(&self, turn: &Turn, decision: &RouteDecision) -> Option<MemoryNote> {
        self.memory.as_ref()?;
        crate::memory::may_remember(
            decision.lane.as_str(),
            decision.internal_task.is_some(),
            decision.web_search,
            turn.remember,
        )
        .ok()?;
        Some(MemoryNote {
            thread_id: turn.thread_id.to_string(),
            prompt: turn.prompt.clone(),
        })
    }
}

/// The worker name recorded for internal tasks answered by rules.
pub const RULES_WORKER: &str = "rules";

fn rules_answer_events(answer: &str) -> EventStream {
    let events = vec![
        TaskEvent::Chunk {
            chunk: Chunk::Content {
                text: answer.to_owned(),
            },
        },
        TaskEvent::Chunk {
            chunk: Chunk::Done {
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
            },
        },
    ];
    Box::pin(futures::stream::iter(events))
}

/// What the worker receives: the client's system messages, the history, and the
/// original prompt last. The stored prompt is never this.
///
/// The order is the seed's: history, then memory context, then the original prompt.
pub fn compose(
    turn: &Turn,
    decision: &RouteDecision,
    config: &Config,
    memory: Option<&str>,
) -> BackendRequest {
    let mut messages: Vec<ChatMessage> = turn.system.iter().map(ChatMessage::system).collect();
    let mut prompt = match memory {
        Some(context) => format!("{context}\n\n{}", turn.prompt),
        None => turn.prompt.clone(),
    };
    match &turn.history {
        History::None => {}
        History::Messages(m) => messages.extend(m.iter().cloned()),
        // The web lane needs the question on its own (it derives the search query from
        // it); elsewhere the seed's text history goes before the prompt.
        History::Text(t) if decision.lane.as_str() == Lane::WEB => {
            messages.push(ChatMessage::user(t.clone()))
        }
        History::Text(t) => prompt = format!("{t}\n\n{prompt}"),
    }
    let mut user = ChatMessage::new(Role::User, prompt);
    user.images = turn.images.clone();
    messages.push(user);
    // An agent loop's tool calls and results that followed the prompt.
    messages.extend(turn.continuation.iter().cloned());
    let mut params = turn.params.clone();
    if decision.internal_task.is_some() {
        let cap = config.internal_tasks.max_tokens;
        params.max_tokens = Some(params.max_tokens.map_or(cap, |m| m.min(cap)));
    }
    BackendRequest {
        model: decision.model.clone(),
        messages,
        params,
        tools: turn.tools.clone(),
    }
}
