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

/// Waits up to `timeout` for the first chunk. A failure before it is an error response;
/// a timeout says the cluster is busy and names the task, which stays queued.
pub async fn first_chunk(
    task_id: TaskId,
    mut events: EventStream,
    timeout: Duration,
) -> Result<Started, ApiError> {
    let mut worker = None;
    let wait = async {
        while let Some(ev) = events.next().await {
            match ev {
                TaskEvent::Started { worker: w } => worker = Some(w),
                TaskEvent::Retrying { .. } => worker = None,
                TaskEvent::Chunk { chunk } => return Ok(chunk),
                TaskEvent::Failed { message } => return Err(failed(task_id, &message)),
            }
        }
        Err(ApiError::Internal(format!(
            "the event stream of task {task_id} ended early"
        )))
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(Ok(first)) => Ok(Started {
            first,
            worker,
            rest: events,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ApiError::Busy {
            task_id,
            waited_s: timeout.as_secs(),
            lang: crate::web::Lang::En,
        }),
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
