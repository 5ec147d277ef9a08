//! History preparation: the messages before the current prompt, cleaned of our own
//! decorations, made consistent around tool calls, and capped by `[history]` (what that
//! cuts is counted for the task row; the model's window trims further in
//! [`crate::context::budget`]).
//!
//! Called by [`crate::turn::build_turn`]; the result goes to the worker only. The unit of
//! capping is a conversation turn (a user message and everything that answered it), so
//! a tool result is never kept without the assistant message that called it, and the
//! kept history is always the most recent turns that fit.

use std::collections::HashSet;

use crate::chat::{ChatMessage, Role};
use crate::config::HistoryConfig;
use crate::turn::History;
use crate::turn::decoration::clean_for_history;

/// The worker's history from the messages before the current prompt, and how many
/// messages `max_turns` / `max_chars` left out (the task row records them). History that
/// is switched off counts as none, not as dropped.
pub fn prepare(earlier: &[ChatMessage], cfg: &HistoryConfig) -> (History, usize) {
    if !cfg.enabled {
        return (History::None, 0);
    }
    let turns: Vec<Vec<ChatMessage>> = split_turns(earlier.iter().filter_map(clean))
        .into_iter()
        .map(pair_tools)
        .filter(|t| !t.is_empty())
        .collect();
    let all: usize = turns.iter().map(Vec::len).sum();
    let kept = cap(turns, cfg);
    let dropped = all - kept.len();
    if kept.is_empty() {
        (History::None, dropped)
    } else {
        (History::Messages(kept), dropped)
    }
}

/// Characters a message counts against `max_chars`: its text and its tool calls' names
/// and arguments. Images are not counted.
pub fn message_chars(m: &ChatMessage) -> usize {
    m.content.chars().count()
        + m.tool_calls
            .iter()
            .map(|c| c.name.chars().count() + c.arguments.chars().count())
            .sum::<usize>()
}

/// One message made fit for history, or `None` when nothing of it is worth keeping.
fn clean(m: &ChatMessage) -> Option<ChatMessage> {
    match m.role {
        Role::System => None,
        Role::Assistant => {
            let content = clean_for_history(&m.content);
            if content.trim().is_empty() && m.tool_calls.is_empty() && m.images.is_empty() {
                return None;
            }
            Some(ChatMessage {
                content,
                ..m.clone()
            })
        }
        Role::User if m.content.trim().is_empty() && m.images.is_empty() => None,
        Role::User | Role::Tool => Some(m.clone()),
    }
}

/// Splits messages into turns: each user message starts one. Messages before the first
/// user message form a turn of their own.
pub(crate) fn split_turns(messages: impl Iterator<Item = ChatMessage>) -> Vec<Vec<ChatMessage>> {
    let mut turns: Vec<Vec<ChatMessage>> = Vec::new();
    for m in messages {
        match turns.last_mut() {
            Some(turn) if m.role != Role::User => turn.push(m),
            _ => turns.push(vec![m]),
        }
    }
    turns
}

/// Keeps a tool result only after an assistant message that called it, and a tool call
/// only when its result is kept. Assistant messages left with nothing are dropped.
/// A result without a `tool_call_id` answers any earlier call (Ollama style).
fn pair_tools(turn: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut called: HashSet<&str> = HashSet::new();
    let mut keep_result = Vec::with_capacity(turn.len());
    for m in &turn {
        if m.role == Role::Assistant {
            called.extend(m.tool_calls.iter().map(|c| c.id.as_str()));
        }
        keep_result.push(
            m.role == Role::Tool
                && match &m.tool_call_id {
                    Some(id) => called.contains(id.as_str()),
                    None => !called.is_empty(),
                },
        );
    }
    let answered: HashSet<String> = turn
        .iter()
        .zip(&keep_result)
        .filter(|(_, keep)| **keep)
        .filter_map(|(m, _)| m.tool_call_id.clone())
        .collect();
    let idless_answer = turn
        .iter()
        .zip(&keep_result)
        .any(|(m, keep)| *keep && m.tool_call_id.is_none());
    turn.into_iter()
        .zip(keep_result)
        .filter_map(|(mut m, keep)| match m.role {
            Role::Tool => keep.then_some(m),
            Role::Assistant => {
                m.tool_calls
                    .retain(|c| idless_answer || answered.contains(&c.id));
                let empty =
                    m.content.trim().is_empty() && m.tool_calls.is_empty() && m.images.is_empty();
                (!empty).then_some(m)
            }
            _ => Some(m),
        })
        .collect()
}

/// The most recent whole turns within `max_turns` user messages and `max_chars` characters
/// (when set).
fn cap(turns: Vec<Vec<ChatMessage>>, cfg: &HistoryConfig) -> Vec<ChatMessage> {
    let max_chars = cfg.max_chars.unwrap_or(usize::MAX);
    let mut chars = 0usize;
    let mut user_turns = 0usize;
    let mut start = turns.len();
    for (i, turn) in turns.iter().enumerate().rev() {
        let turn_chars: usize = turn.iter().map(message_chars).sum();
        let turn_users = turn.iter().filter(|m| m.role == Role::User).count();
        if chars.saturating_add(turn_chars) > max_chars || user_turns + turn_users > cfg.max_turns {
            break;
        }
        chars += turn_chars;
        user_turns += turn_users;
        start = i;
    }
    turns.into_iter().skip(start).flatten().collect()
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
