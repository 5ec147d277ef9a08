//! The latency histograms (time to first token, queue wait, total time, tokens/s by model
//! and machine; the routing hop's own overhead) and the household's gauges (queue depth
//! per lane, slots in use, resident models), with their buckets.
//!
//! Model and machine labels come from the configured backends and what they serve, so
//! their sets are as small as the household. A task's times are recorded once, when its
//! worker records its end; the gauges are set from the directory and the queue when
//! `/metrics` is scraped, so nothing on the request path keeps them.

use std::collections::HashSet;
use std::sync::Mutex;

use metrics::{Histogram, Key, KeyName, Label, Recorder};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

use super::METADATA;
use crate::backend::registry::WorkerStatus;
use crate::domain::{Lane, ModelName, WorkerName};
use crate::store::TaskOutcome;

pub const TTFT: &str = "coordinator_time_to_first_token_seconds";
pub const QUEUE_WAIT: &str = "coordinator_queue_wait_seconds";
pub const TOTAL: &str = "coordinator_task_duration_seconds";
pub const TOKENS_PER_S: &str = "coordinator_tokens_per_second";
pub const OVERHEAD: &str = "coordinator_routing_overhead_seconds";
pub const QUEUE_DEPTH: &str = "coordinator_queue_depth";
pub const SLOTS_IN_USE: &str = "coordinator_slots_in_use";
pub const SLOTS: &str = "coordinator_slots";
pub const RESIDENT: &str = "coordinator_resident_models";
pub const HEALTHY: &str = "coordinator_machine_healthy";

/// Seconds a person waits: from a fraction of a second to minutes (a cold load on CPU).
const WAIT_BUCKETS: [f64; 13] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];
const RATE_BUCKETS: [f64; 11] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 50.0, 75.0, 100.0, 150.0, 250.0,
];
/// The routing hop's target is under a millisecond.
const OVERHEAD_BUCKETS: [f64; 11] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.05, 0.1, 1.0,
];

/// The exporter with every histogram's buckets (a histogram without them would render as
/// a summary).
pub(super) fn builder() -> PrometheusBuilder {
    let with = |b: PrometheusBuilder, name: &str, buckets: &[f64]| {
        // Only an empty bucket list is refused, and none of ours is.
        b.set_buckets_for_metric(Matcher::Full(name.to_owned()), buckets)
            .unwrap_or_else(|_| PrometheusBuilder::new())
    };
    let b = with(PrometheusBuilder::new(), TTFT, &WAIT_BUCKETS);
    let b = with(b, QUEUE_WAIT, &WAIT_BUCKETS);
    let b = with(b, TOTAL, &WAIT_BUCKETS);
    let b = with(b, TOKENS_PER_S, &RATE_BUCKETS);
    with(b, OVERHEAD, &OVERHEAD_BUCKETS)
}

/// What one task that ran on a machine took.
#[derive(Debug, Clone, Copy)]
pub struct TaskTimes<'a> {
    pub model: &'a ModelName,
    pub machine: &'a WorkerName,
    pub queue_wait_ms: Option<i64>,
    pub first_token_ms: Option<i64>,
    pub total_ms: Option<i64>,
    pub completion_tokens: Option<i64>,
}

impl<'a> TaskTimes<'a> {
    pub fn of(outcome: &TaskOutcome, model: &'a ModelName, machine: &'a WorkerName) -> Self {
        Self {
            model,
            machine,
            queue_wait_ms: outcome.queue_wait_ms,
            first_token_ms: outcome.first_token_ms,
            total_ms: outcome.total_ms,
            completion_tokens: outcome.completion_tokens,
        }
    }

    /// Tokens per second of the answer's streaming (after its first token); `None` when
    /// there was no answer or it came in one piece.
    pub fn tokens_per_s(&self) -> Option<f64> {
        let streaming_ms = self.total_ms? - self.first_token_ms?;
        let tokens = self.completion_tokens?;
        (streaming_ms > 0 && tokens > 0).then(|| tokens as f64 * 1000.0 / streaming_ms as f64)
    }
}

