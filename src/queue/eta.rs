//! How long a queued task is expected to wait for its first token, from its place in its
//! lane ([`super::Queue::position`]), what each machine owes first (the backlog placement
//! counts: [`Dispatcher::ahead`]) and what placement expects of the workers serving the
//! lane (read through the [`Directory`]). Shown to a waiting client (the keep-alive of a
//! streamed chat) and by `GET /tasks/{id}`.

use chrono::Utc;

use crate::backend::registry::WorkerStatus;
use crate::dispatch::Dispatcher;
use crate::domain::{Lane, ModelName, Person, Priority, TaskId, WorkerName};
use crate::placement::{self, Backlog};
use crate::worker::Directory;

use super::QueueError;

/// A task waiting in its lane: its place, the answers before it, and when its first token
/// is expected.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueWait {
    /// 1 when it is the next job its lane's workers take.
    pub position: usize,
    /// The answers that go before it: those running on the lane's workers, and the jobs
    /// waiting before it in the lane.
    pub ahead: usize,
    /// Expected seconds until its first token (see [`expected_wait_s`]); `None` when no
    /// worker serves its model now.
    pub eta_s: Option<f64>,
}

impl QueueWait {
    /// The expected wait in whole seconds, rounded up (a client is told "14", not "13.2").
    pub fn eta_whole_s(&self) -> Option<u64> {
        self.eta_s.map(|s| s.max(0.0).ceil() as u64)
    }
}

/// A task waiting in its lane, as the queue and placement know it.
#[derive(Debug, Clone, Copy)]
pub struct Waiter<'a> {
    pub task_id: TaskId,
    pub lane: &'a Lane,
    /// The model it is for (the lane's, or the web lane's answering model).
    pub model: &'a ModelName,
    pub priority: Priority,
    /// Whose it is (its turn among the waiting jobs).
    pub person: &'a Person,
    /// The estimated size of its composed prompt.
    pub prompt_tokens: u32,
}

/// Where `task` waits in its lane and when its first token is expected; `None` when it
/// does not wait in the lane (a worker has it). Each machine's own backlog counts as it
/// does for placement, of the jobs taken before this one ([`Dispatcher::ahead_of_waiting`]).
pub async fn queue_wait(
    dispatch: &Dispatcher,
    directory: &dyn Directory,
    task: &Waiter<'_>,
) -> Result<Option<QueueWait>, QueueError> {
    let (lane, model) = (task.lane, task.model);
    let Some(position) = dispatch.queue().position(lane, task.task_id).await? else {
        return Ok(None);
    };
    let statuses = directory.statuses();
    // Its own lane is counted by its place in it; what else the placement figure holds
    // is each machine's backlog.
    let waiting = dispatch
        .ahead_of_waiting(lane, task.task_id, task.priority, task.person, &statuses)
        .await;
    let pinned = match lane {
        Lane::Llm { pinned_worker, .. } => pinned_worker.as_ref(),
        Lane::Web | Lane::Rag | Lane::Utility => None,
    };
    let serving = serving(&statuses, model, pinned);
    let running: usize = serving.iter().map(|s| s.in_flight).sum();
    Ok(Some(QueueWait {
        position,
        ahead: running + position.saturating_sub(1),
        eta_s: expected_wait_s(
            &serving,
            &statuses,
            model,
            position,
            &waiting.backlog,
            task.prompt_tokens,
        ),
    }))
}

/// The workers that take jobs of `model` (only `pinned` when the lane is pinned to it):
/// the healthy ones, or all of them when none is healthy (the task still waits for one).
fn serving<'a>(
    statuses: &'a [WorkerStatus],
    model: &ModelName,
    pinned: Option<&WorkerName>,
) -> Vec<&'a WorkerStatus> {
    let all: Vec<&WorkerStatus> = statuses
        .iter()
        .filter(|s| s.models.contains(model) && pinned.is_none_or(|p| p == &s.name))
        .collect();
    if all.iter().any(|s| s.healthy) {
        all.into_iter().filter(|s| s.healthy).collect()
    } else {
        all
    }
}

