//! The chat front door over several wire formats. A [`ChatWire`] says how its request body
//! becomes a turn and how an answer goes back; [`chat`] is the one handler that runs the
//! flow every chat endpoint shares: parse → turn → submit ([`ChatReply::start`]) → first
//! chunk → the whole answer, or a stream of answer pieces (with the routing decoration when
//! configured). OpenAI's `POST /v1/chat/completions` and `POST /v1/responses`, Ollama's
//! `POST /api/chat` and Anthropic's `POST /v1/messages` are its formats.

use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::error::ApiError;
use super::http::{JsonBody, client_context, parse_body};
use super::queued::{Dress, Look, Queued, wait_note};
use super::wait::{Deadline, FirstChunk, FirstWait, Waiting, collect};
use crate::chat::{Chunk, ResponseMode};
use crate::dispatch::Cancelled;
use crate::domain::TaskId;
use crate::events::TaskEvent;
use crate::lang::{Lang, detect_language};
use crate::memory::thread_allows_memory;
use crate::people::Caller;
use crate::routing::RouteDecision;
use crate::service::AppState;
use crate::turn::decoration::Decoration;
use crate::turn::{Answer, ClientContext, Turn, TurnInput, build_turn};

/// A chat API's wire format. Whether the client streams is the [`TurnInput::response`] it
/// makes; its encoders stay pure, writing into the caller's buffer.
pub trait ChatWire: Send + 'static {
    /// The request body, read with our JSON extractor so errors name the bad field.
    type Request: DeserializeOwned + Send;
    /// What the encoders need from the request besides the turn.
    type Options: Send + 'static;
    /// Encodes one answer, whole or piece by piece; made once its first chunk is in.
    type Encoder: Send + 'static;
    /// The error response: OpenAI's `{"error":{...}}` or Ollama's `{"error":"..."}`.
    type Error: From<ApiError> + IntoResponse;

    /// The content type of a streamed answer.
    const STREAM_CONTENT_TYPE: &'static str;

    /// The answer to a request that needs no turn, given at once.
    fn answer_at_once(_req: &Self::Request) -> Option<Response> {
        None
    }

    /// Reads what the request refers to outside itself (an earlier response it
    /// continues) before it becomes a turn; most formats refer to nothing.
    fn resolve(
        req: Self::Request,
        _state: &AppState,
        _caller: &Caller,
    ) -> impl Future<Output = Result<Self::Request, ApiError>> + Send {
        std::future::ready(Ok(req))
    }

    /// Whether the turn's row keeps its conversation, for a later request that continues
    /// it by reference.
    fn keeps_conversation(_options: &Self::Options) -> bool {
        false
    }

    /// The request as the shared turn input, with the client's headers.
    fn into_turn_input(
        req: Self::Request,
        client: ClientContext,
    ) -> Result<(TurnInput, Self::Options), ApiError>;

    /// The encoder for `reply`, made as soon as its first chunk is in (or, for a stream
    /// still queued, when its head goes out).
    fn encoder(options: Self::Options, reply: &ChatReply) -> Self::Encoder;

    /// The whole answer, as one JSON body.
    fn encode_whole(encoder: Self::Encoder, answer: &Answer, out: &mut Vec<u8>);

    /// One piece of a streamed answer: a chunk, or the failure that ends it.
    fn encode_piece(encoder: &mut Self::Encoder, piece: Piece, out: &mut Vec<u8>);

    /// Headers a streamed answer carries besides its content type and the decision.
    fn stream_headers(_headers: &mut HeaderMap) {}
}

/// A chat request in wire format `W`.
pub async fn chat<W: ChatWire>(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<JsonBody, ApiError>,
) -> Result<Response, W::Error> {
    let JsonBody(body) = body?;
    // Boxed: the whole turn's state machine is large, and the server's layers move the
    // handler's future several times before and while they poll it; they now move a
    // pointer.
    Box::pin(reply::<W>(&state, &caller, &headers, &body))
        .await
        .map_err(W::Error::from)
}

