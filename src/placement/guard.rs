//! Background work never pushes out a model people need.
//!
//! Work nobody watches (background and batch jobs) may start on a machine only when what
//! its load pushes out there ([`super::pushes_out`]) is no model a person needs: none
//! answering a person there now, none a person's job waits for in the queue. Otherwise it
//! stays in Coordinator's queue until a machine can take it at nobody's cost (the model
//! resident there, room for it, or an idle model nobody waits for), and the worker takes
//! only people's jobs from that model's lanes meanwhile ([`crate::queue::Takes`]).
//!
//! Waiting there is bounded by people's work: once nobody waits for the model it would
//! push out, the job starts; aging still orders it among the work it may take.

use super::{Pushes, pushes_out};
use crate::backend::registry::WorkerStatus;
use crate::domain::{ModelName, Priority};

/// Whether loading `model` on `s` for background work pushes out a model a person needs:
/// one answering a person on `s` now, or one in `awaited` (people's jobs wait for it).
/// Never when `model` is resident there already (nothing is loaded).
pub fn pushes_out_needed(s: &WorkerStatus, model: &ModelName, awaited: &[ModelName]) -> bool {
    if s.loaded.contains(model) {
        return false;
    }
    let needed = |m: &ModelName| {
        awaited.contains(m)
            || s.running
                .iter()
                .any(|r| &r.model == m && r.priority == Priority::Interactive)
    };
    match pushes_out(s, model) {
        Pushes::Nothing => false,
        Pushes::Idle(victim) => needed(victim),
        // The load waits for whichever busy model finishes first: any of them may go.
        Pushes::Busy => s.loaded.iter().filter(|m| *m != model).any(needed),
    }
}

/// Whether a load of `model` on `s` would push out any model at all: only then can the
/// guard keep work away, so a worker with room asks the queue nothing.
pub fn may_push_out(s: &WorkerStatus, model: &ModelName) -> bool {
    !s.loaded.contains(model) && pushes_out(s, model) != Pushes::Nothing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::activity::Running;
    use crate::config::BackendKind;
    use crate::domain::WorkerName;

    fn model(m: &str) -> ModelName {
        ModelName::parse(m).unwrap()
    }

    /// A one-model machine serving `chat` and `small`, with `loaded` resident.
    fn machine(loaded: &[&str], running: &[(&str, Priority)]) -> WorkerStatus {
        WorkerStatus {
            name: WorkerName::parse("moon").unwrap(),
            kind: BackendKind::Ollama,
            url: String::new(),
            models: vec![model("chat"), model("small")],
            loaded: loaded.iter().map(|m| model(m)).collect(),
            healthy: true,
            in_flight: running.len(),
            parallel: 1,
            last_error: None,
            perf: vec![],
            running: running
                .iter()
                .map(|(m, priority)| Running {
                    model: model(m),
                    started_at: chrono::Utc::now(),
                    first_token_at: None,
                    tokens: 0,
                    prompt_tokens: 10,
                    cold: false,
                    cached: false,
                    priority: *priority,
                })
                .collect(),
            recent: vec![],
            max_loaded: Some(1),
            max_num_ctx: None,
            windows: vec![],
            resident: vec![],
            sizes: vec![],
            server_keep_alive_s: None,
            clock_ahead_ms: None,
        }
    }

    #[test]
    fn a_load_that_pushes_out_a_model_people_wait_for_is_refused() {
        let idle = machine(&["chat"], &[]);
        assert!(pushes_out_needed(&idle, &model("small"), &[model("chat")]));
        assert!(
            !pushes_out_needed(&idle, &model("small"), &[]),
            "nobody waits for the idle model: it may go"
        );
    }

    #[test]
    fn a_model_answering_a_person_is_needed_and_one_answering_background_work_is_not() {
        let person = machine(&["chat"], &[("chat", Priority::Interactive)]);
        assert!(pushes_out_needed(&person, &model("small"), &[]));
        let background = machine(&["chat"], &[("chat", Priority::Background)]);
        assert!(!pushes_out_needed(&background, &model("small"), &[]));
    }

    #[test]
    fn a_resident_model_or_a_machine_with_room_pushes_nothing_out() {
        let resident = machine(&["chat"], &[("chat", Priority::Interactive)]);
        assert!(!pushes_out_needed(
            &resident,
            &model("chat"),
            &[model("chat")]
        ));
        assert!(!may_push_out(&resident, &model("chat")));
        let roomy = WorkerStatus {
            max_loaded: Some(2),
            ..machine(&["chat"], &[])
        };
        assert!(!pushes_out_needed(
            &roomy,
            &model("small"),
            &[model("chat")]
        ));
        assert!(!may_push_out(&roomy, &model("small")));
        assert!(may_push_out(&machine(&["chat"], &[]), &model("small")));
    }
}
