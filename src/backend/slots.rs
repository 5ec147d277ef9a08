//! A backend's slots: which answers Coordinator lets it run at once.
//!
//! Ollama runs `OLLAMA_NUM_PARALLEL` generations *per resident model*, and as many models
//! side by side as it keeps resident: a desktop with room for two answers a coder turn and
//! a chat turn together, but a second chat turn waits in Ollama's own queue behind the
//! first. So a backend has `parallel` slots per model, and at most as many models answer
//! at once as the machine keeps resident (a model that is not resident starts only when a
//! resident one is idle and can be pushed out, or there is room). What does not fit waits
//! in Coordinator's queue, where the first machine that frees up can take it, instead of
//! in the backend's.

use std::sync::{Arc, Mutex, PoisonError};

use crate::config::BackendKind;
use crate::domain::ModelName;

/// The slots of one backend, shared by its worker and the embedded dispatcher's direct
/// hand-off. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Slots {
    parallel: usize,
    /// Answers holding a slot, per model (models with none are not listed).
    held: Mutex<Vec<(ModelName, usize)>>,
    /// Bumped whenever a slot is given back, so a worker waiting for one looks again.
    freed: tokio::sync::watch::Sender<u64>,
}

/// One answer's slot, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    model: ModelName,
}

impl Slots {
    /// `parallel` answers per model (at least one).
    pub fn new(parallel: usize) -> Arc<Self> {
        Arc::new(Self {
            parallel: parallel.max(1),
            held: Mutex::new(Vec::new()),
            freed: tokio::sync::watch::Sender::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(ModelName, usize)>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers per model at once.
    pub fn parallel(&self) -> usize {
        self.parallel
    }

    /// Whether an answer of `model` may start now, on a machine where at most
    /// `models_at_once` models answer at once: fewer than `parallel` of its answers hold a
    /// slot, and it answers already or fewer than `models_at_once` models do.
    pub fn can_start(&self, model: &ModelName, models_at_once: usize) -> bool {
        fits(&self.lock(), self.parallel, model, models_at_once)
    }

    /// A slot for an answer of `model`, when [`Self::can_start`].
    pub fn try_take(self: &Arc<Self>, model: &ModelName, models_at_once: usize) -> Option<Slot> {
        let mut held = self.lock();
        if !fits(&held, self.parallel, model, models_at_once) {
            return None;
        }
        add(&mut held, model);
        drop(held);
        Some(Slot {
            slots: self.clone(),
            model: model.clone(),
        })
    }

    /// A slot for an answer of `model` whether or not one is free: for a job the worker
    /// has already taken from the queue, whose model turned out other than the lane's.
    pub fn take(self: &Arc<Self>, model: &ModelName) -> Slot {
        add(&mut self.lock(), model);
        Slot {
            slots: self.clone(),
            model: model.clone(),
        }
    }

    /// How many models hold a slot now.
    pub fn models_answering(&self) -> usize {
        self.lock().len()
    }

    /// Answers holding a slot now, of every model.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().iter().map(|(_, n)| n).sum()
    }

    /// Answers of `model` holding a slot now.
    #[cfg(test)]
    fn held_by(&self, model: &ModelName) -> usize {
        self.lock()
            .iter()
            .find(|(m, _)| m == model)
            .map_or(0, |(_, n)| *n)
    }

    /// A receiver that sees a change whenever a slot is given back: mark it unchanged
    /// before looking at the slots, then wait for `changed()`, and no release is missed.
    pub fn watch_freed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.freed.subscribe()
    }
}

/// How many models answer at once on a machine of `kind` that keeps `max_loaded` models
/// resident (configured or learned; `None` while unknown) and has been seen holding `seen`
/// at once now (resident, or answering while their load is not yet listed). On Ollama, as
/// many as it keeps resident; while that is unknown, one more than it holds now: a machine
/// whose room is not known yet is tried with one more model, not with every model at once.
/// Where the extra model fits (a desktop that keeps two), it answers beside the first at
/// once instead of waiting for it; where it does not, it waits in Ollama's queue for the
/// busy model to finish, that load evicts it, and the eviction teaches the capacity
/// ([`super::activity::Activity::resident_now`], kept across restarts), so a machine is
/// tried once, not every time. On an OpenAI-compatible server, which says nothing of
/// residency, `max_loaded` when configured, else every model it serves.
pub fn models_at_once(kind: BackendKind, max_loaded: Option<usize>, seen: usize) -> usize {
    match kind {
        BackendKind::Ollama => max_loaded.unwrap_or(seen.saturating_add(1)).max(1),
        BackendKind::Openai => max_loaded.unwrap_or(usize::MAX),
    }
}

fn fits(held: &[(ModelName, usize)], parallel: usize, model: &ModelName, at_once: usize) -> bool {
    match held.iter().find(|(m, _)| m == model) {
        Some((_, n)) => *n < parallel,
        None => held.len() < at_once.max(1),
    }
}

fn add(held: &mut Vec<(ModelName, usize)>, model: &ModelName) {
    match held.iter_mut().find(|(m, _)| m == model) {
        Some((_, n)) => *n += 1,
        None => held.push((model.clone(), 1)),
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut held = self.slots.lock();
            if let Some(i) = held.iter().position(|(m, _)| m == &self.model) {
                held[i].1 -= 1;
                if held[i].1 == 0 {
                    held.swap_remove(i);
                }
            }
        }
        self.slots.freed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str) -> ModelName {
        ModelName::parse(name).unwrap()
    }

