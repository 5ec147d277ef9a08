//! Logging: `tracing` to stderr, filtered by `RUST_LOG` (default `info`). Colours only
//! when stderr is a terminal, so logs piped to files or journald stay plain text. Every
//! line written for a task runs in its [`task_span`].

use std::io::IsTerminal;
use tracing::Span;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::domain::{Lane, TaskId, ThreadId};

/// What is logged when `RUST_LOG` is not set.
const DEFAULT_FILTER: &str = "info,sqlx=warn";

/// Installs the global subscriber. Safe to call more than once (later calls do nothing).
///
/// A `RUST_LOG` of targets and levels (`info,sqlx=warn`, `coordinator::worker=debug`) is
/// applied as a [`Targets`] filter, which costs nothing when a span is entered (every poll
/// of a task's work is); one that filters by span or field falls back to [`EnvFilter`].
pub fn init(json: bool) {
    let spec = std::env::var("RUST_LOG").unwrap_or_else(|_| DEFAULT_FILTER.to_owned());
    let (targets, env) = match spec.parse::<Targets>() {
        Ok(targets) => (Some(targets), None),
        Err(_) => (
            None,
            Some(EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))),
        ),
    };
    let registry = tracing_subscriber::registry().with(targets).with(env);
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = if json {
        registry.with(fmt.json()).try_init()
    } else {
        registry.with(fmt.compact()).try_init()
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
    tracing::info_span!(
        parent: None,
        "task",
        task_id = %task_id,
        thread_id = thread_id.map(ThreadId::as_str),
        lane = %lane,
    )
}