async fn reply<W: ChatWire>(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let req: W::Request = parse_body(body)?;
    if let Some(res) = W::answer_at_once(&req) {
        return Ok(res);
    }
    let req = W::resolve(req, state, caller).await?;
    let (input, options) = W::into_turn_input(req, client_context(headers, caller)?)?;
    let mut turn = build_turn(input, &state.config.history)?;
    turn.keep_conversation = W::keeps_conversation(&options);
    turn.remember &= thread_allows_memory(&turn.thread_id);
    let mode = turn.response;
    let reply = ChatReply::start(state, turn).await?;
    let mut encoder = W::encoder(options, &reply);
    match mode {
        ResponseMode::Whole => {
            let (answer, extra) = reply.into_answer().await?;
            let mut out = Vec::with_capacity(answer.content.len() + 256);
            W::encode_whole(encoder, &answer, &mut out);
            let mut res = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                out,
            )
                .into_response();
            res.headers_mut().extend(extra);
            Ok(res)
        }
        ResponseMode::Streamed => {
            let extra = reply.headers();
            let body = body_frames(reply.into_pieces(), move |piece, buf| {
                W::encode_piece(&mut encoder, piece, buf);
            });
            let mut res = Response::new(Body::from_stream(body));
            let h = res.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(W::STREAM_CONTENT_TYPE),
            );
            W::stream_headers(h);
            h.extend(extra);
            Ok(res)
        }
    }
}

/// A submitted chat turn: who answers and the answer so far, from its first chunk on, or
/// (a stream still queued) the wait for it.
pub struct ChatReply {
    pub task_id: TaskId,
    pub decision: RouteDecision,
    /// The worker that answers (the expected one while the task is queued).
    pub worker: String,
    /// The language of the user's prompt, for messages the chat shows.
    pub lang: Lang,
    answer: Answering,
    /// Cancels the task if this reply is dropped before its answer ends.
    stop: StopOnDisconnect,
}

/// Where a reply's answer stands when the front door answers.
enum Answering {
    /// The first chunk is in (the common case), and with it the decoration.
    Ready {
        first: FirstChunk,
        decoration: Decoration,
    },
    /// A stream whose first chunk did not come within `[timeouts] queued_head_ms`.
    Queued(Box<Queued>),
}

/// Stop means stop: when a chat's client goes away before its answer ends (Open WebUI's
/// Stop button closes the stream; a client waiting for a whole answer hangs up, and the
/// server drops its request), the task is cancelled, so a queued task never starts and a
/// running one frees its backend. Disarmed once the answer ended or the client was given
/// an error instead.
pub(super) struct StopOnDisconnect {
    state: Option<AppState>,
    task_id: TaskId,
}

impl StopOnDisconnect {
    fn new(state: &AppState, task_id: TaskId) -> Self {
        Self {
            state: Some(state.clone()),
            task_id,
        }
    }

    pub(super) fn disarm(&mut self) {
        self.state = None;
    }
}

impl Drop for StopOnDisconnect {
    fn drop(&mut self) {
        let Some(state) = self.state.take() else {
            return;
        };
        let id = self.task_id;
        // This process's worker stops at once, before anything is written.
        state.dispatch.cancels().cancel(id);
        after_the_client(async move {
            match super::tasks::cancel(&state, id, "the client went away").await {
                Ok(Cancelled::Cancelled) => {
                    tracing::info!(task_id = %id, "cancelled: the client went away");
                }
                Ok(Cancelled::AlreadyEnded | Cancelled::Unknown) => {}
                Err(e) => {
                    tracing::warn!(task_id = %id, error = %e, "cannot cancel after the client went away")
                }
            }
        });
    }
}

/// A chat turn's submission, which ends even if its client goes away meanwhile (the
/// server drops the request): then the rest of it runs on its own, and the task it
/// recorded is cancelled as soon as it is ([`StopOnDisconnect`]), so it never starts. A
/// client that hangs up while its row is being written or its job queued is thus not left
/// with a task that runs for nobody.
struct Submitting {
    /// The submission, which hands back the state it was made with (for a cancel).
    submission: Option<futures::future::BoxFuture<'static, (AppState, Submission)>>,
}

type Submission = Result<crate::service::Submitted, crate::service::SubmitError>;

impl Submitting {
    fn of(state: &AppState, turn: Turn) -> Self {
        let state = state.clone();
        Self::new(Box::pin(async move {
            let submitted = state.submit_for_answer(turn).await;
            (state, submitted)
        }))
    }

    fn new(submission: futures::future::BoxFuture<'static, (AppState, Submission)>) -> Self {
        Self {
            submission: Some(submission),
        }
    }
}

impl std::future::Future for Submitting {
    type Output = Submission;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Submission> {
        let Some(submission) = self.submission.as_mut() else {
            return std::task::Poll::Pending;
        };
        let (_, done) = std::task::ready!(submission.as_mut().poll(cx));
        self.submission = None;
        std::task::Poll::Ready(done)
    }
}

impl Drop for Submitting {
    fn drop(&mut self) {
        let Some(submission) = self.submission.take() else {
            return;
        };
        after_the_client(async move {
            if let (state, Ok(sub)) = submission.await {
                drop(StopOnDisconnect::new(&state, sub.task_id));
            }
        });
    }
}

