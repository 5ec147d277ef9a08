//! When a task waiting in its lane is expected to give its first token, by the same
//! figures placement uses: each serving machine's slots free as their running answers end
//! (from how far along they are), the jobs ahead of the task take the soonest free slots
//! one by one (a load the first time a machine takes the model, then a whole answer), and
//! the task then starts where its first token comes soonest.

use chrono::{DateTime, Utc};

use super::{Ask, answer_s, rates_on, slot_free_times, start_on};
use crate::backend::registry::WorkerStatus;

/// Expected seconds until the first token of `ask`, with `ahead` jobs before it in its
/// lane, served by `serving` (a subset of `statuses`); `None` when nobody serves it.
///
/// What the jobs ahead will ask is not known: each counts as a whole answer of the lane's
/// model (its prompt is not counted), after a load on a machine that does not hold the
/// model yet.
pub fn first_token_in(
    serving: &[&WorkerStatus],
    statuses: &[WorkerStatus],
    ask: &Ask<'_>,
    ahead: usize,
    now: DateTime<Utc>,
) -> Option<f64> {
    // Every slot of every serving machine: when it frees, and whose it is.
    let mut slots: Vec<(f64, usize)> = serving
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            slot_free_times(s, statuses, now)
                .into_iter()
                .map(move |t| (t, i))
        })
        .collect();
    if slots.is_empty() {
        return None;
    }
    // Per serving machine, figured once: its rates for the model and the task's start there.
    let rates: Vec<_> = serving
        .iter()
        .map(|s| rates_on(s, ask.model, statuses))
        .collect();
    let starts: Vec<_> = serving
        .iter()
        .map(|s| start_on(s, ask, statuses, now))
        .collect();
    let mut holds: Vec<bool> = serving
        .iter()
        .map(|s| s.loaded.contains(ask.model))
        .collect();
    // Where a job ahead loads the model, the task finds it resident.
    let mut loaded_ahead = vec![false; serving.len()];
    for _ in 0..ahead {
        let Some(soonest) = slots.iter_mut().min_by(|a, b| a.0.total_cmp(&b.0)) else {
            break;
        };
        let i = soonest.1;
        let load = if holds[i] { 0.0 } else { rates[i].load_s };
        loaded_ahead[i] |= !holds[i];
        holds[i] = true;
        soonest.0 += load + answer_s(&rates[i]);
    }
    slots
        .iter()
        .map(|&(free_at, i)| {
            let start = &starts[i];
            let seconds = if loaded_ahead[i] && !start.resident {
                start.seconds - rates[i].load_s
            } else {
                start.seconds
            };
            free_at.max(start.busy_wait_s) + seconds.max(0.0)
        })
        .reduce(f64::min)
}
