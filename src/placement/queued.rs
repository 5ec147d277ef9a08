//! The jobs waiting in Coordinator's queue before a task, by the same figures placement
//! uses: each serving machine's slots free as their running answers end (from how far
//! along they are); then each machine's own backlog ([`super::backlog`]) takes its slots
//! there; then the jobs ahead in the task's lane take slots one by one, each where its
//! first token comes soonest (a load the first time a machine takes the model, its prompt
//! at the machine's rate), and hold it for a whole answer. What is left is when each
//! machine can start the task: placement's wait for a slot ([`super::estimates_among`]),
//! and the queue's expected wait for a waiting task ([`first_token_in`]).

use chrono::{DateTime, Utc};

use super::{Ask, Pushes, answer_s, estimates_among, pushes_out, rates_on, slot_free_times};
use crate::backend::registry::WorkerStatus;

/// One machine once the jobs ahead have taken their slots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct After {
    /// Seconds until its soonest slot is free for the task.
    pub free_s: f64,
    /// Whether a job ahead loads the task's model there (the task then finds it resident).
    pub loaded_ahead: bool,
    /// Whether a load for the machine's own backlog pushes the task's model out there.
    pub pushed_out: bool,
    /// How many jobs of the task's model start there before it: each takes a slot of the
    /// model, and with it the prompt cache that slot held.
    pub same_model: usize,
}

/// Where the jobs ahead of `ask` ([`Ask::ahead`]), and before them each machine's own
/// backlog ([`Ask::backlog`]), leave each of `serving` (among `statuses`), in the order
/// given. What they ask is known only as a mean prompt (or, when the queue does not know
/// it, as long as the ask's own); each is a whole answer of its model. One pass over the
/// jobs ahead, over every serving machine each, and one over each machine's backlog:
/// figured once per placement.
pub fn after_ahead(
    serving: &[&WorkerStatus],
    statuses: &[WorkerStatus],
    ask: &Ask<'_>,
    now: DateTime<Utc>,
) -> Vec<After> {
    // Each machine's slots, soonest first: as many as the jobs put there may take, and one
    // for the task.
    let mut slots: Vec<Vec<f64>> = serving
        .iter()
        .map(|s| {
            let owed: usize = ask.backlog.of(&s.name).map(|o| o.ahead.jobs).sum();
            slot_free_times(s, ask.model, statuses, now, ask.ahead.jobs + owed + 1)
        })
        .collect();
    let owes: Vec<Owes> = serving
        .iter()
        .zip(&mut slots)
        .map(|(s, slots)| owe(s, slots, statuses, ask))
        .collect();
    let mut loaded_ahead: Vec<bool> = owes.iter().map(|o| o.loads_it).collect();
    let mut same_model: Vec<usize> = owes.iter().map(|o| o.same_model).collect();
    if ask.ahead.jobs > 0 {
        let rates: Vec<_> = serving
            .iter()
            .map(|s| rates_on(s, ask.model, statuses))
            .collect();
        let mut holds: Vec<bool> = serving
            .iter()
            .zip(&owes)
            .map(|(s, o)| o.loads_it || (s.loaded.contains(ask.model) && !o.pushed_out))
            .collect();
        let prompt = ask.ahead.prompt_each(ask.prompt_tokens);
        for _ in 0..ask.ahead.jobs {
            // Where this job's first token comes soonest.
            let first_token = |i: usize| {
                let load = if holds[i] { 0.0 } else { rates[i].load_s };
                slots[i]
                    .first()
                    .map(|free| free + load + prompt / rates[i].prompt_tps.max(1.0))
            };
            let Some((i, at)) = (0..serving.len())
                .filter_map(|i| first_token(i).map(|at| (i, at)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
            else {
                break;
            };
            loaded_ahead[i] |= !holds[i];
            holds[i] = true;
            same_model[i] += 1;
            slots[i][0] = at + answer_s(&rates[i]);
            slots[i].sort_by(f64::total_cmp);
        }
    }
    slots
        .iter()
        .zip(loaded_ahead)
        .zip(owes)
        .zip(same_model)
        .map(|(((free, loaded_ahead), owes), same_model)| After {
            free_s: free.first().copied().unwrap_or(0.0),
            loaded_ahead,
            pushed_out: owes.pushed_out,
            same_model,
        })
        .collect()
}

/// What a machine's own backlog does to the task's model there.
#[derive(Debug, Clone, Copy, Default)]
struct Owes {
    /// A load of another model pushes it out (it is the idle resident model used longest
    /// ago).
    pushed_out: bool,
    /// A job of a lane pinned there loads it.
    loads_it: bool,
    /// How many of the jobs it owes are of the task's model (a lane of it pinned there).
    same_model: usize,
}

/// Puts what `s` owes ([`Ask::backlog`]) into its `slots` (soonest first), each job where
/// one frees first: a load the first time a model not resident there comes, its prompt at
/// the machine's rate, a whole answer.
fn owe(s: &WorkerStatus, slots: &mut [f64], statuses: &[WorkerStatus], ask: &Ask<'_>) -> Owes {
    let mut owes = Owes::default();
    for owed in ask.backlog.of(&s.name) {
        let rates = rates_on(s, &owed.model, statuses);
        let prompt = owed.ahead.prompt_each(ask.prompt_tokens);
        let mut resident = s.loaded.contains(&owed.model);
        if owed.model == *ask.model {
            owes.same_model += owed.ahead.jobs;
        }
        if !resident && owed.ahead.jobs > 0 {
            if owed.model == *ask.model {
                owes.loads_it = true;
            } else {
                owes.pushed_out |= pushes_out(s, &owed.model) == Pushes::Idle(ask.model);
            }
        }
        for _ in 0..owed.ahead.jobs {
            let Some(first) = slots.first_mut() else {
                break;
            };
            let load = if resident { 0.0 } else { rates.load_s };
            resident = true;
            *first += load + prompt / rates.prompt_tps.max(1.0) + answer_s(&rates);
            slots.sort_by(f64::total_cmp);
        }
    }
    owes
}

/// Expected seconds until the first token of `ask` with the jobs [`Ask::ahead`] before
/// it, served by `serving` (a subset of `statuses`): the soonest of placement's estimates
/// on them. `None` when nobody serves it.
pub fn first_token_in(
    serving: &[&WorkerStatus],
    statuses: &[WorkerStatus],
    ask: &Ask<'_>,
    now: DateTime<Utc>,
) -> Option<f64> {
    estimates_among(serving, statuses, ask, now)
        .into_iter()
        .map(|e| e.ttft_s)
        .reduce(f64::min)
}
