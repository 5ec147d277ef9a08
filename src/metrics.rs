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
    cancelled: AtomicU64,
    embeddings: AtomicU64,
    embedded_inputs: AtomicU64,
    unauthorized: AtomicU64,
    /// The count of refusals when one was last logged (see [`Metrics::refused`]).
    unauthorized_logged: AtomicU64,
    /// When a refusal was last logged, in ms since `UNIX_EPOCH`.
    unauthorized_logged_at_ms: AtomicU64,
}

/// How often refused requests are logged at most: a guessing device must not fill the log.
const REFUSAL_LOG_EVERY_MS: u64 = 10_000;

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

    /// Counts one embedding request of `inputs` texts.
    pub fn embedded(&self, inputs: usize) {
        self.embeddings.fetch_add(1, Ordering::Relaxed);
        self.embedded_inputs
            .fetch_add(inputs as u64, Ordering::Relaxed);
    }

    /// Counts a task this process cancelled (its client went away, or asked).
    pub fn cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request refused for its API key. Returns how many refusals the log has
    /// not told of yet (this one included) when it is time to log one, at most once per
    /// ten seconds; `None` when this one goes unlogged.
    pub fn refused(&self) -> Option<u64> {
        let total = self.unauthorized.fetch_add(1, Ordering::Relaxed) + 1;
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
        counter(
            &mut out,
            "coordinator_tasks_cancelled_total",
            "Tasks cancelled: their client went away or asked (POST /tasks/{id}/cancel).",
            self.cancelled.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "coordinator_embeddings_total",
            "Embedding requests sent to a machine (/api/embed, /api/embeddings, /v1/embeddings).",
            self.embeddings.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "coordinator_embedded_inputs_total",
            "Texts embedded, over all embedding requests.",
            self.embedded_inputs.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "coordinator_unauthorized_total",
            "Requests refused for a missing or invalid API key.",
            self.unauthorized.load(Ordering::Relaxed),
        );
        out
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
        assert!(m.render().contains("coordinator_unauthorized_total 3000\n"));
        // Ten seconds on, the next refusal is logged with the count of those unlogged.
        m.unauthorized_logged_at_ms
            .fetch_sub(REFUSAL_LOG_EVERY_MS, Ordering::Relaxed);
        assert_eq!(m.refused(), Some(3000));
    }
}