/// What the gauges are set from at a scrape.
#[derive(Debug, Default, Clone, Copy)]
pub struct Household<'a> {
    pub machines: &'a [WorkerStatus],
    pub depths: &'a [(Lane, usize)],
}

pub(super) struct Timing {
    pub(super) overhead: Histogram,
    /// Lanes whose depth gauge was set, so that one emptied since reads 0 rather than its
    /// last depth (the queue lists only lanes with jobs).
    lanes_shown: Mutex<HashSet<String>>,
}

fn describe(recorder: &PrometheusRecorder) {
    let h = |name: &'static str, help: &'static str| {
        recorder.describe_histogram(KeyName::from_const_str(name), None, help.into());
    };
    h(
        TTFT,
        "Seconds from a task's arrival to its first token, by model and machine.",
    );
    h(
        QUEUE_WAIT,
        "Seconds a task waited before a machine started it, by model and machine.",
    );
    h(
        TOTAL,
        "Seconds from a task's arrival to its last token, by model and machine.",
    );
    h(
        TOKENS_PER_S,
        "Tokens per second of an answer after its first token, by model and machine.",
    );
    h(
        OVERHEAD,
        "Seconds the routing hop itself took for a turn: routing, recording, composing and dispatch, up to started or queued.",
    );
    let g = |name: &'static str, help: &'static str| {
        recorder.describe_gauge(KeyName::from_const_str(name), None, help.into());
    };
    g(QUEUE_DEPTH, "Tasks waiting, by lane.");
    g(SLOTS_IN_USE, "Answers running, by machine.");
    g(SLOTS, "Answers a machine runs at once.");
    g(RESIDENT, "Models resident on a machine.");
    g(HEALTHY, "1 when the machine answers, else 0.");
}

impl Timing {
    pub(super) fn register(recorder: &PrometheusRecorder) -> Self {
        describe(recorder);
        Self {
            overhead: recorder.register_histogram(&Key::from_static_name(OVERHEAD), &METADATA),
            lanes_shown: Mutex::new(HashSet::new()),
        }
    }

