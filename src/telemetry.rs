//! Logging: `tracing` to stderr, filtered by `RUST_LOG` (default `info`), as human text or
//! (`[server] log_format = "json"`, `--log-json`) one JSON object a line. Colours only
//! when stderr is a terminal, so logs piped to files or journald stay plain text. Every
//! line written for a task runs in its [`task_span`].
//!
//! Lines are written to stderr by a thread of their own ([`tracing_appender`]): a terminal
//! paused with Ctrl-S, a pipe whose reader stalled or a log collector that stopped reading
//! would otherwise block the first thread that logs, and with it every request. While
//! stderr is not read, up to [`LINES_HELD`] lines wait; past that new lines are dropped,
//! counted, and the count is logged once lines flow again (and at exit).

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tracing::Span;
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::domain::{Lane, TaskId, ThreadId};

/// What is logged when `RUST_LOG` is not set.
const DEFAULT_FILTER: &str = "info,sqlx=warn";

/// Log lines held for the writing thread while stderr is not read (a few MiB at most);
/// past this many, new ones are dropped rather than stopping the service.
pub const LINES_HELD: usize = 8_192;

/// How often lines dropped meanwhile are told.
const DROPS_TOLD_EVERY: Duration = Duration::from_secs(10);

/// The process's count of dropped log lines, once [`init`] installed the writer.
static DROPPED: std::sync::OnceLock<ErrorCounter> = std::sync::OnceLock::new();

/// Log lines dropped so far because stderr was not read (`coordinator_log_lines_dropped_total`);
/// 0 before [`init`], or when another subscriber was installed first.
pub fn log_lines_dropped() -> u64 {
    DROPPED
        .get()
        .map_or(0, |c| u64::try_from(c.dropped_lines()).unwrap_or(u64::MAX))
}

/// The log's writing thread, kept for the whole command: when it is dropped, the lines
/// still held are written (for at most about a second, in case stderr is still not
/// read), after a last word on lines dropped.
#[must_use = "held log lines are written when the guard drops: keep it for the whole command"]
pub struct LogGuard {
    drops: Option<Drops>,
    _writer: Option<WorkerGuard>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        if let Some(drops) = &self.drops {
            drops.tell();
        }
    }
}

/// Installs the global subscriber, writing through a thread of its own. Safe to call more
/// than once (later calls do nothing and return an empty guard).
///
/// A `RUST_LOG` of targets and levels (`info,sqlx=warn`, `coordinator::worker=debug`) is
/// applied as a [`Targets`] filter, which costs nothing when a span is entered (every poll
/// of a task's work is); one that filters by span or field falls back to [`EnvFilter`].
pub fn init(json: bool) -> LogGuard {
    let spec = std::env::var("RUST_LOG").unwrap_or_else(|_| DEFAULT_FILTER.to_owned());
    let (targets, env) = match spec.parse::<Targets>() {
        Ok(targets) => (Some(targets), None),
        Err(_) => (
            None,
            Some(EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))),
        ),
    };
    let ansi = !json && std::io::stderr().is_terminal();
    let (writer, guard) = off_thread(std::io::stderr());
    let drops = Drops::new(writer.error_counter());
    let installed = tracing_subscriber::registry()
        .with(targets)
        .with(env)
        .with(format_layer(json, ansi, writer))
        .try_init()
        .is_ok();
    if !installed {
        return LogGuard {
            drops: None,
            _writer: None,
        };
    }
    drops.tell_every(DROPS_TOLD_EVERY);
    let _ = DROPPED.set(drops.counter.clone());
    LogGuard {
        drops: Some(drops),
        _writer: Some(guard),
    }
}

/// `out` written by a thread of its own: what logs never waits for it, and lines past
/// [`LINES_HELD`] waiting are dropped and counted.
fn off_thread<W: std::io::Write + Send + 'static>(
    out: W,
) -> (tracing_appender::non_blocking::NonBlocking, WorkerGuard) {
    NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LINES_HELD)
        .thread_name("coordinator-log")
        .finish(out)
}

/// The count of dropped log lines, and how many of them were told.
#[derive(Clone)]
struct Drops {
    counter: ErrorCounter,
    told: Arc<AtomicUsize>,
}

impl Drops {
    fn new(counter: ErrorCounter) -> Self {
        Self {
            counter,
            told: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Lines dropped since the last time this was asked, and in all; `None` when none.
    fn news(&self) -> Option<(usize, usize)> {
        let total = self.counter.dropped_lines();
        let before = self.told.swap(total, Ordering::AcqRel);
        (total > before).then(|| (total - before, total))
    }

    /// Logs the lines dropped since last told, if any. The line may itself be dropped
    /// while stderr is still not read; the total in the next one counts it.
    fn tell(&self) {
        if let Some((dropped, total)) = self.news() {
            tracing::warn!(
                dropped,
                total,
                "log lines were dropped: stderr was not read (a paused terminal, or a pipe or log collector that stalled); the service went on"
            );
        }
    }

    /// Tells dropped lines every `every`, from a thread of its own, for the life of the
    /// process.
    fn tell_every(&self, every: Duration) {
        let drops = self.clone();
        let spawned = std::thread::Builder::new()
            .name("coordinator-log-drops".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    drops.tell();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the thread that tells dropped log lines; they are told at exit");
        }
    }
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
    use crate::testkit::log_capture::Capture;

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

    /// A stderr that takes nothing until `open` (a paused terminal, a stalled pipe).
    struct Stalled {
        open: Arc<(Mutex<bool>, std::sync::Condvar)>,
        lines: Lines,
    }

    impl std::io::Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (open, opened) = &*self.open;
            let mut is_open = open.lock().unwrap();
            while !*is_open {
                is_open = opened.wait(is_open).unwrap();
            }
            self.lines.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_stderr_drops_lines_past_those_held_and_says_how_many() {
        use std::io::Write;
        let open = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let lines = Lines::default();
        let (writer, guard) = off_thread(Stalled {
            open: open.clone(),
            lines: lines.clone(),
        });
        let drops = Drops::new(writer.error_counter());
        let extra = 100;
        // Every line is taken at once, however long stderr takes nothing: the test would
        // hang here otherwise.
        for i in 0..LINES_HELD + extra {
            writer
                .clone()
                .write_all(format!("line {i}\n").as_bytes())
                .unwrap();
        }
        let (dropped, total) = drops.news().expect("lines were dropped");
        // One line may have reached the writing thread, which is stuck in its write.
        assert!((extra - 1..=extra).contains(&dropped), "{dropped}");
        assert_eq!(total, dropped);
        assert_eq!(drops.news(), None, "told once");

        // One more is dropped, and the word on it says how many in all.
        writer.clone().write_all(b"one more\n").unwrap();
        let capture = Capture::default();
        {
            let _log = capture.set_default();
            drops.tell();
            drops.tell();
        }
        let told: Vec<_> = capture.events();
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(
            told[0].message().starts_with("log lines were dropped"),
            "{told:?}"
        );
        assert_eq!(told[0].event["dropped"], "1");
        assert_eq!(told[0].event["total"], (total + 1).to_string());

        // Once stderr reads again, the lines held are written, in order, when the guard
        // goes; the dropped ones never are.
        *open.0.lock().unwrap() = true;
        open.1.notify_all();
        drop(guard);
        let out = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let held = LINES_HELD - 1;
        assert!(out.starts_with("line 0\nline 1\n"), "{}", &out[..40]);
        assert!(out.contains(&format!("\nline {held}\n")));
        assert!(!out.contains(&format!("line {}\n", LINES_HELD + extra - 1)));
        assert!(!out.contains("one more"));
    }
}
