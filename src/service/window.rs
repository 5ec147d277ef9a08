//! Fitting a turn's composed request into its model's window, before it is recorded: the
//! largest window any worker that may run it allows, less the answer's room; history
//! oldest first, then memory lowest score first (see [`crate::context::budget`]). The
//! row's [`ContextNote`] says what went.

use crate::backend::BackendRequest;
use crate::backend::registry::WorkerStatus;
use crate::chat::ChatMessage;
use crate::context::{self, PromptTooLong, budget};
use crate::lang::Lang;
use crate::memory::MemoryHit;
use crate::routing::RouteDecision;
use crate::store::ContextNote;
use crate::turn::{History, Turn};

/// The most tokens the task may fill, prompt and answer: the smallest window among the
/// workers that may run it (the pinned one, else every one serving the model: the lane is
/// theirs), within the client's own `num_ctx`. `None` when nothing is known.
pub(super) fn limit_for(
    statuses: &[WorkerStatus],
    decision: &RouteDecision,
    turn: &Turn,
) -> Option<u32> {
    let pinned = decision.pinned_worker();
    let window = statuses
        .iter()
        .filter(|s| s.models.contains(&decision.model))
        .filter(|s| pinned.is_none_or(|p| &s.name == p))
        .filter_map(|s| s.window(&decision.model).limit())
        .min();
    match (window, turn.params.num_ctx) {
        (Some(w), Some(own)) => Some(w.min(own)),
        (w, own) => w.or(own),
    }
}

/// A request that fits, and what fitting it did.
pub(super) struct Fitted {
    pub request: BackendRequest,
    /// The request's estimated prompt tokens.
    pub tokens: u32,
    pub note: ContextNote,
}

/// Composes the request (`compose(history, memory block)`) and trims it to `limit`.
pub(super) fn fit(
    turn: &Turn,
    hits: &[MemoryHit],
    limit: Option<u32>,
    lang: Lang,
    compose: impl Fn(&History, Option<&str>) -> BackendRequest,
    block: impl Fn(&[MemoryHit]) -> Option<String>,
) -> Result<Fitted, PromptTooLong> {
    let units = Units::of(&turn.history);
    let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
    let kept_hits =
        |kept: &[usize]| -> Vec<MemoryHit> { kept.iter().map(|i| hits[*i].clone()).collect() };
    let build = |first: usize, kept: &[usize]| {
        compose(&units.from(first), block(&kept_hits(kept)).as_deref())
    };
    let (first, kept) = match limit {
        None => (0, (0..hits.len()).collect()),
        Some(limit) => {
            let room = budget::prompt_room(limit, context::answer_reserve(turn.params.max_tokens));
            let cost = |first: usize, kept: &[usize]| build(first, kept).estimated_prompt_tokens();
            match budget::trim(units.len(), &scores, room, cost) {
                Ok(t) => (t.turns_dropped, t.memory_kept),
                Err(tokens) => return Err(PromptTooLong { tokens, room, lang }),
            }
        }
    };
    let request = build(first, &kept);
    let dropped = turn.history_dropped + units.messages_before(first);
    if dropped > 0 || kept.len() < hits.len() {
        tracing::info!(
            history_dropped = dropped,
            memory_dropped = hits.len() - kept.len(),
            limit,
            "request trimmed to its model's window"
        );
    }
    let tokens = request.estimated_prompt_tokens();
    let note = ContextNote {
        history_dropped: Some(count(dropped)),
        memory_dropped: Some(count(hits.len() - kept.len())),
        estimated_prompt_tokens: Some(i64::from(tokens)),
        num_ctx: None,
    };
    Ok(Fitted {
        request,
        tokens,
        note,
    })
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The history in the units it is trimmed by: whole turns (a user message and what
/// answered it), or the seed's text history as one.
enum Units {
    Turns(Vec<Vec<ChatMessage>>),
    Text(String),
    None,
}

impl Units {
    fn of(history: &History) -> Self {
        match history {
            History::Messages(m) => {
                Self::Turns(crate::turn::split_history_turns(m.iter().cloned()))
            }
            History::Text(t) => Self::Text(t.clone()),
            History::None => Self::None,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Turns(t) => t.len(),
            Self::Text(_) => 1,
            Self::None => 0,
        }
    }

    /// The history without its first `first` units.
    fn from(&self, first: usize) -> History {
        match self {
            Self::Turns(t) if first < t.len() => History::Messages(t[first..].concat()),
            Self::Text(t) if first == 0 => History::Text(t.clone()),
            _ => History::None,
        }
    }

    /// Messages in the first `first` units.
    fn messages_before(&self, first: usize) -> usize {
        match self {
            Self::Turns(t) => t[..first.min(t.len())].iter().map(Vec::len).sum(),
            Self::Text(_) => first.min(1),
            Self::None => 0,
        }
    }
}