/// Runs `work` on its own, its request's handler gone; with no runtime the process is
/// ending, and the task's row is recovered at start.
fn after_the_client(work: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(work);
    }
}

/// One piece of a streamed answer, after decoration.
pub enum Piece {
    Chunk(Chunk),
    /// The task failed after the first token; the message is safe to show.
    Failed(String),
    /// No token yet: a keep-alive saying how the wait stands (only once the head went out
    /// before the first chunk).
    Waiting(Waiting),
    /// The task failed, or was not started in time, before its first token, after the
    /// head went out; in the API's error shape, as the response would have been.
    Error(ApiError),
}

/// The most pieces one body frame takes.
const MAX_PIECES_PER_FRAME: usize = 64;

/// A streamed answer's body: `encode` writes each piece, and every piece that is ready
/// when the body is polled goes into one frame. A burst of tokens (a backend that sends
/// several per read, a client that reads slower than tokens come) then costs one write
/// to the client instead of one each; a piece that arrives alone still goes out alone,
/// at once.
pub fn body_frames(
    pieces: BoxStream<'static, Piece>,
    mut encode: impl FnMut(Piece, &mut Vec<u8>) + Send + 'static,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::convert::Infallible>> + Send + 'static {
    pieces.ready_chunks(MAX_PIECES_PER_FRAME).map(move |batch| {
        let mut buf = Vec::with_capacity(160 * batch.len());
        for piece in batch {
            encode(piece, &mut buf);
        }
        Ok(bytes::Bytes::from(buf))
    })
}

/// `x-coordinator-task-id`, `-domain`, `-model`, `-worker` and `-queue`.
pub fn decision_headers(
    task_id: TaskId,
    decision: &RouteDecision,
    worker: &str,
) -> Vec<(HeaderName, HeaderValue)> {
    let pairs = [
        ("x-coordinator-task-id", task_id.to_string()),
        ("x-coordinator-domain", decision.domain.to_string()),
        ("x-coordinator-model", decision.model.to_string()),
        ("x-coordinator-worker", worker.to_owned()),
        ("x-coordinator-queue", decision.lane().to_string()),
    ];
    pairs
        .into_iter()
        .filter_map(|(k, v)| Some((HeaderName::from_static(k), HeaderValue::from_str(&v).ok()?)))
        .collect()
}

/// A failure after the answer started, as the chat shows it; `detail` is in `lang`
/// already (what the worker said may be shown), or `None` when the answer just stopped.
fn failure_message(task_id: TaskId, detail: Option<&str>, lang: Lang) -> String {
    let detail = detail.unwrap_or(match lang {
        Lang::Ja => "回答が途中で途切れました",
        Lang::En => "the answer ended early",
    });
    match lang {
        Lang::Ja => format!("回答の途中でエラーが発生しました（タスク {task_id}）: {detail}"),
        Lang::En => format!("task {task_id} failed: {detail}"),
    }
}

impl ChatReply {
    /// Submits a turn and waits for its first token: within `[timeouts] route_s` for a stream;
    /// for a whole answer, for a worker to start it within that time, then for the answer as
    /// long as the backend may take (`[timeouts] answer_s`). A stream whose first token has
    /// not come within `[timeouts] queued_head_ms` is answered at once instead, and waits
    /// in its body (see `src/api/queued.rs`).
    /// Errors a chat shows are in the language of the user's prompt.
    pub async fn start(state: &AppState, turn: Turn) -> Result<Self, ApiError> {
        let lang = detect_language(&turn.prompt);
        let timeouts = &state.config.timeouts;
        let mode = turn.response;
        let deadline = match mode {
            // The backend call is bounded by answer_s; the route timeout on top covers a
            // failover's wait for another worker.
            ResponseMode::Whole => Deadline::AfterStart {
                answer: Duration::from_secs(timeouts.answer_s + timeouts.route_s),
            },
            ResponseMode::Streamed => Deadline::RouteTimeout,
        };
        // Structured output (JSON) is returned as the backend wrote it: no routing info.
        let structured = turn.params.format.is_some();
        let sub = Submitting::of(state, turn)
            .await
            .map_err(|e| ApiError::from(e).in_language(lang))?;
        let mut stop = StopOnDisconnect::new(state, sub.task_id);
        let timeout = Duration::from_secs(timeouts.route_s);
        let dress = Dress {
            mode: state.config.server.routing_info,
            plain: sub.decision.internal_task.is_some() || structured,
        };
        let mut wait = FirstWait::new(
            sub.task_id,
            sub.events,
            timeout,
            deadline,
            lang,
            &state.shutdown,
        );
        let head_after = Duration::from_millis(timeouts.queued_head_ms);
        let early = async {
            tokio::select! {
                biased;
                got = wait.chunk() => Some(got),
                () = tokio::time::sleep(head_after) => None,
            }
        }
        .instrument(sub.span.clone())
        .await;
        let hint = || {
            sub.worker_hint
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        };
        let (got, ahead) = match early {
            Some(got) => (got, None),
            None if mode.is_streamed() => {
                let queued = Queued {
                    wait,
                    look: Look::new(
                        state,
                        &sub.decision,
                        sub.task_id,
                        (sub.priority, sub.person.clone()),
                        sub.prompt_tokens,
                    ),
                    dress,
                    keep_alive: Duration::from_secs(timeouts.keep_alive_s),
                    worker_hint: hint(),
                    span: sub.span,
                };
                return Ok(Self {
                    task_id: sub.task_id,
                    worker: queued.worker_hint.clone(),
                    decision: sub.decision,
                    lang,
                    answer: Answering::Queued(Box::new(queued)),
                    stop,
                });
            }
            None => {
                // A whole answer keeps waiting as before; only its header may say so.
                let look = Look::new(
                    state,
                    &sub.decision,
                    sub.task_id,
                    (sub.priority, sub.person.clone()),
                    sub.prompt_tokens,
                );
                let ahead = match dress.shows_wait() {
                    true => look.now().await.map(|w| w.ahead),
                    false => None,
                };
                (wait.chunk().instrument(sub.span).await, ahead)
            }
        };
        let chunk = match got {
            Ok(chunk) => chunk,
            Err(e) => {
                // The client hears why; the task itself goes on (it may still be
                // answered, and `GET /tasks/{id}` shows it).
                stop.disarm();
                return Err(e);
            }
        };
        let worker = wait.worker().map_or_else(hint, ToString::to_string);
        let note = match wait.started() {
            Some(started) if dress.shows_wait() && (started.loading || ahead.is_some()) => {
                let queued = ahead.map(|n| (wait.begun(), n));
                wait_note(lang, &worker, &sub.decision.model, queued, Some(started))
            }
            _ => String::new(),
        };
        let decoration = dress.decoration(&sub.decision, &worker, note);
        Ok(Self {
            task_id: sub.task_id,
            decision: sub.decision,
            worker,
            lang,
            answer: Answering::Ready {
                first: wait.into_first(chunk),
                decoration,
            },
            stop,
        })
    }

    /// The decision as HTTP headers, on every response whatever `routing_info` says.
    pub fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        decision_headers(self.task_id, &self.decision, &self.worker)
    }

    /// The whole answer, decorated.
    pub async fn into_answer(self) -> Result<(Answer, Vec<(HeaderName, HeaderValue)>), ApiError> {
        let headers = self.headers();
        let Self {
            task_id,
            answer,
            lang,
            mut stop,
            ..
        } = self;
        let Answering::Ready { first, decoration } = answer else {
            // Only a stream is answered before its first chunk.
            return Err(ApiError::Internal(format!(
                "task {task_id}: a whole answer was asked of a queued stream"
            )));
        };
        let answer = collect(task_id, first, lang).await;
        stop.disarm();
        let mut answer = answer?;
        if answer.tool_calls.is_empty() && !decoration.is_empty() {
            answer.content = decoration.apply(&answer.content);
        }
        Ok((answer, headers))
    }

    /// The answer as it arrives: the header before the first token, the footer before the
    /// end (both skipped for tool-call answers), and a failure as a final piece; for a
    /// stream still queued, keep-alives before all that.
    pub fn into_pieces(self) -> BoxStream<'static, Piece> {
        let Self {
            task_id,
            decision,
            answer,
            lang,
            stop,
            ..
        } = self;
        match answer {
            Answering::Ready { first, decoration } => {
                Box::pin(answer_pieces(task_id, &decoration, first, lang, stop))
            }
            Answering::Queued(queued) => queued.into_pieces(decision, task_id, lang, stop),
        }
    }
}

