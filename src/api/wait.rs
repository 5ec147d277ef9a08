//! Waiting for a submitted task's answer: its first chunk (within the route timeout, or the
//! answer limit once a worker runs a whole answer), then the rest.
//!
//! Front doors answer 200 only once the backend has produced its first chunk, so a
//! backend that is down becomes a proper HTTP error rather than a broken stream.

use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::error::ApiError;
use crate::chat::Chunk;
use crate::domain::{TaskId, WorkerName};
use crate::events::{EventStream, TaskEvent};
use crate::lang::Lang;
use crate::turn::Answer;

/// The first chunk of an answer and the stream of what follows.
pub struct FirstChunk {
    pub chunk: Chunk,
    pub worker: Option<WorkerName>,
    pub rest: EventStream,
}

/// The task failed; `message` is what its worker said may be shown, in `lang` already.
fn failed(task_id: TaskId, message: &str, lang: Lang) -> ApiError {
    let message = match lang {
        Lang::Ja => format!("タスク {task_id} は失敗しました: {message}"),
        Lang::En => format!("task {task_id} failed: {message}"),
    };
    ApiError::Upstream {
        message,
        task_id: Some(task_id),
    }
}

/// A worker started a whole answer and gave none within `limit`.
fn no_answer(task_id: TaskId, limit: Duration, lang: Lang) -> ApiError {
    let s = limit.as_secs();
    let message = match lang {
        Lang::Ja => format!("タスク {task_id} は開始から {s} 秒以内に回答しませんでした"),
        Lang::En => format!("task {task_id} gave no answer within {s} s of starting"),
    };
    ApiError::Upstream {
        message,
        task_id: Some(task_id),
    }
}

/// How long the first chunk may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// The route timeout, for the first chunk of a streamed answer.
    RouteTimeout,
    /// The route timeout for a worker to start the task; then, for at most `answer`, the
    /// whole answer, which arrives in one piece as late as the backend takes to generate it.
    AfterStart { answer: Duration },
}

/// What a streamed chat's client is told while its first token has not come (see
/// `src/api/queued.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Waiting in its lane: its place (1 = next) and the expected seconds until its first
    /// token, when some worker serves its model.
    Queued { position: usize, eta_s: Option<u64> },
    /// Not waiting in its lane: a worker has it (its model may be loading), or the queue
    /// could not say.
    NotQueued,
}

/// How a worker started the task: when (on this process's clock) and whether its model
/// had to load first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartedAt {
    pub at: tokio::time::Instant,
    pub loading: bool,
}

/// The wait for a task's first chunk, resumable: [`FirstWait::chunk`] is cancel-safe, so a
/// front door can do something else (tell a streaming client it is queued) and go on
/// waiting where it was.
pub struct FirstWait {
    task_id: TaskId,
    events: EventStream,
    timeout: Duration,
    deadline: Deadline,
    lang: Lang,
    stopping: CancellationToken,
    worker: Option<WorkerName>,
    started: Option<StartedAt>,
    begun: tokio::time::Instant,
    until: tokio::time::Instant,
    /// Set once a worker runs a whole answer: then the wait is for the answer itself.
    answering: Option<Duration>,
}

impl FirstWait {
    /// See [`first_chunk`] for what `timeout`, `deadline` and `stopping` mean.
    pub fn new(
        task_id: TaskId,
        events: EventStream,
        timeout: Duration,
        deadline: Deadline,
        lang: Lang,
        stopping: &CancellationToken,
    ) -> Self {
        let begun = tokio::time::Instant::now();
        Self {
            task_id,
            events,
            timeout,
            deadline,
            lang,
            stopping: stopping.clone(),
            worker: None,
            started: None,
            begun,
            until: begun + timeout,
            answering: None,
        }
    }

    /// How the worker running the task started it; `None` while no worker runs it.
    pub fn started(&self) -> Option<StartedAt> {
        self.started
    }

    /// When the wait began (the task had just been submitted).
    pub fn begun(&self) -> tokio::time::Instant {
        self.begun
    }

    /// The worker running the task, once one said so.
    pub fn worker(&self) -> Option<&WorkerName> {
        self.worker.as_ref()
    }

