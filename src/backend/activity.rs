//! What a machine is doing and has just done, as placement needs it: the answers running
//! on it and how far along they are, the conversations it served lately per model (whose
//! history its prompt cache holds, and whose people are likely to come back to that
//! model), and how many models it has shown it keeps resident at once.
//!
//! Kept per backend by its [`super::registry::BackendHandle`], updated by the worker as a
//! task starts, streams and ends, and carried in `GET /workers` and the cluster heartbeats.

use std::collections::VecDeque;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::{ModelName, ThreadId};
use crate::queue::priority::Priority;

/// How long a conversation counts as active on a machine after its last turn there:
/// Ollama's default keep-alive, after which its model would be unloaded anyway.
pub const RECENT_FOR: Duration = Duration::minutes(5);

/// At most this many recent conversations are kept per machine.
const MAX_RECENT: usize = 64;

/// How many models Ollama keeps resident at once when nobody says otherwise
/// (`OLLAMA_MAX_LOADED_MODELS` is three per GPU) and none was seen evicted yet.
pub const DEFAULT_MAX_LOADED: usize = 3;

/// One answer running on the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Running {
    pub model: ModelName,
    pub started_at: DateTime<Utc>,
    /// When its first token came, if it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_at: Option<DateTime<Utc>>,
    /// Tokens streamed so far (chunks of content; about one token each).
    #[serde(default)]
    pub tokens: u32,
    pub prompt_tokens: u32,
    /// Whether its model had to be loaded for it.
    #[serde(default)]
    pub cold: bool,
    /// Whether the machine's prompt cache may hold most of its prompt: its conversation
    /// ran here with the same model lately, and the model was not loaded since. Its time
    /// to first token then says nothing of the prompt rate (see [`crate::backend::perf`]).
    #[serde(default)]
    pub cached: bool,
    /// Who waits for it: a person's turn (the default, also for heartbeats of older
    /// versions) or background work, which must not push out a model a person needs.
    #[serde(default)]
    pub priority: Priority,
}

/// A conversation the machine served lately, and with which model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recent {
    pub thread: ThreadId,
    pub model: ModelName,
    pub at: DateTime<Utc>,
    /// About how many tokens of it the machine's prompt cache holds: that turn's prompt
    /// and answer.
    #[serde(default)]
    pub tokens: u32,
}

/// How many models a machine keeps resident: `max_loaded` as configured or learned, else
/// Ollama's default, or as many as it holds now when that is more.
pub fn capacity(max_loaded: Option<usize>, resident: usize) -> usize {
    max_loaded
        .unwrap_or_else(|| DEFAULT_MAX_LOADED.max(resident))
        .max(1)
}

/// A load that placement is waiting to see in the backend's resident models, with what
/// was resident before it, to tell whether it evicted something.
#[derive(Debug, Clone)]
struct PendingLoad {
    model: ModelName,
    before: Vec<ModelName>,
}

/// The live part of one backend's state.
#[derive(Debug, Default)]
pub struct Activity {
    running: Vec<(u64, Running)>,
    next_id: u64,
    recent: VecDeque<Recent>,
    /// Conversations whose latest request here ended before its first token (moved to
    /// another machine, stopped), within [`RECENT_FOR`], at most [`MAX_RECENT`]: the
    /// machine may hold their prompt in its cache all the same (Ollama keeps the part it
    /// had processed), so their next turn here teaches no prompt rate. Not counted as
    /// served: placement does not count on that cache.
    left_early: VecDeque<Recent>,
    /// `max_loaded` from the config, if it states it.
    configured_max_loaded: Option<usize>,
    /// How many models were resident when a load evicted one: the machine's capacity.
    learned_max_loaded: Option<usize>,
    pending_load: Option<PendingLoad>,
}

impl Activity {
    pub fn new(configured_max_loaded: Option<usize>) -> Self {
        Self {
            configured_max_loaded,
            ..Self::default()
        }
    }

    /// Registers an answer that starts now; returns its id for [`Self::progress`] and
    /// [`Self::end`].
    pub fn start(&mut self, running: Running) -> u64 {
        self.next_id += 1;
        self.running.push((self.next_id, running));
        self.next_id
    }

    /// Updates a running answer: its first token's time and how many tokens it has.
    /// Returns the answer as it stands now.
    pub fn progress(&mut self, id: u64, tokens: u32, at: DateTime<Utc>) -> Option<&Running> {
        let (_, r) = self.running.iter_mut().find(|(i, _)| *i == id)?;
        if r.first_token_at.is_none() {
            r.first_token_at = Some(at);
        }
        r.tokens = tokens;
        Some(r)
    }

