//! Fitting a turn's composed request into its model's window, before it is recorded: the
//! largest window any worker that may run it allows, less the answer's room; history
//! oldest first, then memory lowest score first (see [`crate::context::budget`]). The
//! row's [`ContextNote`] says what went.

use std::cell::RefCell;

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

/// How many memories to recall for a turn whose model is given `top_k`: room for one
/// more per history turn (up to three times `top_k`), since recall gives at most one per
/// earlier task and [`fit`] leaves out those the history shows.
pub(super) fn recall_limit(history: &History, top_k: usize) -> usize {
    let turns = match history {
        History::Messages(m) => m
            .iter()
            .filter(|m| m.role == crate::chat::Role::User)
            .count(),
        History::Text(_) => 1,
        History::None => 0,
    };
    top_k + turns.min(top_k.saturating_mul(3))
}

/// A request that fits, and what fitting it did.
pub(super) struct Fitted {
    pub request: BackendRequest,
    /// The request's estimated prompt tokens.
    pub tokens: u32,
    pub note: ContextNote,
}

/// Composes the request (`compose(history, memory block)`) and trims it to `limit`.
///
/// `hits` are recall's candidates, best first; at most `top_k` of them go in, and none
/// that the history sent with them already shows word for word (a turn of this
/// conversation that the client sent again): those say nothing new and cost the prompt
/// its length twice. When the window drops a history turn, its memory may come back in
/// its place, shorter.
pub(super) fn fit(
    turn: &Turn,
    hits: &[MemoryHit],
    top_k: usize,
    limit: Option<u32>,
    lang: Lang,
    compose: impl Fn(&History, Option<&str>) -> BackendRequest,
    block: impl Fn(&[MemoryHit]) -> Option<String>,
) -> Result<Fitted, PromptTooLong> {
    let units = Units::of(&turn.history);
    // For each candidate, the first history turn that shows it, if any.
    let shown_in = units.showing(hits);
    let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
    // The candidates that go in once the history starts at turn `first`, of those `kept`.
    let used = |first: usize, kept: &[usize]| -> Vec<usize> {
        kept.iter()
            .copied()
            .filter(|i| shown_in[*i].is_none_or(|turn| turn < first))
            .take(top_k)
            .collect()
    };
    let build = |first: usize, kept: &[usize]| {
        let used: Vec<MemoryHit> = used(first, kept).iter().map(|i| hits[*i].clone()).collect();
        compose(&units.from(first), block(&used).as_deref())
    };
    let all: Vec<usize> = (0..hits.len()).collect();
    // The request last built to be weighed: trimming stops at the first that fits, so
    // that one is sent as it is rather than composed again.
    let weighed: RefCell<Option<Weighed>> = RefCell::new(None);
    let (first, kept) = match limit {
        None => (0, all.clone()),
        Some(limit) => {
            let room = budget::prompt_room(limit, context::answer_reserve(turn.params.max_tokens));
            let cost = |first: usize, kept: &[usize]| {
                let request = build(first, kept);
                let tokens = request.estimated_prompt_tokens();
                *weighed.borrow_mut() = Some(Weighed {
                    first,
                    kept: kept.to_vec(),
                    request,
                    tokens,
                });
                tokens
            };
            match budget::trim(units.len(), &scores, room, cost) {
                Ok(t) => (t.turns_dropped, t.memory_kept),
                Err(tokens) => return Err(PromptTooLong { tokens, room, lang }),
            }
        }
    };
    let (request, tokens) = match weighed.into_inner() {
        Some(w) if w.first == first && w.kept == kept => (w.request, w.tokens),
        _ => {
            let request = build(first, &kept);
            let tokens = request.estimated_prompt_tokens();
            (request, tokens)
        }
    };
    let dropped = turn.history_dropped + units.messages_before(first);
    let wanted = used(first, &all).len();
    let memory_dropped = wanted - used(first, &kept).len();
    let repeated = shown_in
        .iter()
        .filter(|turn| turn.is_some_and(|turn| turn >= first))
        .count();
    if repeated > 0 {
        tracing::debug!(
            repeated,
            "memory the history already shows left out of the prompt"
        );
    }
    if dropped > 0 || memory_dropped > 0 {
        tracing::info!(
            history_dropped = dropped,
            memory_dropped,
            limit,
            "request trimmed to its model's window"
        );
    }
    let note = ContextNote {
        history_dropped: Some(count(dropped)),
        memory_dropped: Some(count(memory_dropped)),
        estimated_prompt_tokens: Some(i64::from(tokens)),
        num_ctx: None,
    };
    Ok(Fitted {
        request,
        tokens,
        note,
    })
}