    #[test]
    fn each_model_has_parallel_slots_and_as_many_models_answer_as_the_machine_keeps() {
        let slots = Slots::new(1);
        let (chat, coder, small) = (m("chat:7b"), m("coder:7b"), m("small:3b"));
        let a = slots.try_take(&chat, 2).expect("an idle machine");
        assert!(slots.try_take(&chat, 2).is_none(), "one answer per model");
        let b = slots
            .try_take(&coder, 2)
            .expect("a second model side by side");
        assert!(
            slots.try_take(&small, 2).is_none(),
            "a third model while two answer on a machine that keeps two"
        );
        assert_eq!((slots.held(), slots.held_by(&chat)), (2, 1));
        drop(a);
        assert!(slots.can_start(&chat, 2) && slots.can_start(&small, 2));
        assert!(!slots.can_start(&coder, 2));
        drop(b);
        assert_eq!(slots.held(), 0);
    }

    #[test]
    fn parallel_two_runs_two_of_a_model() {
        let slots = Slots::new(2);
        let chat = m("chat:7b");
        let _a = slots.try_take(&chat, 1).unwrap();
        let _b = slots.try_take(&chat, 1).unwrap();
        assert!(slots.try_take(&chat, 1).is_none());
        assert!(
            !slots.can_start(&m("small:3b"), 1),
            "a machine that keeps one"
        );
        let _c = slots.take(&chat);
        assert_eq!(slots.held_by(&chat), 3, "a job already taken runs");
    }

    #[test]
    fn a_machine_of_unknown_room_is_tried_with_one_more_model_than_it_holds() {
        let ollama = |max_loaded, seen| models_at_once(BackendKind::Ollama, max_loaded, seen);
        assert_eq!(
            ollama(None, 0),
            1,
            "an idle machine: one model to begin with"
        );
        assert_eq!(ollama(None, 1), 2, "one more beside the one it holds");
        assert_eq!(ollama(None, 2), 3);
        assert_eq!(ollama(Some(1), 1), 1, "known to keep one");
        assert_eq!(ollama(Some(2), 0), 2, "known to keep two");
        let openai = |max_loaded, seen| models_at_once(BackendKind::Openai, max_loaded, seen);
        assert_eq!(openai(None, 0), usize::MAX, "every model it serves");
        assert_eq!(openai(Some(2), 5), 2);
    }

    #[tokio::test]
    async fn a_slot_given_back_is_seen_by_a_waiting_worker() {
        let slots = Slots::new(1);
        let chat = m("chat:7b");
        let held = slots.try_take(&chat, 1).unwrap();
        let mut freed = slots.watch_freed();
        freed.mark_unchanged();
        assert!(!slots.can_start(&chat, 1));
        let waiter = tokio::spawn(async move {
            freed.changed().await.unwrap();
        });
        drop(held);
        waiter.await.unwrap();
        assert!(slots.can_start(&chat, 1));
    }
}
