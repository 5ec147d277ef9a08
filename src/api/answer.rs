//! Waiting for a task's answer: the first token within the route timeout, then the rest.
//!
//! Front doors answer 200 only once the backend has produced its first chunk, so a
//! backend that is down becomes a proper HTTP error rather than a broken stream.

use std::time::Duration;

use futures::StreamExt;

use super::error::ApiError;
use crate::chat::{Chunk, FinishReason, ToolCall, Usage};
use crate::domain::{TaskId, WorkerName};
use crate::events::{EventStream, TaskEvent};

/// The first chunk of an answer and the stream of what follows.
pub struct Started {
    pub first: Chunk,
    pub worker: Option<WorkerName>,
    pub rest: EventStream,
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
                TaskEvent::Failed { message } => {
                    return Err(ApiError::Upstream {
                        message: format!("task {task_id} failed: {message}"),
                        task_id: Some(task_id),
                    });
                }
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
        }),
    }
}

/// A whole answer, for non-streaming responses.
#[derive(Debug, Default)]
pub struct Collected {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Usage,
}

impl Collected {
    pub fn push(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Content { text } => self.content.push_str(&text),
            Chunk::Reasoning { text } => self.reasoning.push_str(&text),
            Chunk::ToolCalls { calls } => self.tool_calls.extend(calls),
            Chunk::Done {
                finish_reason,
                usage,
            } => {
                self.finish_reason = Some(finish_reason);
                self.usage = usage;
            }
        }
    }
}

/// Reads an answer to its end. A failure after the first token is an error response too:
/// a non-streaming client has nothing else to show.
pub async fn collect(
    task_id: TaskId,
    started: Started,
) -> Result<(Collected, Option<WorkerName>), ApiError> {
    let mut out = Collected::default();
    out.push(started.first);
    let mut rest = started.rest;
    while out.finish_reason.is_none() {
        match rest.next().await {
            Some(TaskEvent::Chunk { chunk }) => out.push(chunk),
            Some(TaskEvent::Failed { message }) => {
                return Err(ApiError::Upstream {
                    message: format!("task {task_id} failed: {message}"),
                    task_id: Some(task_id),
                });
            }
            Some(TaskEvent::Started { .. } | TaskEvent::Retrying { .. }) => {}
            None => {
                return Err(ApiError::Internal(format!(
                    "the event stream of task {task_id} ended early"
                )));
            }
        }
    }
    Ok((out, started.worker))
}
