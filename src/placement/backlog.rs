//! A machine's own backlog: the jobs waiting in Coordinator's queue, in lanes only that
//! machine serves, that it will take before a task.
//!
//! A task's own lane is counted by [`super::Ahead`]: its jobs go to whichever serving
//! machine is free first. Other lanes are invisible there, yet some of them occupy one
//! machine for certain: a lane pinned to it (`model@machine`), and the lane of a model no
//! other machine serves (in the household, `qwen2.5-coder:7b` on moon). Their waiting jobs
//! that go before the task (a better or equal effective priority, the queue's own rule)
//! are that machine's backlog: it finishes them before it is free for the task, and a
//! model they load may push the task's out ([`super::queued::after_ahead`]). So is a job
//! of any lane left for one machine by the others ([`Waiting::left`]: a job a worker left
//! for a sooner one, and that the other workers serving its model avoid until a time):
//! it runs there, before that machine is free for the task, in embedded mode, where the
//! queue sees the jobs' avoid lists.
//!
//! Read on the request path once per placement, from the queue's own figures: in embedded
//! mode one pass over the in-process queue under its lock; in cluster mode the lanes'
//! depths the dispatcher reads at most twice a second. Nothing is allocated while no lane
//! of one machine holds work.

use crate::backend::registry::WorkerStatus;
use crate::domain::{Lane, ModelName, WorkerName};

use super::Ahead;

/// What waits in Coordinator's queue before a task: in its own lane, and on each machine's
/// own backlog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Waiting {
    pub ahead: Ahead,
    pub backlog: Backlog,
}

impl Waiting {
    /// Adds `ahead`, jobs of `lane` that go before a task of lane `own`: to the task's own
    /// jobs ahead when `lane` is `own`, else to the backlog of the machine that alone
    /// serves `lane` (among `statuses`), when one does.
    pub fn count(&mut self, statuses: &[WorkerStatus], own: &Lane, lane: &Lane, ahead: Ahead) {
        if lane == own {
            self.ahead = self.ahead.plus(ahead);
        } else {
            self.backlog.count(statuses, lane, ahead);
        }
    }

    /// Adds `ahead`, a job of `lane` left for a sooner worker, to the backlog of the one
    /// machine (among `statuses`, as placement counts them) serving its model that it
    /// does not `avoid` now, and returns true; false, adding nothing, when that is not
    /// one machine.
    pub fn left(
        &mut self,
        statuses: &[WorkerStatus],
        lane: &Lane,
        avoids: impl Fn(&WorkerName) -> bool,
        ahead: Ahead,
    ) -> bool {
        let Lane::Llm { model, .. } = lane else {
            return false;
        };
        match sole_server(statuses, model, avoids) {
            Some(one) => {
                self.backlog.owe(one, model, ahead);
                true
            }
            None => false,
        }
    }
}

/// Per machine and model, the jobs waiting in lanes only that machine serves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backlog {
    owed: Vec<Owed>,
}

/// The jobs of one model one machine owes: they run there, and nowhere else.
#[derive(Debug, Clone, PartialEq)]
pub struct Owed {
    pub worker: WorkerName,
    pub model: ModelName,
    pub ahead: Ahead,
}

/// No backlog anywhere: what an ask carries unless told otherwise.
pub static NONE: Backlog = Backlog { owed: Vec::new() };

impl Backlog {
    /// Adds `ahead` of `lane` to the machine that alone serves it, if one does.
    pub fn count(&mut self, statuses: &[WorkerStatus], lane: &Lane, ahead: Ahead) {
        if ahead.jobs == 0 {
            return;
        }
        let (Some(worker), Lane::Llm { model, .. }) = (only_server(statuses, lane), lane) else {
            return;
        };
        self.owe(worker, model, ahead);
    }

    /// Adds `ahead` of `model` to what `worker` owes.
    fn owe(&mut self, worker: &WorkerName, model: &ModelName, ahead: Ahead) {
        if ahead.jobs == 0 {
            return;
        }
        match self
            .owed
            .iter_mut()
            .find(|o| &o.worker == worker && &o.model == model)
        {
            Some(o) => o.ahead = o.ahead.plus(ahead),
            None => self.owed.push(Owed {
                worker: worker.clone(),
                model: model.clone(),
                ahead,
            }),
        }
    }

    /// What `worker` owes.
    pub fn of<'a>(&'a self, worker: &'a WorkerName) -> impl Iterator<Item = &'a Owed> + 'a {
        self.owed.iter().filter(move |o| &o.worker == worker)
    }

    pub fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }
}

/// The machine that alone takes `lane`'s jobs, if one does: the one it is pinned to, or
/// the only one serving its model (among the healthy ones, or all when none is, as
/// placement counts them). Not the web, documents and utility lanes, whose work goes to
/// whichever machine serves their model.
pub fn only_server<'a>(statuses: &'a [WorkerStatus], lane: &Lane) -> Option<&'a WorkerName> {
    let Lane::Llm {
        model,
        pinned_worker,
    } = lane
    else {
        return None;
    };
    if let Some(pinned) = pinned_worker {
        return statuses
            .iter()
            .find(|s| &s.name == pinned && s.models.contains(model))
            .map(|s| &s.name);
    }
    sole_server(statuses, model, |_| false)
}

/// The one machine serving `model` (among the healthy ones, or all when none is) that is
/// not `excluded`, if exactly one is.
fn sole_server<'a>(
    statuses: &'a [WorkerStatus],
    model: &ModelName,
    excluded: impl Fn(&WorkerName) -> bool,
) -> Option<&'a WorkerName> {
    let any_healthy = statuses
        .iter()
        .any(|s| s.healthy && s.models.contains(model));
    let mut serving = statuses
        .iter()
        .filter(|s| s.models.contains(model) && (s.healthy || !any_healthy) && !excluded(&s.name));
    match (serving.next(), serving.next()) {
        (Some(one), None) => Some(&one.name),
        _ => None,
    }
}

/// The lanes other than `own` whose jobs only `machine` (among `statuses`) takes (see
/// [`only_server`]): where its backlog can wait, for a worker that asks the queue lane by
/// lane.
pub fn lanes_owed_by(statuses: &[WorkerStatus], machine: &WorkerStatus, own: &Lane) -> Vec<Lane> {
    let mut lanes = Vec::new();
    for m in &machine.models {
        for lane in [Lane::llm_pinned(m, &machine.name), Lane::llm(m)] {
            if &lane != own && only_server(statuses, &lane) == Some(&machine.name) {
                lanes.push(lane);
            }
        }
    }
    lanes
}

#[cfg(test)]
#[path = "backlog_tests.rs"]
mod tests;
