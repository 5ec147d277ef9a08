//! Waiting for a task's answer: the first token within the route timeout, then the rest.
//!
//! Front doors answer 200 only once the backend has produced its first chunk, so a
//! backend that is down becomes a proper HTTP error rather than a broken stream.

use std::time::Duration;

use futures::StreamExt;

use super::error::ApiError;
use crate::chat::Chunk;
use crate::domain::{TaskId, WorkerName};
use crate::events::{EventStream, TaskEvent};
use crate::turn::Answer;

/// The first chunk of an answer and the stream of what follows.
pub struct Started {
    pub first: Chunk,
    pub worker: Option<WorkerName>,
    pub rest: EventStream,
}

fn failed(task_id: TaskId, message: &str) -> ApiError {
    ApiError::Upstream {
        message: format!("task {task_id} failed: {message}"),
        task_id: Some(task_id),
    }
}

/// What the client waits for within the route timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The first chunk of a streamed answer.
    FirstChunk,
    /// A worker starting the task: a whole answer arrives in one piece, as late as the
    /// backend takes to generate it (bounded by `[timeouts] answer_s`).
    Started,
}

/// Waits up to `timeout` for the first chunk (or, with [`Wait::Started`], for a worker to
/// start the task, then for the first chunk without that limit). A failure before it is
/// an error response; a timeout says the cluster is busy and names the task, which stays
/// queued.
pub async fn first_chunk(
    task_id: TaskId,
    mut events: EventStream,
    timeout: Duration,
    wait: Wait,
) -> Result<Started, ApiError> {
    let busy = || ApiError::Busy {
        task_id,
        waited_s: timeout.as_secs(),
        lang: crate::web::Lang::En,
    };
    let mut worker = None;
    let mut deadline = Some(tokio::time::Instant::now() + timeout);
    loop {
        let next = match deadline {
            Some(at) => tokio::time::timeout_at(at, events.next())
                .await
                .map_err(|_| busy())?,
            None => events.next().await,
        };
        match next {
            Some(TaskEvent::Started { worker: w }) => {
                worker = Some(w);
                if wait == Wait::Started {
                    deadline = None;
                }
            }
            Some(TaskEvent::Retrying { .. }) => {
                worker = None;
                // Back in a queue: the wait for a worker starts again.
                if deadline.is_none() {
                    deadline = Some(tokio::time::Instant::now() + timeout);
                }
            }
            Some(TaskEvent::Chunk { chunk }) => {
                return Ok(Started {
                    first: chunk,
                    worker,
                    rest: events,
                });
            }
            Some(TaskEvent::Failed { message }) => return Err(failed(task_id, &message)),
            None => {
                return Err(ApiError::Internal(format!(
                    "the event stream of task {task_id} ended early"
                )));
            }
        }
    }
}

/// Reads an answer to its end. A failure after the first token is an error response too:
/// a non-streaming client has nothing else to show.
pub async fn collect(task_id: TaskId, started: Started) -> Result<Answer, ApiError> {
    let mut out = Answer::default();
    out.push(&started.first);
    let mut rest = started.rest;
    while out.finish_reason.is_none() {
        match rest.next().await {
            Some(TaskEvent::Chunk { chunk }) => out.push(&chunk),
            Some(TaskEvent::Failed { message }) => return Err(failed(task_id, &message)),
            Some(TaskEvent::Started { .. } | TaskEvent::Retrying { .. }) => {}
            None => {
                return Err(ApiError::Internal(format!(
                    "the event stream of task {task_id} ended early"
                )));
            }
        }
    }
    Ok(out)
}
