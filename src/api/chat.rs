//! The flow both chat front doors share: turn → submit → first token → a stream of
//! answer pieces (with the routing decoration when configured) or one whole answer.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use futures::StreamExt;
use futures::stream::BoxStream;

use super::answer::{Started, Wait, collect, first_chunk};
use super::error::ApiError;
use super::route::{client_identity, header};
use crate::chat::Chunk;
use crate::domain::TaskId;
use crate::events::TaskEvent;
use crate::routing::RouteDecision;
use crate::service::Coordinator;
use crate::turn::decoration::{Decoration, RouteInfo};
use crate::turn::{Answer, ClientContext, Turn};
use crate::web::{Lang, detect_language};

/// What a chat front door needs after submitting: who answers and how to decorate it.
pub struct ChatStart {
    pub task_id: TaskId,
    pub decision: RouteDecision,
    pub worker: String,
    pub decoration: Decoration,
    pub started: Started,
    /// The language of the user's prompt, for messages the chat shows.
    pub lang: Lang,
}

/// One piece of a streamed answer, after decoration.
pub enum Piece {
    Chunk(Chunk),
    /// The task failed after the first token; the message is safe to show.
    Failed(String),
}

/// `x-coordinator-task-id`, `-domain`, `-model`, `-worker` and `-queue`.
pub fn decision_headers(
    task_id: TaskId,
    decision: &RouteDecision,
    worker: &str,
) -> Vec<(HeaderName, HeaderValue)> {
    let pairs = [
        ("x-coordinator-task-id", task_id.to_string()),
        ("x-coordinator-domain", decision.domain.clone()),
        ("x-coordinator-model", decision.model.to_string()),
        ("x-coordinator-worker", worker.to_owned()),
        ("x-coordinator-queue", decision.lane.to_string()),
    ];
    pairs
        .into_iter()
        .filter_map(|(k, v)| Some((HeaderName::from_static(k), HeaderValue::from_str(&v).ok()?)))
        .collect()
}

/// A failure after the answer started, as the chat shows it.
fn failure_message(task_id: TaskId, detail: &str, lang: Lang) -> String {
    match lang {
        Lang::Ja => format!("回答の途中でエラーが発生しました（タスク {task_id}）: {detail}"),
        Lang::En => format!("task {task_id} failed: {detail}"),
    }
}

/// The client's identity and Open WebUI headers.
pub fn client_context(headers: &HeaderMap) -> ClientContext {
    ClientContext {
        chat_id_header: header(headers, "x-openwebui-chat-id"),
        task_header: header(headers, "x-openwebui-task"),
        client_identity: client_identity(headers),
    }
}

/// Whether a request lets its turn be remembered: not when it says
/// `X-Coordinator-Remember: false`, nor for Open WebUI's temporary chats.
pub fn may_remember(headers: &HeaderMap, thread: &str) -> bool {
    let refused = header(headers, "x-coordinator-remember").is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "false" | "0" | "no" | "off"
        )
    });
    let temporary = thread.starts_with("temporary:") || thread.starts_with("local:");
    !refused && !temporary
}

/// Submits a turn and waits for its first token: within `[timeouts] route_s` for a stream;
/// for a whole answer, for a worker to start it within that time, then for the answer as
/// long as the backend may take (`[timeouts] answer_s`).
/// Errors a chat shows are in the language of the user's prompt.
pub async fn start(state: &Coordinator, turn: Turn) -> Result<ChatStart, ApiError> {
    let lang = detect_language(&turn.prompt);
    let timeouts = &state.config.timeouts;
    let wait = if turn.whole_answer {
        // The backend call is bounded by answer_s; the route timeout on top covers a
        // failover's wait for another worker.
        Wait::Started {
            answer: Duration::from_secs(timeouts.answer_s + timeouts.route_s),
        }
    } else {
        Wait::FirstChunk
    };
    let sub = state.submit_for_answer(turn).await?;
    let timeout = Duration::from_secs(state.config.timeouts.route_s);
    let started = first_chunk(sub.task_id, sub.events, timeout, wait)
        .await
        .map_err(|e| e.in_language(lang))?;
    let worker = started
        .worker
        .as_ref()
        .or(sub.worker_hint.as_ref())
        .map(ToString::to_string)
        .unwrap_or_default();
    let decoration = if sub.decision.internal_task.is_some() {
        Decoration::default()
    } else {
        let info = RouteInfo {
            domain: sub.decision.domain.clone(),
            model: sub.decision.model.to_string(),
            worker: worker.clone(),
            queue: sub.decision.lane.to_string(),
        };
        Decoration::new(&info, state.config.server.routing_info)
    };
    Ok(ChatStart {
        task_id: sub.task_id,
        decision: sub.decision,
        worker,
        decoration,
        started,
        lang,
    })
}

impl ChatStart {
    /// The decision as HTTP headers, on every response whatever `routing_info` says.
    pub fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        decision_headers(self.task_id, &self.decision, &self.worker)
    }

    /// The whole answer, decorated.
    pub async fn into_answer(self) -> Result<(Answer, Vec<(HeaderName, HeaderValue)>), ApiError> {
        let headers = self.headers();
        let decoration = self.decoration.clone();
        let lang = self.lang;
        let mut answer = collect(self.task_id, self.started)
            .await
            .map_err(|e| e.in_language(lang))?;
        if answer.tool_calls.is_empty() && !decoration.is_empty() {
            answer.content = decoration.apply(&answer.content);
        }
        Ok((answer, headers))
    }

    /// The answer as it arrives: the header before the first token, the footer before the
    /// end (both skipped for tool-call answers), and a failure as a final piece.
    pub fn into_pieces(self) -> BoxStream<'static, Piece> {
        let Self {
            task_id,
            decoration,
            started,
            lang,
            ..
        } = self;
        let Started {
            first, mut rest, ..
        } = started;
        let header = decoration.header().to_owned();
        let footer = decoration.footer().to_owned();
        Box::pin(async_stream::stream! {
            let mut saw_tools = matches!(first, Chunk::ToolCalls { .. });
            if !header.is_empty() && !saw_tools {
                yield Piece::Chunk(Chunk::Content { text: header });
            }
            let mut next = Some(first);
            loop {
                let chunk = match next.take() {
                    Some(c) => c,
                    None => match rest.next().await {
                        Some(TaskEvent::Chunk { chunk }) => chunk,
                        Some(TaskEvent::Failed { message }) => {
                            yield Piece::Failed(failure_message(task_id, &message, lang));
                            break;
                        }
                        Some(TaskEvent::Started { .. } | TaskEvent::Retrying { .. }) => continue,
                        None => {
                            yield Piece::Failed(failure_message(task_id, "the answer ended early", lang));
                            break;
                        }
                    },
                };
                match &chunk {
                    Chunk::ToolCalls { .. } => saw_tools = true,
                    Chunk::Done { .. } => {
                        if !footer.is_empty() && !saw_tools {
                            yield Piece::Chunk(Chunk::Content { text: footer.clone() });
                        }
                        yield Piece::Chunk(chunk);
                        break;
                    }
                    _ => {}
                }
                yield Piece::Chunk(chunk);
            }
        })
    }
}