/// Expected seconds until the first token of a task at `position` in the lane of `model`,
/// served by the workers `serving` (among `statuses`): placement's own estimate
/// ([`placement::queued::first_token_in`]), with each machine's `backlog` taking its slots
/// there first, then the `position − 1` jobs before it in the lane, each where it starts
/// soonest. What the lane's jobs ask is not read from the queue here: each counts as a
/// whole answer, its prompt not counted. `None` when no worker serves the model.
pub fn expected_wait_s(
    serving: &[&WorkerStatus],
    statuses: &[WorkerStatus],
    model: &ModelName,
    position: usize,
    backlog: &Backlog,
    prompt_tokens: u32,
) -> Option<f64> {
    let ahead = placement::Ahead {
        jobs: position.saturating_sub(1),
        prompt_tokens: Some(0),
    };
    let ask = placement::Ask {
        backlog,
        ..placement::Ask::fresh(model, prompt_tokens).behind(ahead)
    };
    placement::queued::first_token_in(serving, statuses, &ask, Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::perf::ModelPerf;

    fn model() -> ModelName {
        ModelName::parse("qwen2.5:14b").unwrap()
    }

    /// A worker serving the model with `slots`, `in_flight` answers running, that has shown
    /// answers of 100 tokens at `eval_tps`, a 6 s load and 1000 prompt tokens per second.
    fn worker(name: &str, slots: usize, in_flight: usize, eval_tps: f64) -> WorkerStatus {
        let mut p = ModelPerf::new(model());
        p.load_s = Some(6.0);
        p.prompt_tps = Some(1000.0);
        p.eval_tps = Some(eval_tps);
        p.answer_tokens = Some(100.0);
        WorkerStatus {
            loaded: vec![model()],
            in_flight,
            parallel: slots,
            perf: vec![p],
            ..crate::testkit::samples::idle_worker(name, &[model().as_str()])
        }
    }

    fn close(got: Option<f64>, want: f64) {
        let got = got.unwrap();
        assert!((got - want).abs() < 1e-9, "{got} != {want}");
    }

    /// The expected wait with `serving` being every worker there is.
    fn wait(serving: &[&WorkerStatus], position: usize, prompt_tokens: u32) -> Option<f64> {
        let statuses: Vec<WorkerStatus> = serving.iter().map(|s| (*s).clone()).collect();
        expected_wait_s(
            serving,
            &statuses,
            &model(),
            position,
            &placement::backlog::NONE,
            prompt_tokens,
        )
    }

    #[test]
    fn the_wait_is_the_answers_ahead_in_the_slots_then_the_prompt() {
        // One slot, one answer running (100 tokens at 10/s: 10 s each), 500 prompt tokens.
        let moon = worker("moon", 1, 1, 10.0);
        close(wait(&[&moon], 1, 500), 10.5);
        // Second in line: the running answer and the one before it.
        close(wait(&[&moon], 2, 500), 20.5);
        // Two slots, both busy: the one before it takes the first slot that frees, it the
        // second.
        let two = worker("moon", 2, 2, 10.0);
        close(wait(&[&two], 2, 500), 10.5);
        // A free slot: nothing to wait for but the prompt.
        let idle = worker("moon", 2, 0, 10.0);
        close(wait(&[&idle], 1, 500), 0.5);
    }

    #[test]
    fn an_answer_far_along_frees_its_slot_soon() {
        // 90 of 100 tokens done at 10/s: about a second left, not a whole answer.
        let mut moon = worker("moon", 1, 1, 10.0);
        moon.running = vec![crate::backend::activity::Running {
            model: model(),
            started_at: Utc::now() - chrono::Duration::seconds(10),
            first_token_at: Some(Utc::now() - chrono::Duration::seconds(9)),
            tokens: 90,
            prompt_tokens: 100,
            cold: false,
            cached: false,
            priority: Default::default(),
        }];
        close(wait(&[&moon], 1, 500), 1.5);
    }

    #[test]
    fn the_task_goes_where_a_slot_frees_soonest_for_it() {
        // 10 s and 5 s per answer, both busy: the faster frees first.
        let slow = worker("moon", 1, 1, 10.0);
        let fast = worker("sun", 1, 1, 20.0);
        close(wait(&[&slow, &fast], 1, 0), 5.0);
        // Second in line: the first takes sun's slot at 5 s (until 10 s); moon's frees at
        // 10 s too.
        close(wait(&[&slow, &fast], 2, 0), 10.0);
        assert_eq!(wait(&[], 1, 0), None, "nobody serves it");
    }

    #[test]
    fn a_model_resident_nowhere_adds_its_load() {
        let mut cold = worker("moon", 1, 1, 10.0);
        cold.loaded.clear();
        close(wait(&[&cold], 1, 500), 16.5);
        // A job ahead loads it: the task finds it resident.
        close(wait(&[&cold], 2, 500), 10.0 + 6.0 + 10.0 + 0.5);
        // Resident on one of the serving workers: no load there.
        let warm = worker("sun", 1, 1, 10.0);
        close(wait(&[&cold, &warm], 1, 500), 10.5);
    }

    #[test]
    fn a_worker_that_has_not_run_the_model_is_taken_with_caution() {
        let known = worker("moon", 1, 1, 10.0);
        let mut unknown = worker("sun", 1, 0, 10.0);
        unknown.perf.clear();
        // Free, but nothing known of it: the best known figures, a half slower (1.5 x 0.5 s
        // of prompt) is still sooner than moon's 10 s.
        close(wait(&[&known, &unknown], 1, 500), 0.75);
    }

    #[test]
    fn serving_workers_are_the_healthy_ones_of_the_model_and_the_pinned_one() {
        let moon = worker("moon", 1, 0, 10.0);
        let mut sun = worker("sun", 1, 0, 10.0);
        sun.healthy = false;
        let mut other = worker("mars", 1, 0, 10.0);
        other.models = vec![ModelName::parse("llama3").unwrap()];
        let all = [moon.clone(), sun.clone(), other];
        let names = |v: Vec<&WorkerStatus>| -> Vec<String> {
            v.iter().map(|s| s.name.to_string()).collect()
        };
        assert_eq!(names(serving(&all, &model(), None)), ["moon"]);
        let sun_name = sun.name.clone();
        assert_eq!(names(serving(&all, &model(), Some(&sun_name))), ["sun"]);
        assert!(serving(&all, &ModelName::parse("nope").unwrap(), None).is_empty());
    }

    #[test]
    fn what_a_machine_owes_first_counts_as_placement_counts_it() {
        // Idle, but it owes one answer (10 s) in a lane only it serves.
        let moon = worker("moon", 1, 0, 10.0);
        let statuses = vec![moon.clone()];
        let mut backlog = Backlog::default();
        let owed = placement::Ahead {
            jobs: 1,
            prompt_tokens: Some(0),
        };
        backlog.count(&statuses, &Lane::llm_pinned(&model(), &moon.name), owed);
        let eta = |serving: &[&WorkerStatus], statuses: &[WorkerStatus]| {
            expected_wait_s(serving, statuses, &model(), 1, &backlog, 500)
        };
        close(eta(&[&moon], &statuses), 10.0 + 0.5);
        // Another idle machine owes nothing: the task goes there.
        let sun = worker("sun", 1, 0, 10.0);
        let both = vec![moon.clone(), sun.clone()];
        close(eta(&[&moon, &sun], &both), 0.5);
        // The same figure placement has for the same ask.
        let waiting = placement::Waiting {
            ahead: placement::Ahead::NONE,
            backlog: backlog.clone(),
        };
        let m = model();
        let ask = placement::Ask::fresh(&m, 500).after(&waiting);
        let placed = placement::queued::first_token_in(&[&moon], &statuses, &ask, Utc::now());
        close(placed, eta(&[&moon], &statuses).unwrap());
    }

    #[test]
    fn the_eta_is_shown_in_whole_seconds_rounded_up() {
        let w = QueueWait {
            position: 1,
            ahead: 1,
            eta_s: Some(13.2),
        };
        assert_eq!(w.eta_whole_s(), Some(14));
        assert_eq!(QueueWait { eta_s: None, ..w }.eta_whole_s(), None);
    }
}