    pub(super) fn task_ended(&self, recorder: &PrometheusRecorder, t: &TaskTimes<'_>) {
        let labels = || {
            vec![
                Label::new("model", t.model.to_string()),
                Label::new("machine", t.machine.to_string()),
            ]
        };
        let record = |name: &'static str, value: Option<f64>| {
            if let Some(v) = value {
                recorder
                    .register_histogram(&Key::from_parts(name, labels()), &METADATA)
                    .record(v);
            }
        };
        let secs = |ms: Option<i64>| ms.map(|ms| ms as f64 / 1000.0);
        record(QUEUE_WAIT, secs(t.queue_wait_ms));
        record(TTFT, secs(t.first_token_ms));
        record(TOTAL, secs(t.total_ms));
        record(TOKENS_PER_S, t.tokens_per_s());
    }

    pub(super) fn set_gauges(&self, recorder: &PrometheusRecorder, household: &Household<'_>) {
        let gauge = |name: &'static str, label: &'static str, value: String| {
            recorder.register_gauge(
                &Key::from_parts(name, vec![Label::new(label, value)]),
                &METADATA,
            )
        };
        for m in household.machines {
            let name = m.name.to_string();
            gauge(SLOTS_IN_USE, "machine", name.clone()).set(m.in_flight as f64);
            gauge(SLOTS, "machine", name.clone()).set(m.slots() as f64);
            gauge(RESIDENT, "machine", name.clone()).set(m.loaded.len() as f64);
            gauge(HEALTHY, "machine", name).set(if m.healthy { 1.0 } else { 0.0 });
        }
        let mut shown = self
            .lanes_shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now: HashSet<String> = household
            .depths
            .iter()
            .map(|(l, _)| l.to_string())
            .collect();
        for gone in shown.difference(&now) {
            gauge(QUEUE_DEPTH, "lane", gone.clone()).set(0.0);
        }
        for (lane, n) in household.depths {
            gauge(QUEUE_DEPTH, "lane", lane.to_string()).set(*n as f64);
        }
        shown.extend(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn model() -> ModelName {
        ModelName::parse("qwen3:8b").unwrap()
    }

    #[test]
    fn tokens_per_second_count_the_streaming_after_the_first_token() {
        let (m, w) = (model(), WorkerName::parse("desk").unwrap());
        let t = TaskTimes {
            model: &m,
            machine: &w,
            queue_wait_ms: Some(10),
            first_token_ms: Some(500),
            total_ms: Some(2500),
            completion_tokens: Some(40),
        };
        assert_eq!(t.tokens_per_s(), Some(20.0));
        assert_eq!(
            TaskTimes {
                total_ms: Some(500),
                ..t
            }
            .tokens_per_s(),
            None
        );
        assert_eq!(
            TaskTimes {
                first_token_ms: None,
                ..t
            }
            .tokens_per_s(),
            None
        );
    }

    #[test]
    fn a_task_s_times_land_in_buckets_by_model_and_machine() {
        let metrics = Metrics::default();
        let (m, w) = (model(), WorkerName::parse("desk").unwrap());
        metrics.task_ended(&TaskTimes {
            model: &m,
            machine: &w,
            queue_wait_ms: Some(30),
            first_token_ms: Some(700),
            total_ms: Some(1700),
            completion_tokens: Some(50),
        });
        metrics.routing_overhead(std::time::Duration::from_micros(300));
        let text = metrics.render(&Household::default());
        let labels = "model=\"qwen3:8b\",machine=\"desk\"";
        assert!(
            text.contains(&format!("{TTFT}_bucket{{{labels},le=\"0.5\"}} 0\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{TTFT}_bucket{{{labels},le=\"1\"}} 1\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{TTFT}_count{{{labels}}} 1\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{TOKENS_PER_S}_bucket{{{labels},le=\"50\"}} 1\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{OVERHEAD}_bucket{{le=\"0.0005\"}} 1\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{OVERHEAD}_bucket{{le=\"0.00025\"}} 0\n")),
            "{text}"
        );
    }

    /// The Grafana dashboard in `docs/` asks only for series `/metrics` has.
    #[test]
    fn the_grafana_dashboard_names_only_metrics_that_exist() {
        let metrics = Metrics::default();
        let (m, w) = (model(), WorkerName::parse("desk").unwrap());
        metrics.task_ended(&TaskTimes {
            model: &m,
            machine: &w,
            queue_wait_ms: Some(1),
            first_token_ms: Some(2),
            total_ms: Some(30),
            completion_tokens: Some(3),
        });
        metrics.routing_overhead(std::time::Duration::from_micros(1));
        let status = WorkerStatus {
            name: w.clone(),
            kind: crate::config::BackendKind::Ollama,
            url: "http://desk:11434".into(),
            models: vec![m.clone()],
            loaded: vec![m.clone()],
            healthy: true,
            in_flight: 1,
            parallel: 2,
            last_error: None,
            perf: Vec::new(),
            running: Vec::new(),
            recent: Vec::new(),
            max_loaded: None,
            max_num_ctx: None,
            windows: Vec::new(),
            resident: vec![],
            sizes: vec![],
            server_keep_alive_s: None,
            clock_ahead_ms: None,
        };
        let depths = [(Lane::Web, 1)];
        let text = metrics.render(&Household {
            machines: std::slice::from_ref(&status),
            depths: &depths,
        });
        let board: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/grafana-dashboard.json")).unwrap();
        let mut names = 0;
        for panel in board["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                for (at, _) in expr.match_indices("coordinator_") {
                    let name: String = expr[at..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    assert!(
                        text.contains(&format!("\n{name}")),
                        "{name} is not in\n{text}"
                    );
                    names += 1;
                }
            }
        }
        assert!(names > 15, "{names}");
    }

    #[test]
    fn an_emptied_lane_reads_zero() {
        let metrics = Metrics::default();
        let lane = Lane::Web;
        let depths = [(lane.clone(), 3)];
        let text = metrics.render(&Household {
            machines: &[],
            depths: &depths,
        });
        assert!(
            text.contains("coordinator_queue_depth{lane=\"tasks:web\"} 3\n"),
            "{text}"
        );
        let text = metrics.render(&Household::default());
        assert!(
            text.contains("coordinator_queue_depth{lane=\"tasks:web\"} 0\n"),
            "{text}"
        );
    }
}
