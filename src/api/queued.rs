//! What a person sees while a chat waits: the slow path of [`super::chat::ChatReply::start`].
//!
//! A streamed chat whose first token has not come within `[timeouts] queued_head_ms` is
//! answered 200 at once; its body then carries a keep-alive piece ([`Piece::Waiting`])
//! at once and every `[timeouts] keep_alive_s` (its place in its lane and the expected
//! time to its first token, looked up afresh each time), so neither the client nor a
//! proxy gives up. A failure before the first token becomes the stream's last piece
//! ([`Piece::Error`], in the API's error shape). Once the first chunk is in, the answer
//! goes on as on the fast path. With `[server] routing_info = "header_footer"`, the
//! header then says why the answer waited ([`wait_note`]), for streamed and whole answers
//! alike.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use tracing::{Instrument, Span};

use super::chat::{Piece, StopOnDisconnect, answer_pieces};
use super::wait::{FirstWait, StartedAt, Waiting};
use crate::config::RoutingInfo;
use crate::dispatch::Dispatcher;
use crate::domain::{Lane, ModelName, Priority, TaskId};
use crate::lang::Lang;
use crate::queue::eta::{QueueWait, Waiter, queue_wait};
use crate::routing::RouteDecision;
use crate::service::AppState;
use crate::turn::decoration::{Decoration, RouteInfo};
use crate::worker::Directory;

/// How a reply is decorated: the mode, and whether this answer is left plain (an Open
/// WebUI background task, or structured output, which is returned as the backend wrote it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Dress {
    pub mode: RoutingInfo,
    pub plain: bool,
}

impl Dress {
    /// The decoration of an answer from `worker`; `wait` is why it waited, if it did.
    pub fn decoration(self, decision: &RouteDecision, worker: &str, wait: String) -> Decoration {
        if self.plain {
            return Decoration::default();
        }
        let info = RouteInfo {
            domain: decision.domain.to_string(),
            model: decision.model.to_string(),
            worker: worker.to_owned(),
            queue: decision.lane().to_string(),
            wait,
        };
        Decoration::new(&info, self.mode)
    }

    /// Whether a wait would be shown (only the header has room for it).
    pub fn shows_wait(self) -> bool {
        !self.plain && self.mode == RoutingInfo::HeaderFooter
    }
}

/// Where a task stands in its lane, asked of the queue and the workers' figures.
pub(super) struct Look {
    dispatch: Dispatcher,
    directory: Arc<dyn Directory>,
    lane: Lane,
    model: ModelName,
    task_id: TaskId,
    priority: Priority,
    person: crate::domain::Person,
    prompt_tokens: u32,
}

impl Look {
    /// Where `task_id`, of `decision`, `priority` and `person`, with a prompt of
    /// `prompt_tokens`, will stand.
    pub fn new(
        state: &AppState,
        decision: &RouteDecision,
        task_id: TaskId,
        (priority, person): (Priority, crate::domain::Person),
        prompt_tokens: u32,
    ) -> Self {
        Self {
            dispatch: state.dispatch.clone(),
            directory: state.directory.clone(),
            lane: decision.lane().clone(),
            model: decision.model.clone(),
            task_id,
            priority,
            person,
            prompt_tokens,
        }
    }

    /// The task's place and expected wait; `None` when it does not wait in its lane or the
    /// queue cannot say (logged).
    pub async fn now(&self) -> Option<QueueWait> {
        let task = Waiter {
            task_id: self.task_id,
            lane: &self.lane,
            model: &self.model,
            priority: self.priority,
            person: &self.person,
            prompt_tokens: self.prompt_tokens,
        };
        let looked = queue_wait(&self.dispatch, self.directory.as_ref(), &task).await;
        looked
            .inspect_err(
                |e| tracing::debug!(error = %e, "cannot read the task's place in its lane"),
            )
            .ok()
            .flatten()
    }
}

/// A streamed chat answered before its first chunk: what it needs to wait on.
pub(super) struct Queued {
    pub wait: FirstWait,
    pub look: Look,
    pub dress: Dress,
    pub keep_alive: Duration,
    pub worker_hint: String,
    pub span: Span,
}

/// What one turn of the wait brought.
enum Step {
    Got(Result<crate::chat::Chunk, super::error::ApiError>),
    Tick,
}

