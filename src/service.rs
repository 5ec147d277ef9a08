//! The service layer: one turn in, one recorded and queued task out.
//!
//! Every front door calls [`AppState::submit`] (`POST /route`) or
//! [`AppState::submit_for_answer`] (the chat APIs): it routes the turn, composes what the
//! worker receives (history + memory + original prompt) and hands the task (with the
//! user's original prompt only) and its job to the [`Dispatcher`], which records and
//! starts it. Ids and timestamps are made here; the store only persists them.

use std::sync::Arc;

use chrono::Utc;
use tracing::Instrument;

use crate::backend::BackendRequest;
use crate::chat::{ChatMessage, Chunk, FinishReason, Role, Usage};
use crate::config::Config;
use crate::dispatch::{DispatchError, Dispatcher, Until};
use crate::domain::{Priority, TaskId, TaskStatus, WorkerName};
use crate::events::{EventBus, EventStream, TaskEvent};
use crate::limits::Refusal;
use crate::memory::policy;
use crate::queue::{Job, MemoryNote, QueueError};
use crate::routing::{Decider, RouteDecision, RouteError, Target};
use crate::store::{NewTask, StoreError, TaskStore};
use crate::turn::{History, Turn};
use crate::worker::Directory;

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not queue task {task_id}: {source}")]
    Queue { task_id: TaskId, source: QueueError },
    /// Refused before anything was recorded: the process is shutting down.
    #[error("the process is shutting down")]
    ShuttingDown,
    /// Refused before anything was recorded: too many requests, a full lane, or as many
    /// of the person's tasks waiting as they may have.
    #[error("refused: {0:?}")]
    Limited(Refusal),
    /// Refused before anything was recorded: the prompt alone does not fit the model's
    /// window, and the backend would cut it.
    #[error(transparent)]
    TooLong(#[from] crate::context::PromptTooLong),
    /// The job could not be written down for the store (nothing was recorded).
    #[error("task {task_id}: its job could not be serialized: {source}")]
    Job {
        task_id: TaskId,
        source: serde_json::Error,
    },
}

impl From<DispatchError> for SubmitError {
    fn from(e: DispatchError) -> Self {
        match e {
            DispatchError::Store(e) => Self::Store(e),
            DispatchError::Queue { task_id, source } => Self::Queue { task_id, source },
        }
    }
}

/// A submitted task: its id, the decision, and its events from the first.
pub struct Submitted {
    pub task_id: TaskId,
    pub decision: RouteDecision,
    /// The worker expected to run the task (the pinned one, or the best candidate now).
    pub worker_hint: Option<WorkerName>,
    /// The estimated size of the composed prompt (0 for a reply made by rules).
    pub prompt_tokens: u32,
    /// Its class in the queue.
    pub priority: Priority,
    /// Whose it is (their turn in the queue: see [`crate::queue::turns`]).
    pub person: crate::domain::Person,
    pub events: EventStream,
    /// The task's span (see [`crate::telemetry::task_span`]), for what the front door does
    /// and logs while it waits for the answer.
    pub span: tracing::Span,
}