/// An answer's pieces from its first chunk on, decorated (see [`ChatReply::into_pieces`]).
pub(super) fn answer_pieces(
    task_id: TaskId,
    decoration: &Decoration,
    first: FirstChunk,
    lang: Lang,
    mut stop: StopOnDisconnect,
) -> impl futures::Stream<Item = Piece> + Send + 'static {
    let FirstChunk {
        chunk: first,
        mut rest,
        ..
    } = first;
    let header = decoration.header().to_owned();
    let footer = decoration.footer().to_owned();
    async_stream::stream! {
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
                        stop.disarm();
                        yield Piece::Failed(failure_message(task_id, Some(&message), lang));
                        break;
                    }
                    Some(TaskEvent::Unrecorded) => {
                        stop.disarm();
                        yield Piece::Failed(ApiError::StoreUnavailable { lang }.to_string());
                        break;
                    }
                    Some(TaskEvent::Started { .. } | TaskEvent::Retrying { .. }) => continue,
                    None => {
                        stop.disarm();
                        yield Piece::Failed(failure_message(task_id, None, lang));
                        break;
                    }
                },
            };
            match &chunk {
                Chunk::ToolCalls { .. } => saw_tools = true,
                Chunk::Done { .. } => {
                    stop.disarm();
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
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use futures::channel::mpsc;

    use super::*;
    use crate::domain::TaskStatus;

    fn text(t: &str) -> Piece {
        Piece::Chunk(Chunk::Content { text: t.into() })
    }

    fn encode(piece: Piece, buf: &mut Vec<u8>) {
        match piece {
            Piece::Chunk(Chunk::Content { text }) => buf.extend_from_slice(text.as_bytes()),
            Piece::Chunk(_) => buf.extend_from_slice(b"<chunk>"),
            Piece::Failed(m) => buf.extend_from_slice(m.as_bytes()),
            Piece::Waiting(_) => buf.extend_from_slice(b"<waiting>"),
            Piece::Error(e) => buf.extend_from_slice(e.to_string().as_bytes()),
        }
        buf.push(b'|');
    }

    /// A client that hangs up while its turn is being submitted: the submission goes on
    /// without it, and the task it records ends cancelled, never run.
    #[tokio::test]
    async fn a_submission_whose_client_left_ends_with_its_task_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let state = crate::service::tests::service(&dir).await;
        let turn = crate::turn::build_turn(
            crate::turn::TurnInput {
                messages: vec![crate::chat::ChatMessage::user("never mind")],
                ..Default::default()
            },
            &state.config.history,
        )
        .unwrap();
        let (go, gate) = tokio::sync::oneshot::channel::<()>();
        let owned = state.clone();
        let mut submitting = Submitting::new(Box::pin(async move {
            let _ = gate.await;
            let submitted = owned.submit_for_answer(turn).await;
            (owned, submitted)
        }));
        assert!(
            (&mut submitting).now_or_never().is_none(),
            "held at the gate"
        );
        drop(submitting);
        go.send(()).unwrap();

        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let row = loop {
            let rows = state
                .store
                .list(&crate::store::TaskFilter {
                    limit: 10,
                    ..Default::default()
                })
                .await
                .unwrap();
            if let Some(row) = rows.into_iter().find(|r| r.status != TaskStatus::Queued) {
                break row;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the task never ended"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(row.status, TaskStatus::Cancelled, "{row:?}");
        assert!(
            row.error
                .as_deref()
                .unwrap_or_default()
                .contains("the client went away"),
            "{row:?}"
        );
    }

    #[tokio::test]
    async fn pieces_ready_together_share_a_frame_and_a_lone_piece_goes_out_at_once() {
        let (pieces, rx) = mpsc::unbounded();
        let mut body = Box::pin(body_frames(rx.boxed(), encode));
        for t in ["a", "b", "c"] {
            pieces.unbounded_send(text(t)).unwrap();
        }
        assert_eq!(body.next().await.unwrap().unwrap(), "a|b|c|");
        assert!(
            body.next().now_or_never().is_none(),
            "nothing ready, no frame"
        );
        pieces.unbounded_send(text("d")).unwrap();
        assert_eq!(body.next().await.unwrap().unwrap(), "d|");
        pieces
            .unbounded_send(Piece::Failed("broken".into()))
            .unwrap();
        drop(pieces);
        assert_eq!(body.next().await.unwrap().unwrap(), "broken|");
        assert!(body.next().await.is_none());
    }

    #[tokio::test]
    async fn a_long_burst_is_split_into_bounded_frames() {
        let burst = (0..MAX_PIECES_PER_FRAME + 1).map(|i| text(&i.to_string()));
        let mut body = Box::pin(body_frames(futures::stream::iter(burst).boxed(), encode));
        let first = body.next().await.unwrap().unwrap();
        assert_eq!(
            first.iter().filter(|b| **b == b'|').count(),
            MAX_PIECES_PER_FRAME
        );
        let last = MAX_PIECES_PER_FRAME.to_string() + "|";
        assert_eq!(body.next().await.unwrap().unwrap(), last.as_bytes());
        assert!(body.next().await.is_none());
    }
}