    /// The first chunk, or why there is none (see [`first_chunk`]). Cancel-safe: dropping
    /// the future loses no event, and the next call goes on where this one was.
    pub async fn chunk(&mut self) -> Result<Chunk, ApiError> {
        let (task_id, lang) = (self.task_id, self.lang);
        loop {
            let waited = tokio::select! {
                // What the task says first: a start that has already come counts.
                biased;
                waited = tokio::time::timeout_at(self.until, self.events.next()) => waited,
                () = self.stopping.cancelled(), if self.worker.is_none() => {
                    return Err(ApiError::ShuttingDown {
                        task_id: Some(task_id),
                        lang,
                    });
                }
            };
            let Ok(next) = waited else {
                return Err(match self.answering {
                    Some(limit) => no_answer(task_id, limit, lang),
                    None => ApiError::Busy {
                        task_id,
                        waited_s: self.timeout.as_secs(),
                        lang,
                    },
                });
            };
            match next {
                Some(TaskEvent::Started { worker, loading }) => {
                    self.worker = Some(worker);
                    let at = tokio::time::Instant::now();
                    self.started = Some(StartedAt { at, loading });
                    if let Deadline::AfterStart { answer } = self.deadline {
                        self.answering = Some(answer);
                        self.until = at + answer;
                    }
                }
                Some(TaskEvent::Retrying { .. }) => {
                    self.worker = None;
                    self.started = None;
                    // Back in a queue: the wait for a worker starts again.
                    if self.answering.take().is_some() {
                        self.until = tokio::time::Instant::now() + self.timeout;
                    }
                }
                Some(TaskEvent::Chunk { chunk }) => return Ok(chunk),
                Some(TaskEvent::Failed { message }) => return Err(failed(task_id, &message, lang)),
                Some(TaskEvent::Unrecorded) => {
                    return Err(ApiError::StoreUnavailable { lang });
                }
                None => {
                    return Err(ApiError::Internal(format!(
                        "the event stream of task {task_id} ended early"
                    )));
                }
            }
        }
    }

    /// The answer from its first chunk on.
    pub fn into_first(self, chunk: Chunk) -> FirstChunk {
        FirstChunk {
            chunk,
            worker: self.worker,
            rest: self.events,
        }
    }
}

/// Waits up to `timeout` for the first chunk (or, with [`Deadline::AfterStart`], for a worker to
/// start the task, then up to its `answer` limit for the first chunk). A failure before
/// it is an error response; a timeout before a worker started says the cluster is busy
/// and names the task, which stays queued. Errors are written in `lang`, the prompt's.
/// When the process begins `stopping` while no
/// worker runs the task, the client is told to come back (503) and the task stays queued
/// for the next start; a task a worker runs is waited for (shutdown lets it finish).
pub async fn first_chunk(
    task_id: TaskId,
    events: EventStream,
    timeout: Duration,
    deadline: Deadline,
    lang: Lang,
    stopping: &CancellationToken,
) -> Result<FirstChunk, ApiError> {
    let mut wait = FirstWait::new(task_id, events, timeout, deadline, lang, stopping);
    let chunk = wait.chunk().await?;
    Ok(wait.into_first(chunk))
}

