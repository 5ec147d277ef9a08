//! Embeddings for the front doors (`POST /api/embed`, `/api/embeddings`, `/v1/embeddings`):
//! routed by model to a worker that serves it (placement picks among them, as for a chat;
//! the next one is tried when a backend fails), asked of that worker's backend directly
//! (an embedding is short and has no stream, so it takes no queue slot), counted in
//! `/metrics`, and recorded as a task row that keeps no input text: its prompt says how
//! many inputs there were, and nothing of what they said.

use std::time::Instant;

use chrono::Utc;
use tracing::Instrument;

use super::AppState;
use crate::backend::{Backend, BackendError, WorkerStatus};
use crate::domain::{
    Domain, Lane, ModelName, ParseError, Person, Priority, TaskId, TaskStatus, ThreadId, WorkerName,
};
use crate::limits::Refusal;
use crate::store::{NewTask, StoreError, TaskOutcome};
use crate::turn::ModelRequest;

/// The domain (and thread) recorded on an embedding's row.
pub const EMBEDDING_DOMAIN: &str = "embedding";

/// One embedding request, as a front door read it.
#[derive(Debug, Clone)]
pub struct EmbedAsk {
    /// The model as the client named it (`model` or `model@worker`).
    pub model: Option<String>,
    pub inputs: Vec<String>,
    /// The vectors' size, where the model can shorten them.
    pub dimensions: Option<u32>,
    pub person: Person,
}

/// The vectors, one per input, in order, and who made them.
#[derive(Debug, Clone)]
pub struct Embeddings {
    pub task_id: TaskId,
    pub model: ModelName,
    pub worker: WorkerName,
    pub vectors: Vec<Vec<f32>>,
    /// Estimated tokens of the inputs (one per CJK character).
    pub prompt_tokens: u32,
    pub total_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("model: {0}")]
    Model(ParseError),
    #[error("model: name an embedding model (auto cannot choose one)")]
    NoModel,
    #[error("model {0} is not served by any machine")]
    NotServed(String),
    /// The machines failed; the task's row says so too.
    #[error("{error}")]
    Backend {
        task_id: TaskId,
        error: BackendError,
    },
    #[error("backend {worker}: {detail}")]
    Client { worker: WorkerName, detail: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the process is shutting down")]
    ShuttingDown,
    #[error("refused: {0:?}")]
    Limited(Refusal),
}

impl AppState {
    /// Embeds the ask's inputs on a worker that serves its model.
    pub async fn embed(&self, ask: EmbedAsk) -> Result<Embeddings, EmbedError> {
        if self.shutdown.is_cancelled() {
            return Err(EmbedError::ShuttingDown);
        }
        let (model, pinned) = match ModelRequest::parse(ask.model.as_deref()) {
            Ok(ModelRequest::Named { model, worker }) => (model, worker),
            Ok(ModelRequest::Auto) => return Err(EmbedError::NoModel),
            Err(e) => return Err(EmbedError::Model(e)),
        };
        self.limits
            .admit(&ask.person)
            .map_err(|r| EmbedError::Limited(self.counted(r)))?;
        self.store.writable()?;
        let prompt_tokens: u32 = ask
            .inputs
            .iter()
            .map(|t| crate::context::estimate_text_tokens(t))
            .sum();
        let candidates = self.embedders(&model, pinned.as_ref(), prompt_tokens);
        let Some(first) = candidates.first().map(|s| s.name.clone()) else {
            return Err(EmbedError::NotServed(model.to_string()));
        };
        let task_id = TaskId::new();
        let row = embedding_row(task_id, &ask, &model, &first)?;
        let span = crate::telemetry::task_span(task_id, Some(&row.thread_id), &row.queue);
        async {
            self.store.insert(row).await?.await?;
            self.metrics.embedded(ask.inputs.len());
            let started = Instant::now();
            let (result, worker) = self
                .embed_on(task_id, &candidates, first, &model, &ask)
                .await;
            let total_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let outcome = outcome(&result, &worker, total_ms, prompt_tokens);
            self.store.finish(task_id, &outcome).await?.await?;
            let vectors = result?;
            tracing::info!(model = %model, worker = %worker, inputs = ask.inputs.len(), total_ms, "embedded");
            Ok(Embeddings {
                task_id,
                model,
                worker,
                vectors,
                prompt_tokens,
                total_ms,
            })
        }
        .instrument(span)
        .await
    }

