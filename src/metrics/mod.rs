//! What the router decided and how long the work took, served as Prometheus text at
//! `GET /metrics` through the `metrics` crate and its Prometheus exporter (rendered by the
//! handler itself: no listener of its own).
//!
//! The one to watch is `coordinator_internal_tasks_total`: Open WebUI's background tasks
//! by kind. A `### Task:` template that reached a normal lane instead shows up in
//! `coordinator_task_templates_in_user_lanes_total` (the seed's warning sign). The
//! latency histograms and the household's gauges are in [`timing`].
//!
//! Every [`Metrics`] has its own recorder (none is installed process-wide), so two
//! services in one process (the tests) count apart. Handles are registered once; counting
//! is an atomic add. In cluster mode a process's task times are also shared with every
//! `serve` through Redis ([`shared`]), so `/metrics` shows every machine's.

pub mod shared;
pub mod timing;

use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{Counter, Key, KeyName, Label, Recorder};
use metrics_exporter_prometheus::{PrometheusHandle, PrometheusRecorder};

use crate::domain::InternalTask;
use crate::limits::{REFUSAL_CODES, Refusal};
use crate::routing::RouteDecision;

pub use timing::{Household, TaskTimes};

/// The metadata every handle is registered with (the exporter does not filter by it).
const METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new("coordinator", metrics::Level::INFO, Some(module_path!()));

pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    tasks: Counter,
    internal: [Counter; InternalTask::ALL.len()],
    rules_answered: Counter,
    web: Counter,
    named: Counter,
    templates_in_user_lanes: Counter,
    cancelled: Counter,
    embeddings: Counter,
    embedded_inputs: Counter,
    unauthorized: Counter,
    /// Work refused by `[limits]`, by reason: the person's rate, a full lane, the
    /// person's waiting tasks.
    limited: [Counter; REFUSAL_CODES.len()],
    log_lines_dropped: Counter,
    timing: timing::Timing,
    /// Cluster mode: where finished tasks' times go to reach `serve` (see [`shared`]).
    outbox: Option<shared::Outbox>,
    /// Requests refused for their key, also kept here: the log's pacing reads it back.
    refusals: AtomicU64,
    /// The count of refusals when one was last logged (see [`Metrics::refused`]).
    unauthorized_logged: AtomicU64,
    /// When a refusal was last logged, in ms since `UNIX_EPOCH`.
    unauthorized_logged_at_ms: AtomicU64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// How often refused requests are logged at most: a guessing device must not fill the log.
const REFUSAL_LOG_EVERY_MS: u64 = 10_000;

/// Registers counter `name` with its help text (and `labels`) on `recorder`.
fn counter(
    recorder: &PrometheusRecorder,
    name: &'static str,
    help: &'static str,
    labels: Vec<Label>,
) -> Counter {
    recorder.describe_counter(KeyName::from_const_str(name), None, help.into());
    recorder.register_counter(&Key::from_parts(name, labels), &METADATA)
}