    /// The answer `id` ended (done, failed or dropped); its conversation, if known, counts
    /// as recent on this machine when an answer came (`answered`), else as one whose
    /// prompt the machine may hold ([`Self::may_hold`]). Returns whether it leaves its
    /// model's load unconfirmed: it waited for a load (it was cold), had no first token,
    /// and no other answer of the model takes the load on (see [`Self::load_taken_on`]).
    pub fn end(
        &mut self,
        id: u64,
        thread: Option<ThreadId>,
        answered: bool,
        at: DateTime<Utc>,
    ) -> bool {
        let Some(pos) = self.running.iter().position(|(i, _)| *i == id) else {
            return false;
        };
        let (_, r) = self.running.remove(pos);
        let unconfirmed = r.cold && r.first_token_at.is_none() && !self.load_taken_on(&r.model);
        if let Some(thread) = thread {
            let recent = Recent {
                thread,
                model: r.model,
                at,
                tokens: r.prompt_tokens.saturating_add(r.tokens),
            };
            if answered {
                self.served(recent);
            } else {
                keep(&mut self.left_early, recent);
            }
        }
        unconfirmed
    }

    /// Whether another answer of `model` shows the load of an answer that left it done
    /// (it has a token) or still waits for it; those that wait are cold from now on: the
    /// load is theirs.
    fn load_taken_on(&mut self, model: &ModelName) -> bool {
        let others: Vec<&mut Running> = (self.running.iter_mut())
            .map(|(_, o)| o)
            .filter(|o| &o.model == model)
            .collect();
        if others.iter().any(|o| o.first_token_at.is_some()) {
            return true;
        }
        let someone_waits = !others.is_empty();
        for other in others {
            other.cold = true;
        }
        someone_waits
    }

    /// Notes a conversation served (its newest turn replaces the older ones), forgetting
    /// what is too old or beyond [`MAX_RECENT`].
    pub fn served(&mut self, recent: Recent) {
        self.left_early.retain(|r| r.thread != recent.thread);
        keep(&mut self.recent, recent);
    }

    /// Whether `thread` was served here with `model` as the last conversation it had on
    /// this machine (so a slot's prompt cache may still hold it, unless the model was
    /// loaded again since).
    pub fn served_lately(&self, thread: &ThreadId, model: &ModelName) -> bool {
        self.recent
            .iter()
            .any(|r| &r.thread == thread && &r.model == model)
    }

    /// Whether the machine's prompt cache may hold the conversation for `model`: it
    /// served it lately, or a request of it ended here before its first token.
    pub fn may_hold(&self, thread: &ThreadId, model: &ModelName) -> bool {
        self.served_lately(thread, model)
            || (self.left_early.iter()).any(|r| &r.thread == thread && &r.model == model)
    }

    /// Whether an answer of `model` runs here now.
    pub fn runs(&self, model: &ModelName) -> bool {
        self.running.iter().any(|(_, r)| &r.model == model)
    }

    pub fn running(&self) -> Vec<Running> {
        self.running.iter().map(|(_, r)| r.clone()).collect()
    }

    /// The conversations served within [`RECENT_FOR`] of `now`, oldest first.
    pub fn recent(&self, now: DateTime<Utc>) -> Vec<Recent> {
        let cutoff = now - RECENT_FOR;
        self.recent
            .iter()
            .filter(|r| r.at >= cutoff)
            .cloned()
            .collect()
    }

    /// How many models the machine keeps resident: as configured, else as seen when a load
    /// evicted one; `None` while neither is known.
    pub fn max_loaded(&self) -> Option<usize> {
        self.configured_max_loaded.or(self.learned_max_loaded)
    }

    /// The capacity learned from an eviction (not the configured one), to keep.
    pub fn learned_max_loaded(&self) -> Option<usize> {
        self.learned_max_loaded
    }

    /// Takes back a capacity learned before a restart.
    pub fn restore_max_loaded(&mut self, learned: Option<usize>) {
        if self.learned_max_loaded.is_none() {
            self.learned_max_loaded = learned.filter(|n| *n > 0);
        }
    }

    /// A task for `model` starts while `resident` are resident: if it loads the model,
    /// the next look at the resident models tells whether the load evicted one.
    pub fn loading(&mut self, model: &ModelName, resident: &[ModelName]) {
        if !resident.contains(model) {
            self.pending_load = Some(PendingLoad {
                model: model.clone(),
                before: resident.to_vec(),
            });
        }
    }