impl Queued {
    /// The answer's pieces: keep-alives until the first chunk, then the answer (decorated
    /// with why it waited), or the failure that came instead.
    pub fn into_pieces(
        self,
        decision: RouteDecision,
        task_id: TaskId,
        lang: Lang,
        mut stop: StopOnDisconnect,
    ) -> BoxStream<'static, Piece> {
        let Self {
            mut wait,
            look,
            dress,
            keep_alive,
            worker_hint,
            span,
        } = self;
        Box::pin(async_stream::stream! {
            let mut ticks = tokio::time::interval(keep_alive);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // How many answers went before it, when it was first seen in its lane.
            let mut ahead = None;
            let chunk = loop {
                let step = tokio::select! {
                    biased;
                    got = wait.chunk().instrument(span.clone()) => Step::Got(got),
                    _ = ticks.tick() => Step::Tick,
                };
                match step {
                    Step::Got(Ok(chunk)) => break chunk,
                    Step::Got(Err(e)) => {
                        // The client hears why; the task goes on where it can.
                        stop.disarm();
                        yield Piece::Error(e);
                        return;
                    }
                    Step::Tick => {
                        let place = match wait.started() {
                            Some(_) => None,
                            None => look.now().instrument(span.clone()).await,
                        };
                        let waiting = match place {
                            Some(p) => {
                                ahead.get_or_insert(p.ahead);
                                Waiting::Queued { position: p.position, eta_s: p.eta_whole_s() }
                            }
                            None => Waiting::NotQueued,
                        };
                        yield Piece::Waiting(waiting);
                    }
                }
            };
            let worker = wait.worker().map_or(worker_hint, ToString::to_string);
            let note = if dress.shows_wait() {
                let queued = ahead.map(|n| (wait.begun(), n));
                wait_note(lang, &worker, &decision.model, queued, wait.started())
            } else {
                String::new()
            };
            let decoration = dress.decoration(&decision, &worker, note);
            let first = wait.into_first(chunk);
            let rest = answer_pieces(task_id, &decoration, first, lang, stop);
            futures::pin_mut!(rest);
            while let Some(piece) = rest.next().await {
                yield piece;
            }
        })
    }
}

/// Why an answer waited, in `lang`, for the routing header; empty when it did not:
/// `queued` is when the wait began and how many answers went before it, when it was seen
/// waiting in its lane; `started` says whether the worker had to load the model (the time
/// from the start to now, the first chunk, is what the load and the prompt took).
pub(super) fn wait_note(
    lang: Lang,
    worker: &str,
    model: &ModelName,
    queued: Option<(tokio::time::Instant, usize)>,
    started: Option<StartedAt>,
) -> String {
    let now = tokio::time::Instant::now();
    let secs = |d: Duration| d.as_secs_f64().round().max(1.0) as u64;
    let mut parts = Vec::new();
    if let (Some((begun, ahead)), Some(s)) = (queued, started) {
        let waited = secs(s.at.saturating_duration_since(begun));
        parts.push(match (lang, ahead) {
            (Lang::En, 0) => format!("waited {waited} s in the queue"),
            (Lang::En, 1) => format!("waited {waited} s behind 1 answer"),
            (Lang::En, n) => format!("waited {waited} s behind {n} answers"),
            (Lang::Ja, 0) => format!("キューで {waited} 秒待ちました"),
            (Lang::Ja, n) => format!("{n} 件の回答の後ろで {waited} 秒待ちました"),
        });
    }
    if let Some(s) = started.filter(|s| s.loading) {
        let took = secs(now.saturating_duration_since(s.at));
        parts.push(match lang {
            Lang::En => format!("{worker}: loading {model}, about {took} s"),
            Lang::Ja => format!("{worker}: {model} を読み込み中、約 {took} 秒"),
        });
    }
    parts.join(match lang {
        Lang::En => "; ",
        Lang::Ja => "。",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelName {
        ModelName::parse("qwen2.5:14b").unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn the_note_says_how_long_it_waited_and_what_loaded_in_the_prompts_language() {
        let begun = tokio::time::Instant::now();
        tokio::time::advance(Duration::from_secs(8)).await;
        let at = tokio::time::Instant::now();
        tokio::time::advance(Duration::from_millis(11_600)).await;
        let cold = Some(StartedAt { at, loading: true });
        let warm = Some(StartedAt { at, loading: false });
        let queued = Some((begun, 2));
        assert_eq!(wait_note(Lang::En, "moon", &model(), None, None), "");
        assert_eq!(wait_note(Lang::En, "moon", &model(), None, warm), "");
        assert_eq!(
            wait_note(Lang::En, "moon", &model(), None, cold),
            "moon: loading qwen2.5:14b, about 12 s"
        );
        assert_eq!(
            wait_note(Lang::Ja, "moon", &model(), None, cold),
            "moon: qwen2.5:14b を読み込み中、約 12 秒"
        );
        assert_eq!(
            wait_note(Lang::En, "moon", &model(), queued, warm),
            "waited 8 s behind 2 answers"
        );
        assert_eq!(
            wait_note(Lang::Ja, "moon", &model(), queued, cold),
            "2 件の回答の後ろで 8 秒待ちました。moon: qwen2.5:14b を読み込み中、約 12 秒"
        );
        assert_eq!(
            wait_note(Lang::En, "moon", &model(), Some((begun, 1)), cold),
            "waited 8 s behind 1 answer; moon: loading qwen2.5:14b, about 12 s"
        );
        // Seen in the queue but never started (it failed instead): nothing to say.
        assert_eq!(wait_note(Lang::En, "moon", &model(), queued, None), "");
    }
}