impl Default for Metrics {
    fn default() -> Self {
        let recorder = timing::builder().build_recorder();
        let handle = recorder.handle();
        let c = |name, help| counter(&recorder, name, help, Vec::new());
        let internal = InternalTask::ALL.map(|kind| {
            counter(
                &recorder,
                "coordinator_internal_tasks_total",
                "Open WebUI background tasks, by kind.",
                vec![Label::new("kind", kind.as_str())],
            )
        });
        Self {
            tasks: c("coordinator_tasks_total", "Turns routed."),
            internal,
            rules_answered: c(
                "coordinator_rules_answered_total",
                "Internal tasks answered by rules, without a model.",
            ),
            web: c("coordinator_web_tasks_total", "Turns sent to the web lane."),
            named: c(
                "coordinator_named_tasks_total",
                "Turns for a model the client named.",
            ),
            templates_in_user_lanes: c(
                "coordinator_task_templates_in_user_lanes_total",
                "Prompts starting with an Open WebUI task template that were routed as user turns.",
            ),
            cancelled: c(
                "coordinator_tasks_cancelled_total",
                "Tasks cancelled: their client went away or asked (POST /tasks/{id}/cancel).",
            ),
            embeddings: c(
                "coordinator_embeddings_total",
                "Embedding requests sent to a machine (/api/embed, /api/embeddings, /v1/embeddings).",
            ),
            embedded_inputs: c(
                "coordinator_embedded_inputs_total",
                "Texts embedded, over all embedding requests.",
            ),
            unauthorized: c(
                "coordinator_unauthorized_total",
                "Requests refused for a missing or invalid API key.",
            ),
            limited: REFUSAL_CODES.map(|reason| {
                counter(
                    &recorder,
                    "coordinator_limited_total",
                    "Requests that would make work refused with 429 by [limits], by reason (the error code they were answered with).",
                    vec![Label::new("reason", reason)],
                )
            }),
            log_lines_dropped: c(
                "coordinator_log_lines_dropped_total",
                "Log lines dropped because stderr was not read (a paused terminal, a stalled pipe or collector).",
            ),
            timing: timing::Timing::register(&recorder),
            outbox: None,
            recorder,
            handle,
            refusals: AtomicU64::new(0),
            unauthorized_logged: AtomicU64::new(0),
            unauthorized_logged_at_ms: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one routed turn.
    pub fn record(&self, prompt: &str, decision: &RouteDecision) {
        self.tasks.increment(1);
        if let Some(kind) = decision.internal_task
            && let Some(i) = InternalTask::ALL.iter().position(|k| *k == kind)
        {
            self.internal[i].increment(1);
        }
        if decision.rules_reply().is_some() {
            self.rules_answered.increment(1);
        }
        if decision.web_search() {
            self.web.increment(1);
        }
        if decision.named {
            self.named.increment(1);
        }
        if decision.internal_task.is_none() && prompt.trim_start().starts_with("### Task:") {
            self.templates_in_user_lanes.increment(1);
        }
    }

    /// Counts one embedding request of `inputs` texts.
    pub fn embedded(&self, inputs: usize) {
        self.embeddings.increment(1);
        self.embedded_inputs.increment(inputs as u64);
    }

    /// Counts a request refused by `[limits]`.
    pub fn limited(&self, refusal: Refusal) {
        self.limited[refusal.kind()].increment(1);
    }

    /// Counts a task this process cancelled (its client went away, or asked).
    pub fn cancelled(&self) {
        self.cancelled.increment(1);
    }

    /// Counts a request refused for its API key. Returns how many refusals the log has
    /// not told of yet (this one included) when it is time to log one, at most once per
    /// ten seconds; `None` when this one goes unlogged.
    pub fn refused(&self) -> Option<u64> {
        self.unauthorized.increment(1);
        let total = self.refusals.fetch_add(1, Ordering::Relaxed) + 1;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let last = self.unauthorized_logged_at_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < REFUSAL_LOG_EVERY_MS {
            return None;
        }
        // One of the requests racing here logs.
        self.unauthorized_logged_at_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        let before = self.unauthorized_logged.swap(total, Ordering::Relaxed);
        Some(total.saturating_sub(before))
    }

    /// Records how long the routing hop itself took for one turn (see
    /// [`timing::Timing::overhead`]).
    pub fn routing_overhead(&self, took: std::time::Duration) {
        self.timing.overhead.record(took.as_secs_f64());
    }

    /// These metrics, sharing the times of the tasks this process runs through `outbox`.
    pub fn sharing_to(self, outbox: shared::Outbox) -> Self {
        Self {
            outbox: Some(outbox),
            ..self
        }
    }

    /// Records the times of one task that ended on one of this process's machines, and in
    /// cluster mode shares them (without waiting).
    pub fn task_ended(&self, times: &TaskTimes<'_>) {
        self.record_times(times);
        if let Some(outbox) = &self.outbox {
            outbox.put(times);
        }
    }

    /// Records the times of one task that ended on some machine.
    fn record_times(&self, times: &TaskTimes<'_>) {
        self.timing.task_ended(&self.recorder, times);
    }

    /// Folds the histograms' samples into their buckets, so that they hold no memory
    /// between scrapes (see [`crate::startup`]'s upkeep loop).
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// Everything in Prometheus' text format, with the gauges set from `household` first.
    pub fn render(&self, household: &Household<'_>) -> String {
        self.timing.set_gauges(&self.recorder, household);
        self.log_lines_dropped
            .absolute(crate::telemetry::log_lines_dropped());
        self.handle.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_all_counted_but_logged_at_most_every_ten_seconds() {
        let m = Metrics::default();
        assert_eq!(m.refused(), Some(1));
        for _ in 0..2_999 {
            assert_eq!(m.refused(), None);
        }
        let text = m.render(&Household::default());
        assert!(
            text.contains("coordinator_unauthorized_total 3000\n"),
            "{text}"
        );
        // Ten seconds on, the next refusal is logged with the count of those unlogged.
        m.unauthorized_logged_at_ms
            .fetch_sub(REFUSAL_LOG_EVERY_MS, Ordering::Relaxed);
        assert_eq!(m.refused(), Some(3000));
    }

    #[test]
    fn every_counter_is_shown_from_the_start_with_its_help() {
        let text = Metrics::default().render(&Household::default());
        for name in [
            "coordinator_tasks_total",
            "coordinator_rules_answered_total",
            "coordinator_web_tasks_total",
            "coordinator_named_tasks_total",
            "coordinator_task_templates_in_user_lanes_total",
            "coordinator_tasks_cancelled_total",
            "coordinator_embeddings_total",
            "coordinator_embedded_inputs_total",
            "coordinator_unauthorized_total",
            "coordinator_log_lines_dropped_total",
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} counter\n")),
                "{name}: {text}"
            );
            assert!(text.contains(&format!("\n{name} 0\n")), "{name}: {text}");
        }
        assert!(
            text.contains("coordinator_internal_tasks_total{kind=\"title_generation\"} 0\n"),
            "{text}"
        );
        for reason in REFUSAL_CODES {
            assert!(
                text.contains(&format!(
                    "coordinator_limited_total{{reason=\"{reason}\"}} 0\n"
                )),
                "{reason}: {text}"
            );
        }
    }

    #[test]
    fn each_refusal_is_counted_under_the_code_it_was_answered_with() {
        let m = Metrics::default();
        let wait = std::time::Duration::from_secs(1);
        for refusal in [
            Refusal::TooFast { retry_after: wait },
            Refusal::LaneFull { retry_after: wait },
            Refusal::PersonFull { retry_after: wait },
        ] {
            assert!(REFUSAL_CODES.contains(&refusal.code()), "{refusal:?}");
        }
        m.limited(Refusal::PersonFull { retry_after: wait });
        m.limited(Refusal::PersonFull { retry_after: wait });
        m.limited(Refusal::LaneFull { retry_after: wait });
        let text = m.render(&Household::default());
        for (reason, n) in [
            ("rate_limit_exceeded", 0),
            ("queue_full", 1),
            ("too_many_waiting", 2),
        ] {
            assert!(
                text.contains(&format!(
                    "coordinator_limited_total{{reason=\"{reason}\"}} {n}\n"
                )),
                "{reason}: {text}"
            );
        }
    }

    #[test]
    fn two_services_count_apart() {
        let (a, b) = (Metrics::default(), Metrics::default());
        a.cancelled();
        assert!(
            a.render(&Household::default())
                .contains("coordinator_tasks_cancelled_total 1\n")
        );
        assert!(
            b.render(&Household::default())
                .contains("coordinator_tasks_cancelled_total 0\n")
        );
    }
}