    /// The healthy workers serving `model` (only `pinned`, when named), placement's
    /// choice first.
    fn embedders(
        &self,
        model: &ModelName,
        pinned: Option<&WorkerName>,
        tokens: u32,
    ) -> Vec<WorkerStatus> {
        let mut candidates: Vec<WorkerStatus> = self
            .directory
            .statuses()
            .into_iter()
            .filter(|s| s.healthy && s.models.iter().any(|m| m.names_same_model(model)))
            .filter(|s| pinned.is_none_or(|p| &s.name == p))
            .collect();
        let ask = crate::placement::Ask::fresh(model, tokens);
        if let Some(best) = crate::placement::best_of(&candidates, &ask)
            && let Some(i) = candidates.iter().position(|s| s.name == best)
        {
            candidates.swap(0, i);
        }
        candidates
    }

    /// Tries each candidate in turn until one answers or fails for good; returns the last
    /// worker asked.
    async fn embed_on(
        &self,
        task_id: TaskId,
        candidates: &[WorkerStatus],
        first: WorkerName,
        model: &ModelName,
        ask: &EmbedAsk,
    ) -> (Result<Vec<Vec<f32>>, EmbedError>, WorkerName) {
        let mut last = Err(EmbedError::NotServed(model.to_string()));
        let mut asked = first;
        for status in candidates {
            asked = status.name.clone();
            let backend = match Backend::for_worker(status, &self.config) {
                Ok(b) => b,
                Err(e) => {
                    last = Err(EmbedError::Client {
                        worker: status.name.clone(),
                        detail: e.to_string(),
                    });
                    continue;
                }
            };
            // The name as this machine lists it (`x` or `x:latest`).
            let listed = status
                .models
                .iter()
                .find(|m| m.names_same_model(model))
                .unwrap_or(model);
            match backend
                .embed_sized(listed, &ask.inputs, ask.dimensions)
                .await
            {
                Ok(v) => return (Ok(v), status.name.clone()),
                Err(e) if e.is_retryable() => {
                    tracing::warn!(worker = %status.name, model = %model, error = %e, "embedding failed; trying another machine");
                    last = Err(EmbedError::Backend { task_id, error: e });
                }
                Err(e) => {
                    let failed = EmbedError::Backend { task_id, error: e };
                    return (Err(failed), status.name.clone());
                }
            }
        }
        (last, asked)
    }
}

/// How an embedding ended, for its row.
fn outcome(
    result: &Result<Vec<Vec<f32>>, EmbedError>,
    worker: &WorkerName,
    total_ms: u64,
    prompt_tokens: u32,
) -> TaskOutcome {
    let mut outcome = match result {
        Ok(_) => TaskOutcome::done(Utc::now()),
        Err(e) => TaskOutcome::failed(Utc::now(), e.to_string()),
    };
    outcome.worker_id = Some(worker.clone());
    outcome.total_ms = i64::try_from(total_ms).ok();
    outcome.prompt_tokens = Some(i64::from(prompt_tokens));
    outcome
}

/// The row an embedding is recorded as: its prompt counts the inputs and keeps none of
/// their text; never memory.
fn embedding_row(
    task_id: TaskId,
    ask: &EmbedAsk,
    model: &ModelName,
    worker: &WorkerName,
) -> Result<NewTask, EmbedError> {
    let count = ask.inputs.len();
    let prompt = format!(
        "[embedding of {count} input{}]",
        if count == 1 { "" } else { "s" }
    );
    Ok(NewTask {
        task_id,
        created_at: Utc::now(),
        person: ask.person.clone(),
        thread_id: ThreadId::parse(EMBEDDING_DOMAIN).map_err(EmbedError::Model)?,
        prompt,
        domain: Domain::parse(EMBEDDING_DOMAIN).map_err(EmbedError::Model)?,
        model: model.clone(),
        queue: Lane::Llm {
            model: model.clone(),
            pinned_worker: None,
        },
        status: TaskStatus::Running,
        response: None,
        worker_id: Some(worker.clone()),
        attempts: 1,
        internal_task: None,
        web_search: false,
        reasons: vec![format!("embedding: {count} inputs for {model}")],
        job: None,
        remember: false,
        priority: Priority::Background,
        context: Default::default(),
        conversation: None,
    })
}
