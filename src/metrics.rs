//! Counters of what the router decided, served as Prometheus text at `GET /metrics`.
//!
//! The one to watch is `coordinator_internal_tasks_total`: Open WebUI's background tasks
//! by kind. A `### Task:` template that reached a normal lane instead shows up in
//! `coordinator_task_templates_in_user_lanes_total` (the seed's warning sign).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::domain::InternalTask;
use crate::routing::RouteDecision;

#[derive(Debug, Default)]
pub struct Metrics {
    tasks: AtomicU64,
    internal: [AtomicU64; InternalTask::ALL.len()],
    rules_answered: AtomicU64,
    web: AtomicU64,
    named: AtomicU64,
    templates_in_user_lanes: AtomicU64,
}

impl Metrics {
    /// Counts one routed turn.
    pub fn record(&self, prompt: &str, decision: &RouteDecision) {
        self.tasks.fetch_add(1, Ordering::Relaxed);
        if let Some(kind) = decision.internal_task
            && let Some(i) = InternalTask::ALL.iter().position(|k| *k == kind)
        {
            self.internal[i].fetch_add(1, Ordering::Relaxed);
        }
        if decision.rules_reply().is_some() {
            self.rules_answered.fetch_add(1, Ordering::Relaxed);
        }
        if decision.web_search() {
            self.web.fetch_add(1, Ordering::Relaxed);
        }
        if decision.named {
            self.named.fetch_add(1, Ordering::Relaxed);
        }
        if decision.internal_task.is_none() && prompt.trim_start().starts_with("### Task:") {
            self.templates_in_user_lanes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter(
            &mut out,
            "coordinator_tasks_total",
            "Turns routed.",
            self.tasks.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP coordinator_internal_tasks_total Open WebUI background tasks, by kind.\n# TYPE coordinator_internal_tasks_total counter"
        );
        for (kind, n) in InternalTask::ALL.iter().zip(&self.internal) {
            let _ = writeln!(
                out,
                "coordinator_internal_tasks_total{{kind=\"{kind}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        counter(
            &mut out,
            "coordinator_rules_answered_total",
            "Internal tasks answered by rules, without a model.",
            self.rules_answered.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "coordinator_web_tasks_total",
            "Turns sent to the web lane.",
            self.web.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "coordinator_named_tasks_total",
            "Turns for a model the client named.",
            self.named.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "coordinator_task_templates_in_user_lanes_total",
            "Prompts starting with an Open WebUI task template that were routed as user turns.",
            self.templates_in_user_lanes.load(Ordering::Relaxed),
        );
        out
    }
}
