//! Logging: `tracing` to stderr, filtered by `RUST_LOG` (default `info`), as human text or
//! (`[server] log_format = "json"`, `--log-json`) one JSON object a line. Colours only
//! when stderr is a terminal, so logs piped to files or journald stay plain text. Every
//! line written for a task runs in its [`task_span`].

use std::io::IsTerminal;
use tracing::Span;
use tracing_subscriber::Layer;
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
    let ansi = !json && std::io::stderr().is_terminal();
    let _ = tracing_subscriber::registry()
        .with(targets)
        .with(env)
        .with(format_layer(json, ansi, std::io::stderr))
        .try_init();
}

/// The layer that writes lines to `writer`: compact text (coloured when `ansi`), or one
/// JSON object a line with the current span and its parents (a task's id, thread, lane).
fn format_layer<S, W>(json: bool, ansi: bool, writer: W) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(writer);
    if json {
        Box::new(fmt.json().with_current_span(true).with_span_list(true))
    } else {
        Box::new(fmt.compact())
    }
}

/// A list of short texts as a log field, `a; b; c`: plainer to read than the list's
/// `Debug` form and cheaper to write (no escaping of every character), for a field logged
/// on every turn.
pub struct Listed<'a>(pub &'a [String]);

impl std::fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(item)?;
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Lines written by the layer under test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(json: bool) -> String {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber =
            tracing_subscriber::registry().with(format_layer(json, false, move || writer.clone()));
        {
            let _subscriber = crate::testkit::log_capture::scoped_default(subscriber);
            let id = TaskId::new();
            let span = task_span(id, None, &Lane::Web);
            span.in_scope(|| tracing::info!(worker = "desk", "task done"));
        }
        let bytes = lines.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_listed_field_reads_as_its_items_joined() {
        let reasons = vec!["domain: code".to_owned(), "model: \"q\"".to_owned()];
        assert_eq!(Listed(&reasons).to_string(), "domain: code; model: \"q\"");
        assert_eq!(Listed(&[]).to_string(), "");
    }

    #[test]
    fn json_lines_carry_the_message_fields_and_the_task_span() {
        let out = logged(true);
        let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(line["level"], "INFO", "{out}");
        assert_eq!(line["fields"]["message"], "task done", "{out}");
        assert_eq!(line["fields"]["worker"], "desk", "{out}");
        assert_eq!(line["span"]["name"], "task", "{out}");
        assert_eq!(line["span"]["lane"], "tasks:web", "{out}");
        assert!(
            line["span"]["task_id"]
                .as_str()
                .is_some_and(|s| s.len() == 36),
            "{out}"
        );
    }

    #[test]
    fn human_lines_are_plain_text() {
        let out = logged(false);
        assert!(out.contains("task done"), "{out}");
        assert!(out.contains("worker=\"desk\""), "{out}");
        assert!(
            serde_json::from_str::<serde_json::Value>(out.trim()).is_err(),
            "{out}"
        );
    }
}