    /// A fresh look at the resident models. When a pending load is in and a model that
    /// was resident before it is gone, the machine holds no more than what it holds now.
    pub fn resident_now(&mut self, resident: &[ModelName]) {
        let Some(pending) = &self.pending_load else {
            return;
        };
        if !resident.contains(&pending.model) {
            return;
        }
        if pending.before.iter().any(|m| !resident.contains(m)) {
            let capacity = resident.len().max(1);
            if self.learned_max_loaded != Some(capacity) {
                tracing::info!(model = %pending.model, max_loaded = capacity, "a load evicted a resident model; the machine keeps this many at once");
            }
            self.learned_max_loaded = Some(capacity);
        }
        self.pending_load = None;
    }
}

/// Notes `recent` in `list` (a conversation's newest turn replaces its older ones),
/// forgetting what is older than [`RECENT_FOR`] or beyond [`MAX_RECENT`].
fn keep(list: &mut VecDeque<Recent>, recent: Recent) {
    let cutoff = recent.at - RECENT_FOR;
    list.retain(|r| r.thread != recent.thread);
    list.push_back(recent);
    while list.len() > MAX_RECENT {
        list.pop_front();
    }
    while list.front().is_some_and(|r| r.at < cutoff) {
        list.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(s: &str) -> ModelName {
        ModelName::parse(s).unwrap()
    }

    fn thread(s: &str) -> ThreadId {
        ThreadId::parse(s).unwrap()
    }

    fn running(m: &str) -> Running {
        Running {
            model: model(m),
            started_at: Utc::now(),
            first_token_at: None,
            tokens: 0,
            prompt_tokens: 100,
            cold: false,
            cached: false,
            priority: Priority::Interactive,
        }
    }

    #[test]
    fn an_answer_is_running_until_it_ends_and_then_its_conversation_is_recent() {
        let mut a = Activity::new(None);
        let now = Utc::now();
        let id = a.start(running("m"));
        assert_eq!(a.running().len(), 1);
        let r = a.progress(id, 12, now).unwrap();
        assert_eq!((r.tokens, r.first_token_at), (12, Some(now)));
        // The first token's time stays the first one.
        let later = now + Duration::seconds(1);
        assert_eq!(a.progress(id, 20, later).unwrap().first_token_at, Some(now));
        a.end(id, Some(thread("t1")), true, later);
        assert!(a.running().is_empty());
        assert_eq!(a.recent(later).len(), 1);
        assert_eq!(a.recent(later)[0].model, model("m"));
        // The cache holds that turn's prompt (100) and answer (20 tokens).
        assert_eq!(a.recent(later)[0].tokens, 120);
        // Unknown ids change nothing.
        assert!(a.progress(id, 1, later).is_none());
        a.end(id, Some(thread("t2")), true, later);
        assert_eq!(a.recent(later).len(), 1);
    }

    #[test]
    fn a_conversation_counts_once_with_its_newest_turn_and_is_forgotten_after_a_while() {
        let mut a = Activity::new(None);
        let t0 = Utc::now();
        let served = |t: &str, m: &str, at| Recent {
            thread: thread(t),
            model: model(m),
            at,
            tokens: 10,
        };
        a.served(served("t1", "a", t0));
        a.served(served("t2", "a", t0 + Duration::seconds(1)));
        a.served(served("t1", "b", t0 + Duration::seconds(2)));
        let recent = a.recent(t0 + Duration::seconds(2));
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[1].thread, thread("t1"));
        assert_eq!(recent[1].model, model("b"));
        assert!(a.recent(t0 + RECENT_FOR + Duration::seconds(3)).is_empty());
        for i in 0..100 {
            a.served(served(&format!("x{i}"), "a", t0));
        }
        assert_eq!(a.recent(t0).len(), MAX_RECENT);
    }

    #[test]
    fn a_load_that_evicts_teaches_how_many_models_the_machine_keeps() {
        let mut a = Activity::new(None);
        assert_eq!(a.max_loaded(), None);
        // A load beside a resident model that stays: nothing learned.
        a.loading(&model("b"), &[model("a")]);
        a.resident_now(&[model("a")]); // not in yet: still waiting
        a.resident_now(&[model("a"), model("b")]);
        assert_eq!(a.max_loaded(), None);
        // The next load evicts one: two at once.
        a.loading(&model("c"), &[model("a"), model("b")]);
        a.resident_now(&[model("b"), model("c")]);
        assert_eq!(a.max_loaded(), Some(2));
        // A task on a resident model loads nothing.
        a.loading(&model("c"), &[model("b"), model("c")]);
        a.resident_now(&[model("c")]);
        assert_eq!(a.max_loaded(), Some(2));
        // The config wins.
        assert_eq!(Activity::new(Some(1)).max_loaded(), Some(1));
    }
}
