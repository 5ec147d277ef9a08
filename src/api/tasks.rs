//! Tasks by id: `GET /tasks/{id}` (with its place in its lane and expected wait while it
//! is queued), its token stream `GET /tasks/{id}/events` (SSE), and
//! `POST /tasks/{id}/cancel`.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::{Extension, Json};
use futures::{Stream, StreamExt};
use serde::Serialize;

use super::error::ApiError;
use crate::chat::Chunk;
use crate::dispatch::{Cancelled, DispatchError};
use crate::domain::{TaskId, TaskStatus};
use crate::events::{EventStream, TaskEvent};
use crate::people::Caller;
use crate::queue::Job;
use crate::queue::eta::{QueueWait, Waiter, queue_wait};
use crate::service::AppState;
use crate::store::TaskRecord;

fn parse_id(id: &str) -> Result<TaskId, ApiError> {
    TaskId::parse(id).map_err(|e| ApiError::BadRequest {
        message: e.to_string(),
        param: Some("id".to_owned()),
    })
}

/// The task, when `caller` may see it: another person's task is answered exactly like one
/// that does not exist, so ids cannot be probed.
async fn load(state: &AppState, caller: &Caller, id: TaskId) -> Result<TaskRecord, ApiError> {
    state
        .store
        .get(id)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .filter(|task| caller.may_see(&task.person))
        .ok_or_else(|| ApiError::NotFound(format!("no task {id}")))
}

/// A task as `GET /tasks/{id}` shows it: its row, and while it waits in its lane, its
/// place there (`position`, 1 = next) and the expected seconds until its first token
/// (`eta_s`, when a worker serves its model).
#[derive(Serialize)]
pub struct TaskView {
    #[serde(flatten)]
    task: TaskRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    eta_s: Option<u64>,
}

pub async fn get_task(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, ApiError> {
    let id = parse_id(&id)?;
    let task = load(&state, &caller, id).await?;
    let wait = match task.status {
        TaskStatus::Queued => place(&state, &task).await,
        _ => None,
    };
    Ok(Json(TaskView {
        position: wait.map(|w| w.position),
        eta_s: wait.and_then(|w| w.eta_whole_s()),
        task,
    }))
}

/// Where a queued task waits, from the queue and the workers' figures; `None` when it is
/// not in its lane (a worker is taking it) or the queue cannot say (logged).
pub(crate) async fn place(state: &AppState, task: &TaskRecord) -> Option<QueueWait> {
    // The composed prompt's size, from the stored job; the user's prompt if unreadable.
    let prompt_tokens = task
        .job
        .as_deref()
        .and_then(|j| serde_json::from_str::<Job>(j).ok())
        .map_or_else(
            || crate::context::estimate_text_tokens(&task.prompt),
            |j| j.request.estimated_prompt_tokens(),
        );
    let waiter = Waiter {
        task_id: task.task_id,
        lane: &task.queue,
        model: &task.model,
        priority: task.priority,
        person: &task.person,
        prompt_tokens,
    };
    let looked = queue_wait(&state.dispatch, state.directory.as_ref(), &waiter).await;
    looked
        .inspect_err(|e| tracing::warn!(task_id = %task.task_id, error = %e, "cannot read the task's place in its lane"))
        .ok()
        .flatten()
}

/// Cancels a queued or running task: `{"task_id", "status": "cancelled"}`, or
/// `"already_ended"` for a task that had ended; 404 for an unknown one.
pub async fn cancel_task(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = parse_id(&id)?;
    load(&state, &caller, id).await?;
    let status = match cancel(&state, id, "asked by the client").await {
        Ok(Cancelled::Cancelled) => "cancelled",
        Ok(Cancelled::AlreadyEnded) => "already_ended",
        Ok(Cancelled::Unknown) => return Err(ApiError::NotFound(format!("no task {id}"))),
        Err(e) => {
            tracing::error!(task_id = %id, error = %e, "could not cancel the task");
            return Err(ApiError::Unavailable(
                "the task store is unavailable; the cancel could not be recorded".to_owned(),
            ));
        }
    };
    Ok(Json(serde_json::json!({ "task_id": id, "status": status })))
}

/// Cancels task `id` for `reason` (see [`crate::dispatch::Dispatcher::cancel`]), counted
/// in `/metrics` when it was cancelled: an explicit cancel, or a chat client that left.
pub(super) async fn cancel(
    state: &AppState,
    id: TaskId,
    reason: &str,
) -> Result<Cancelled, DispatchError> {
    let cancelled = state.dispatch.cancel(id, reason).await;
    if matches!(cancelled, Ok(Cancelled::Cancelled)) {
        state.metrics.cancelled();
    }
    cancelled
}

/// Streams a task's events. Subscribes first, then reads the store: a task that already
/// ended is answered from the store, one still running from its live events.
pub async fn task_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let id = parse_id(&id)?;
    let live = state.events.subscribe(id).await;
    let task = load(&state, &caller, id).await?;
    let events: EventStream = if task.status.is_final() {
        drop(live);
        Box::pin(futures::stream::iter(stored_events(&task)))
    } else {
        live
    };
    Ok(Sse::new(events.map(|ev| Ok(sse_event(&ev)))).keep_alive(KeepAlive::default()))
}

fn stored_events(task: &TaskRecord) -> Vec<TaskEvent> {
    let mut out = Vec::new();
    if let Some(text) = task.response.clone().filter(|t| !t.is_empty()) {
        out.push(TaskEvent::Chunk {
            chunk: Chunk::Content { text },
        });
    }
    if matches!(task.status, TaskStatus::Failed | TaskStatus::Cancelled) {
        // A cancelled task's partial answer, then why it stopped.
        out.push(TaskEvent::Failed {
            message: task
                .error
                .clone()
                .unwrap_or_else(|| format!("the task {}", task.status)),
        });
    } else {
        out.push(TaskEvent::Chunk {
            chunk: Chunk::Done {
                finish_reason: crate::chat::FinishReason::Stop,
                usage: crate::chat::Usage {
                    prompt_tokens: task.prompt_tokens.unwrap_or(0).try_into().unwrap_or(0),
                    completion_tokens: task.completion_tokens.unwrap_or(0).try_into().unwrap_or(0),
                    backend_total_ms: None,
                    backend_timings: None,
                },
            },
        });
    }
    out
}

/// SSE event names: `started`, `token`, `reasoning`, `tool_calls`, `retrying`, `done`, `error`.
fn sse_event(ev: &TaskEvent) -> Event {
    let (name, data) = match ev {
        TaskEvent::Started { worker, .. } => ("started", serde_json::json!({ "worker": worker })),
        TaskEvent::Retrying { worker, reason } => (
            "retrying",
            serde_json::json!({ "worker": worker, "reason": reason }),
        ),
        TaskEvent::Failed { message } => ("error", serde_json::json!({ "message": message })),
        TaskEvent::Unrecorded => (
            "error",
            serde_json::json!({ "message": ApiError::StoreUnavailable { lang: crate::lang::Lang::En }.to_string() }),
        ),
        TaskEvent::Chunk { chunk } => match chunk {
            Chunk::Content { text } => ("token", serde_json::json!({ "text": text })),
            Chunk::Reasoning { text } => ("reasoning", serde_json::json!({ "text": text })),
            Chunk::ToolCalls { calls } => ("tool_calls", serde_json::json!({ "calls": calls })),
            Chunk::Done {
                finish_reason,
                usage,
            } => (
                "done",
                serde_json::json!({ "finish_reason": finish_reason.as_str(), "usage": usage }),
            ),
        },
    };
    Event::default().event(name).data(data.to_string())
}