/// A request built to be weighed against the window, with what it was built from.
struct Weighed {
    first: usize,
    kept: Vec<usize>,
    request: BackendRequest,
    tokens: u32,
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

    /// For each hit, the first unit whose messages show all of its text word for word
    /// ([`crate::memory::shown_in`]); `None` for a hit no unit shows.
    fn showing(&self, hits: &[MemoryHit]) -> Vec<Option<usize>> {
        if hits.is_empty() {
            return Vec::new();
        }
        let flat: Vec<String> = match self {
            Self::Turns(turns) => turns
                .iter()
                .map(|messages| {
                    let texts: Vec<String> = messages
                        .iter()
                        .map(|m| crate::memory::flatten(&m.content))
                        .collect();
                    texts.join("\n")
                })
                .collect(),
            Self::Text(t) => vec![crate::memory::flatten(t)],
            Self::None => Vec::new(),
        };
        hits.iter()
            .map(|h| {
                flat.iter()
                    .position(|shown| crate::memory::shown_in(&h.item.text, shown))
            })
            .collect()
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

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;
    use crate::backend::BackendRequest;
    use crate::chat::ChatMessage;
    use crate::config::HistoryConfig;
    use crate::domain::{ModelName, Person, TaskId};
    use crate::memory::MemoryItem;
    use crate::memory::store::ItemKind;
    use crate::turn::{TurnInput, build_turn};

    fn hit(text: &str, score: f32) -> MemoryHit {
        MemoryHit {
            item: MemoryItem {
                id: Uuid::now_v7(),
                person: Person::default(),
                thread_id: "t".to_owned(),
                task_id: TaskId::new(),
                seq: 0,
                kind: ItemKind::Exchange,
                text: text.to_owned(),
                subject: None,
                superseded_by: None,
                embedder: "test".to_owned(),
                vector: Vec::new(),
                created_at: Utc::now(),
            },
            score,
            same_thread: true,
        }
    }

    /// Two earlier turns (the first a long paste), then the question.
    fn turn() -> Turn {
        let paste = "the meeting approved the budget. ".repeat(150);
        let input = TurnInput {
            messages: vec![
                ChatMessage::user(format!("Notes:  {paste}")),
                ChatMessage::assistant("Noted   the notes."),
                ChatMessage::user("My cat is called Tama."),
                ChatMessage::assistant("A lovely name."),
                ChatMessage::user("What did the meeting decide?"),
            ],
            ..TurnInput::default()
        };
        build_turn(input, &HistoryConfig::default()).unwrap()
    }

    /// The request as the service composes it: the memory block before the prompt.
    fn compose(turn: &Turn, history: &History, memory: Option<&str>) -> BackendRequest {
        let mut messages = match history {
            History::Messages(m) => m.clone(),
            _ => Vec::new(),
        };
        let prompt = match memory {
            Some(block) => format!("{block}\n\n{}", turn.prompt),
            None => turn.prompt.clone(),
        };
        messages.push(ChatMessage::user(prompt));
        BackendRequest {
            model: ModelName::parse("m").unwrap(),
            messages,
            params: Default::default(),
            tools: Vec::new(),
        }
    }

    fn block(hits: &[MemoryHit]) -> Option<String> {
        (!hits.is_empty()).then(|| {
            let lines: Vec<&str> = hits.iter().map(|h| h.item.text.as_str()).collect();
            format!("<memory>{}</memory>", lines.join(" | "))
        })
    }

    fn memory_of(request: &BackendRequest) -> String {
        let prompt = &request.messages.last().unwrap().content;
        prompt
            .split_once("<memory>")
            .and_then(|(_, rest)| rest.split_once("</memory>"))
            .map_or(String::new(), |(inside, _)| inside.to_owned())
    }

    fn candidates() -> Vec<MemoryHit> {
        let paste = "the meeting approved the budget. ".repeat(150);
        vec![
            // The first turn, its prompt cut as memory cuts a long one.
            hit(&format!("Notes: {}…\nNoted the notes.", &paste[..400]), 0.9),
            hit("My cat is called Tama.\nA lovely name.", 0.8),
            hit("We moved the meeting to Friday.\nFriday it is.", 0.5),
            hit("The budget is due in May.\nNoted.", 0.4),
        ]
    }

    #[test]
    fn memory_the_history_shows_word_for_word_is_left_out_and_the_next_comes_instead() {
        let turn = turn();
        let hits = candidates();
        let fitted = fit(
            &turn,
            &hits,
            2,
            None,
            Lang::En,
            |h, m| compose(&turn, h, m),
            block,
        )
        .unwrap();
        let memory = memory_of(&fitted.request);
        assert!(
            !memory.contains("Tama") && !memory.contains("Noted the notes"),
            "{memory}"
        );
        assert!(
            memory.contains("Friday") && memory.contains("May"),
            "{memory}"
        );
        assert_eq!(fitted.note.memory_dropped, Some(0));
        assert_eq!(fitted.note.history_dropped, Some(0));
    }

    #[test]
    fn a_turn_the_window_drops_is_said_by_its_memory_instead() {
        let turn = turn();
        let hits = candidates();
        // Room for the last turns and the memory, not for the paste.
        let fitted = fit(
            &turn,
            &hits,
            2,
            Some(1024 + 300),
            Lang::En,
            |h, m| compose(&turn, h, m),
            block,
        )
        .unwrap();
        let sent: Vec<&str> = fitted
            .request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        assert!(
            !sent[0].contains("Notes:"),
            "the paste's turn is dropped: {sent:?}"
        );
        assert_eq!(fitted.note.history_dropped, Some(2));
        let memory = memory_of(&fitted.request);
        assert!(
            memory.contains("Noted the notes"),
            "its memory comes: {memory}"
        );
        assert!(
            !memory.contains("Tama"),
            "the cat's turn is still in the history: {memory}"
        );
        assert!(
            memory.contains("Friday") && !memory.contains("May"),
            "{memory}"
        );
    }

    /// The request trimming settles on is the one it weighed last: composed once when it
    /// fits at once, and once per trim otherwise, never again after.
    #[test]
    fn the_request_that_fits_is_the_one_weighed() {
        let turn = turn();
        let hits = candidates();
        let composed = std::cell::Cell::new(0);
        let counted = |h: &History, m: Option<&str>| {
            composed.set(composed.get() + 1);
            compose(&turn, h, m)
        };
        let roomy = fit(&turn, &hits, 2, Some(32_768), Lang::En, counted, block).unwrap();
        assert_eq!(composed.get(), 1);
        assert_eq!(roomy.note.history_dropped, Some(0));
        assert_eq!(roomy.tokens, roomy.request.estimated_prompt_tokens());

        composed.set(0);
        let tight = fit(&turn, &hits, 2, Some(1024 + 300), Lang::En, counted, block).unwrap();
        // The whole history, then without the paste's turn (one turn: its question and
        // the answer), which fits.
        assert_eq!(composed.get(), 2);
        assert_eq!(tight.note.history_dropped, Some(2));
        assert_eq!(tight.tokens, tight.request.estimated_prompt_tokens());
        let unlimited = fit(&turn, &hits, 2, None, Lang::En, counted, block).unwrap();
        assert_eq!(
            unlimited.tokens,
            unlimited.request.estimated_prompt_tokens()
        );
    }
}