/// The service every request handler and background loop shares. Cheap to clone: one
/// reference count, however many handles [`Services`] holds (axum clones the state for
/// every request, and a clone of a dozen handles, each a shared count the two runtime
/// threads bounce between them, was 1% of the CPU at c=64).
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl From<Services> for AppState {
    fn from(services: Services) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// What [`AppState`] shares: every field is a handle.
pub struct Services {
    pub config: Arc<Config>,
    /// Records and starts tasks (embedded or cluster mode).
    pub dispatch: Dispatcher,
    /// For reading tasks back; every write of a new task goes through `dispatch`.
    pub store: Arc<dyn TaskStore>,
    /// For following a task's events; a submitted task's come with its submission.
    pub events: Arc<dyn EventBus>,
    pub decider: Decider,
    pub directory: Arc<dyn Directory>,
    /// When this process started (shown as model creation times).
    pub started_at: chrono::DateTime<Utc>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The API keys and whose they are.
    pub keys: Arc<crate::people::Keys>,
    /// How much work each person may ask for, and each lane hold.
    pub limits: Arc<crate::limits::Limits>,
    /// Cancelled when the process begins to shut down: new work is refused, and clients
    /// whose task has not started are told so (it stays queued for the next start).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Conversation memory (`[memory]`); `None` when it could not be opened at start.
    pub memory: Option<crate::memory::Memory>,
    /// The household's documents (the RAG lane, `/docs`, the `rag:<collection>` models).
    pub rag: Option<Arc<crate::docs::lane::RagContext>>,
}

impl AppState {
    /// The routing decision for a turn, without running anything.
    pub async fn preview(&self, turn: &Turn) -> Result<RouteDecision, RouteError> {
        self.decider.decide(turn, &self.directory.catalog()).await
    }

    /// Routes, records, composes and queues one turn; returns once its row is durable.
    pub async fn submit(&self, turn: Turn) -> Result<Submitted, SubmitError> {
        self.submit_until(turn, Until::Recorded).await
    }

    /// Like [`submit`](Self::submit), for a client that waits for the answer: returns as
    /// soon as the task is started or queued (see [`Until::Started`]).
    pub async fn submit_for_answer(&self, turn: Turn) -> Result<Submitted, SubmitError> {
        self.submit_until(turn, Until::Started).await
    }

    /// A refusal by `[limits]`, counted (`coordinator_limited_total`).
    pub(crate) fn counted(&self, refusal: Refusal) -> Refusal {
        self.metrics.limited(refusal);
        refusal
    }

    async fn submit_until(&self, turn: Turn, until: Until) -> Result<Submitted, SubmitError> {
        let arrived = std::time::Instant::now();
        if self.shutdown.is_cancelled() {
            return Err(SubmitError::ShuttingDown);
        }
        self.limits
            .admit(&turn.person)
            .map_err(|r| SubmitError::Limited(self.counted(r)))?;
        // A store that cannot write now refuses at once, not after its lock's timeout.
        self.store.writable()?;
        let decision = self
            .decider
            .decide(&turn, &self.directory.catalog())
            .await?;
        if let Target::Lane(lane) = &decision.target {
            if self.limits.bounds_lanes() {
                let waiting = self.dispatch.waiting(lane).await;
                self.limits
                    .room_in_lane(waiting)
                    .map_err(|r| SubmitError::Limited(self.counted(r)))?;
            }
            if self.limits.bounds_people() {
                let waiting = self.dispatch.waiting_of(&turn.person).await;
                self.limits
                    .room_for_person(waiting)
                    .map_err(|r| SubmitError::Limited(self.counted(r)))?;
            }
        }
        self.metrics.record(&turn.prompt, &decision);
        let task_id = TaskId::new();
        let span = crate::telemetry::task_span(task_id, Some(&turn.thread_id), decision.lane());
        let submitted = self
            .record_and_start(turn, decision, task_id, until)
            .instrument(span)
            .await;
        self.metrics.routing_overhead(arrived.elapsed());
        submitted
    }

    /// Records the routed turn's task and starts it (or records its rules answer), inside
    /// the task's span, which the submission carries on.
    async fn record_and_start(
        &self,
        turn: Turn,
        decision: RouteDecision,
        task_id: TaskId,
        until: Until,
    ) -> Result<Submitted, SubmitError> {
        let created_at = Utc::now();
        tracing::info!(
            domain = %decision.domain,
            model = %decision.model,
            internal_task = decision.internal_task.map(|k| k.as_str()),
            priority = %Priority::of_turn(turn.priority, decision.internal_task),
            web_search = decision.web_search(),
            named = decision.named,
            rules_answer = decision.rules_reply().is_some(),
            reasons = %crate::telemetry::Listed(&decision.reasons),
            "turn routed"
        );
        // What the request allowed; a turn carrying retrieved documents is never memory,
        // and its row says so for whoever reads it back (a backfill).
        let remember = turn.remember && !decision.retrieved_context;
        let priority = Priority::of_turn(turn.priority, decision.internal_task);
        let mut task = NewTask {
            task_id,
            created_at,
            person: turn.person.clone(),
            thread_id: turn.thread_id.clone(),
            prompt: turn.prompt.clone(),
            domain: decision.domain.clone(),
            model: decision.model.clone(),
            queue: decision.lane().clone(),
            status: TaskStatus::Queued,
            response: None,
            worker_id: None,
            attempts: 0,
            internal_task: decision.internal_task,
            web_search: decision.web_search(),
            reasons: decision.reasons.clone(),
            job: None,
            remember,
            priority,
            context: Default::default(),
            conversation: turn.conversation_json(),
        };

        let lane = match &decision.target {
            Target::Lane(lane) => lane.clone(),
            Target::Rules { reply } => {
                task.status = TaskStatus::Done;
                task.response = Some(reply.clone());
                let rules = WorkerName::parse(RULES_WORKER).ok();
                task.worker_id = rules.clone();
                self.dispatch.record_finished(task).await?;
                let events = rules_reply_events(reply);
                return Ok(Submitted {
                    task_id,
                    decision,
                    worker_hint: rules,
                    prompt_tokens: 0,
                    priority,
                    person: turn.person.clone(),
                    events,
                    span: tracing::Span::current(),
                });
            }
        };
        let facts = decision.memory_facts(remember);
        let hits = match &self.memory {
            Some(m) if policy::may_recall(&facts) => {
                let limit = window::recall_limit(&turn.history, self.config.memory.top_k);
                m.context_hits(
                    &turn.prompt,
                    &turn.person,
                    &turn.thread_id,
                    &turn.system,
                    limit,
                )
                .await
            }
            _ => Vec::new(),
        };
        // What the worker needs to remember the turn once answered, when it may be.
        let memory_note =
            (self.memory.is_some() && policy::may_remember(&facts).is_ok()).then(|| MemoryNote {
                person: turn.person.clone(),
                thread_id: turn.thread_id.to_string(),
                prompt: turn.prompt.clone(),
            });
        let lang = crate::lang::detect_language(&turn.prompt);
        let block = |kept: &[crate::memory::MemoryHit]| {
            self.memory
                .as_ref()
                .and_then(|m| m.context_block(kept, lang))
        };
        // One look at the workers for the window and for placement.
        let statuses = self.directory.statuses();
        let limit = window::limit_for(&statuses, &decision, &turn);
        let fitted = window::fit(
            &turn,
            &hits,
            self.config.memory.top_k,
            limit,
            lang,
            |history, memory| compose_with(&turn, history, &decision, &self.config, memory),
            block,
        )?;
        task.context = fitted.note;
        let request = fitted.request;
        let prompt_tokens = fitted.tokens;
        let sole = crate::placement::sole_server(&statuses, &request.model);
        let worker_hint = match decision.pinned_worker() {
            Some(pinned) => Some(pinned.clone()),
            // One machine serves the model: no queue to read, nothing to weigh.
            None if sole.is_some() => sole,
            None => {
                // The jobs already waiting for the lane's workers, and those each
                // machine owes first: a machine with a backlog looks as busy as it is.
                let waiting = self
                    .dispatch
                    .ahead(&lane, priority, &turn.person, &statuses)
                    .await;
                let ask =
                    crate::placement::Ask::of(&request, Some(&turn.thread_id)).after(&waiting);
                crate::placement::best_of(&statuses, &ask)
            }
        };
        let job = Job {
            task_id,
            thread_id: Some(turn.thread_id.clone()),
            lane,
            created_at,
            request,
            internal_task: decision.internal_task,
            attempt: 0,
            avoid: Vec::new(),
            avoid_until: None,
            response: turn.response,
            memory: memory_note,
            lang,
            priority,
            waiting_since: None,
            person: turn.person.clone(),
        };
        let text =
            serde_json::to_string(&job).map_err(|source| SubmitError::Job { task_id, source })?;
        task.job = Some(text);
        let events = self
            .dispatch
            .dispatch(task, job, worker_hint.as_ref(), until)
            .await?;
        Ok(Submitted {
            task_id,
            decision,
            worker_hint,
            prompt_tokens,
            priority,
            person: turn.person.clone(),
            events,
            span: tracing::Span::current(),
        })
    }
}

/// The worker name recorded for internal tasks answered by rules.
pub const RULES_WORKER: &str = "rules";

fn rules_reply_events(reply: &str) -> EventStream {
    let events = vec![
        TaskEvent::Chunk {
            chunk: Chunk::Content {
                text: reply.to_owned(),
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
    compose_with(turn, &turn.history, decision, config, memory)
}

/// [`compose`] with `history` in place of the turn's own (what the window left of it).
fn compose_with(
    turn: &Turn,
    history: &History,
    decision: &RouteDecision,
    config: &Config,
    memory: Option<&str>,
) -> BackendRequest {
    let mut messages: Vec<ChatMessage> = turn.system.iter().map(ChatMessage::system).collect();
    // A text completion's prompt is continued as written: its memory goes beside it as
    // system text, and a raw prompt gets none.
    let mut prompt = match (memory, turn.params.text.as_ref()) {
        (Some(context), None) => format!("{context}\n\n{}", turn.prompt),
        (Some(context), Some(form)) if !form.raw => {
            messages.push(ChatMessage::system(context));
            turn.prompt.clone()
        }
        _ => turn.prompt.clone(),
    };
    match history {
        History::None => {}
        History::Messages(m) => messages.extend(m.iter().cloned()),
        // The web lane needs the question on its own (it derives the search query from
        // it); elsewhere the seed's text history goes before the prompt.
        History::Text(t) if decision.web_search() => messages.push(ChatMessage::user(t.clone())),
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

pub mod embed;
mod window;

#[cfg(test)]
pub(crate) mod tests;