/// Reads an answer to its end. A failure after the first token is an error response too:
/// a non-streaming client has nothing else to show. Its message is in `lang`.
pub async fn collect(task_id: TaskId, first: FirstChunk, lang: Lang) -> Result<Answer, ApiError> {
    let mut out = Answer::default();
    out.push(&first.chunk);
    let mut rest = first.rest;
    while out.finish_reason.is_none() {
        match rest.next().await {
            Some(TaskEvent::Chunk { chunk }) => out.push(&chunk),
            Some(TaskEvent::Failed { message }) => return Err(failed(task_id, &message, lang)),
            Some(TaskEvent::Unrecorded) => {
                return Err(ApiError::StoreUnavailable { lang });
            }
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

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::chat::Chunk;

    fn events(items: Vec<TaskEvent>) -> EventStream {
        Box::pin(futures::stream::iter(items).chain(futures::stream::pending()))
    }

    fn started() -> TaskEvent {
        TaskEvent::Started {
            worker: WorkerName::parse("moon").unwrap(),
            loading: false,
        }
    }

    const ROUTE: Duration = Duration::from_secs(60);

    /// A task that starts at once and sends its first piece, `text`, `after` that.
    fn started_then_after(after: Duration, text: &str) -> EventStream {
        let answer = TaskEvent::Chunk {
            chunk: Chunk::Content { text: text.into() },
        };
        Box::pin(
            futures::stream::iter(vec![started()]).chain(
                futures::stream::once(async move {
                    tokio::time::sleep(after).await;
                    answer
                })
                .chain(futures::stream::pending()),
            ),
        )
    }

    /// A worker that started a whole answer and never reports again (its machine died)
    /// does not hold the client forever: the answer limit ends the wait.
    #[tokio::test(start_paused = true)]
    async fn a_whole_answer_is_awaited_up_to_its_limit_after_the_start() {
        let id = TaskId::new();
        let deadline = Deadline::AfterStart {
            answer: Duration::from_secs(600),
        };
        let begun = tokio::time::Instant::now();
        let err = first_chunk(
            id,
            events(vec![started()]),
            ROUTE,
            deadline,
            Lang::En,
            &CancellationToken::new(),
        )
        .await
        .err()
        .unwrap();
        assert!(
            matches!(&err, ApiError::Upstream { message, task_id: Some(t) } if *t == id && message.contains("600 s")),
            "{err:?}"
        );
        assert_eq!(begun.elapsed(), Duration::from_secs(600));

        // Without a start, the route timeout says busy.
        let err = first_chunk(
            id,
            events(vec![]),
            ROUTE,
            deadline,
            Lang::En,
            &CancellationToken::new(),
        )
        .await
        .err()
        .unwrap();
        assert!(matches!(err, ApiError::Busy { .. }), "{err:?}");

        // A stream is not allowed past the route timeout after its start.
        let err = first_chunk(
            id,
            events(vec![started()]),
            ROUTE,
            Deadline::RouteTimeout,
            Lang::En,
            &CancellationToken::new(),
        )
        .await
        .err()
        .unwrap();
        assert!(matches!(err, ApiError::Busy { .. }), "{err:?}");
    }

    /// At shutdown a client whose task no worker runs is told to come back; one whose task
    /// runs waits for it (the shutdown lets it finish), also when a worker hands it on.
    #[tokio::test(start_paused = true)]
    async fn shutdown_answers_the_clients_of_tasks_not_started() {
        let id = TaskId::new();
        let stopping = CancellationToken::new();
        stopping.cancel();
        let err = first_chunk(
            id,
            events(vec![]),
            ROUTE,
            Deadline::RouteTimeout,
            Lang::En,
            &stopping,
        )
        .await
        .err()
        .unwrap();
        assert!(
            matches!(err, ApiError::ShuttingDown { task_id: Some(t), .. } if t == id),
            "{err:?}"
        );
        assert_eq!(err.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);

        let running = started_then_after(Duration::from_secs(5), "hi");
        let got = first_chunk(
            id,
            running,
            ROUTE,
            Deadline::RouteTimeout,
            Lang::En,
            &stopping,
        )
        .await
        .unwrap();
        assert!(matches!(got.chunk, Chunk::Content { ref text } if text == "hi"));

        let handed_on = TaskEvent::Retrying {
            worker: WorkerName::parse("laptop").unwrap(),
            reason: "moon went away".into(),
        };
        let err = first_chunk(
            id,
            events(vec![started(), handed_on]),
            ROUTE,
            Deadline::RouteTimeout,
            Lang::En,
            &stopping,
        )
        .await
        .err()
        .unwrap();
        assert!(
            matches!(err, ApiError::ShuttingDown { .. }),
            "back in the queue: {err:?}"
        );
    }

    /// The front door looks away (sends a keep-alive) and waits again: nothing is lost, the
    /// start and whether the model loads are remembered, and the chunk still comes.
    #[tokio::test(start_paused = true)]
    async fn a_wait_given_up_for_a_moment_goes_on_where_it_was() {
        let loading = TaskEvent::Started {
            worker: WorkerName::parse("moon").unwrap(),
            loading: true,
        };
        let answer = TaskEvent::Chunk {
            chunk: Chunk::Content { text: "hi".into() },
        };
        let later = futures::stream::once(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            answer
        });
        let events = Box::pin(
            futures::stream::iter(vec![loading])
                .chain(later)
                .chain(futures::stream::pending()),
        );
        let mut wait = FirstWait::new(
            TaskId::new(),
            events,
            ROUTE,
            Deadline::RouteTimeout,
            Lang::En,
            &CancellationToken::new(),
        );
        let begun = wait.begun();
        let looked_away = tokio::time::timeout(Duration::from_secs(1), wait.chunk()).await;
        assert!(looked_away.is_err(), "no chunk within a second");
        let started = wait.started().expect("the start was seen");
        assert!(started.loading);
        assert_eq!(started.at, begun);
        assert_eq!(wait.worker().map(WorkerName::as_str), Some("moon"));
        let chunk = wait.chunk().await.unwrap();
        assert_eq!(chunk, Chunk::Content { text: "hi".into() });
        assert_eq!(begun.elapsed(), Duration::from_secs(5));
        let first = wait.into_first(chunk);
        assert_eq!(first.worker.unwrap().as_str(), "moon");
    }

    /// A task whose row could not be written answers 503 (the store), not 502 (a backend).
    #[tokio::test]
    async fn an_unrecorded_task_is_the_stores_failure() {
        let id = TaskId::new();
        let err = first_chunk(
            id,
            events(vec![started(), TaskEvent::Unrecorded]),
            ROUTE,
            Deadline::RouteTimeout,
            Lang::En,
            &CancellationToken::new(),
        )
        .await
        .err()
        .unwrap();
        assert_eq!(err.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(err.openai_body()["error"]["code"], "store_unavailable");
    }

    #[tokio::test(start_paused = true)]
    async fn the_whole_answer_arrives_after_the_route_timeout() {
        let id = TaskId::new();
        let late = started_then_after(Duration::from_secs(300), "late but whole");
        let deadline = Deadline::AfterStart {
            answer: Duration::from_secs(600),
        };
        let got = first_chunk(
            id,
            late,
            ROUTE,
            deadline,
            Lang::En,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            got.chunk,
            Chunk::Content {
                text: "late but whole".into()
            }
        );
        assert_eq!(got.worker.unwrap().as_str(), "moon");
    }
}
