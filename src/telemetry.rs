//! Logging: `tracing` to stderr, filtered by `RUST_LOG` (default `info`). Colours only
//! when stderr is a terminal, so logs piped to files or journald stay plain text. Every
//! line written for a task runs in its [`task_span`].

use std::io::IsTerminal;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tracing::Span;
use tracing_subscriber::EnvFilter;

use crate::domain::{Lane, TaskId, ThreadId};

/// Installs the global subscriber. Safe to call more than once (later calls do nothing).
pub fn init(json: bool) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.compact().try_init()
    };
}

/// The span of one task: its id, its conversation's thread and its lane, carried by every
/// log line written for the task (its submission at the front door, the worker, the web
/// lane, the backend call, the memory write), so that no line has to name them itself.
///
/// A root span: the front door's and the worker's are two spans with the same fields,
/// however the job reached its worker (from a queue, in another process, or handed over
/// directly while its submission runs in its own).
pub fn task_span(task_id: TaskId, thread_id: Option<&ThreadId>, lane: &Lane) -> Span {
    let span = tracing::info_span!(
        parent: None,
        "task",
        task_id = %task_id,
        thread_id = tracing::field::Empty,
        lane = %lane,
    );
    if let Some(thread_id) = thread_id {
        span.record("thread_id", thread_id.as_str());
    }
    span
}

/// A stream whose every poll runs inside `span`: a task's events, read by its front door,
/// so that what is logged while they are read is the task's.
pub struct InSpan<S> {
    inner: S,
    span: Span,
}

impl<S> InSpan<S> {
    pub fn new(inner: S, span: Span) -> Self {
        Self { inner, span }
    }
}

impl<S: Stream + Unpin> Stream for InSpan<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.inner.poll_next_unpin(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use futures::StreamExt;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::testkit::log_capture::Capture;

    /// What a stream logs while it is polled through [`InSpan`] carries the task's span.
    #[test]
    fn a_stream_in_a_task_span_logs_in_it() {
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        let id = TaskId::new();
        let thread = ThreadId::parse("t9").unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let polled = futures::stream::poll_fn(|_| {
                tracing::info!("polled");
                Poll::Ready(Some(1))
            });
            let mut s = InSpan::new(polled, task_span(id, Some(&thread), &Lane::Web));
            assert_eq!(futures::executor::block_on(s.next()), Some(1));
            tracing::info!("outside");
        });
        let captured = capture.events();
        let polled = captured.iter().find(|c| c.message() == "polled").unwrap();
        assert_eq!(polled.spans.get("task_id"), Some(&id.to_string()));
        assert_eq!(
            polled.spans.get("thread_id").map(String::as_str),
            Some("t9")
        );
        assert_eq!(
            polled.spans.get("lane").map(String::as_str),
            Some("tasks:web")
        );
        let outside = captured.iter().find(|c| c.message() == "outside").unwrap();
        assert!(outside.spans.is_empty(), "{outside:?}");
    }
}
