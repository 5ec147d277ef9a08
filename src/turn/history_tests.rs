//! Property and unit tests for history cleaning and capping.

use proptest::prelude::*;

use super::*;
use crate::chat::ToolCall;
use crate::turn::{TurnInput, build_turn};

fn tool_result(id: Option<&str>, text: &str) -> ChatMessage {
    let mut m = ChatMessage::new(Role::Tool, text);
    m.tool_call_id = id.map(str::to_owned);
    m
}

fn calling(ids: &[&str]) -> ChatMessage {
    let mut m = ChatMessage::assistant("");
    m.tool_calls = ids
        .iter()
        .map(|id| ToolCall {
            id: (*id).to_owned(),
            name: "f".into(),
            arguments: "{}".into(),
        })
        .collect();
    m
}

fn unlimited() -> HistoryConfig {
    HistoryConfig {
        enabled: true,
        max_turns: usize::MAX,
        max_chars: None,
    }
}

fn messages(h: History) -> Vec<ChatMessage> {
    match h {
        History::Messages(m) => m,
        History::None => Vec::new(),
        History::Text(t) => panic!("unexpected text history {t:?}"),
    }
}

#[test]
fn orphan_tool_results_and_unanswered_calls_are_dropped() {
    let earlier = vec![
        ChatMessage::user("q"),
        tool_result(Some("x"), "orphan"),
        calling(&["a", "b"]),
        tool_result(Some("a"), "ra"),
        ChatMessage::assistant("done"),
    ];
    let got = messages(prepare(&earlier, &unlimited()).0);
    assert_eq!(
        got,
        vec![
            ChatMessage::user("q"),
            calling(&["a"]),
            tool_result(Some("a"), "ra"),
            ChatMessage::assistant("done"),
        ]
    );
}

#[test]
fn caps_keep_the_most_recent_whole_turns() {
    let earlier = vec![
        ChatMessage::user("one"),
        ChatMessage::assistant("1111"),
        ChatMessage::user("two"),
        ChatMessage::assistant("2222"),
    ];
    let turns = HistoryConfig {
        max_turns: 1,
        ..unlimited()
    };
    assert_eq!(messages(prepare(&earlier, &turns).0), earlier[2..].to_vec());
    assert_eq!(
        prepare(&earlier, &turns).1,
        2,
        "the dropped turn is counted"
    );
    let chars = HistoryConfig {
        max_chars: Some(10),
        ..unlimited()
    };
    assert_eq!(messages(prepare(&earlier, &chars).0), earlier[2..].to_vec());
    let tiny = HistoryConfig {
        max_chars: Some(6),
        ..unlimited()
    };
    assert_eq!(prepare(&earlier, &tiny), (History::None, 4));
}

/// A random conversation; every message's text carries its index, so no two are equal.
fn conversation() -> impl Strategy<Value = Vec<ChatMessage>> {
    let role = prop::sample::select(vec![Role::System, Role::User, Role::Assistant, Role::Tool]);
    let id = prop::option::of(prop::sample::select(vec!["a", "b", "c"]));
    let msg = (role, ".{0,12}", prop::collection::vec("[abc]", 0..3), id);
    prop::collection::vec(msg, 0..24).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (role, text, calls, id))| {
                let mut m = ChatMessage::new(role, format!("m{i}:{text}"));
                if role == Role::Assistant {
                    m.tool_calls = calls
                        .into_iter()
                        .map(|c| ToolCall {
                            id: c,
                            name: "f".into(),
                            arguments: "{}".into(),
                        })
                        .collect();
                }
                if role == Role::Tool {
                    m.tool_call_id = id.map(str::to_owned);
                }
                m
            })
            .collect()
    })
}

fn config() -> impl Strategy<Value = HistoryConfig> {
    (any::<bool>(), 0usize..5, 0usize..120).prop_map(|(enabled, max_turns, max_chars)| {
        HistoryConfig {
            enabled,
            max_turns,
            max_chars: Some(max_chars),
        }
    })
}

proptest! {
    #[test]
    fn history_respects_caps_recency_and_the_prompt(mut conv in conversation(), cfg in config()) {
        const PROMPT: &str = "THE-PROMPT";
        conv.push(ChatMessage::user(PROMPT));
        let input = TurnInput { messages: conv.clone(), ..Default::default() };
        let turn = build_turn(input, &cfg).unwrap();
        prop_assert_eq!(turn.prompt.as_str(), PROMPT);
        let kept = messages(turn.history);
        if !cfg.enabled {
            prop_assert!(kept.is_empty());
        }
        // Never the current prompt.
        prop_assert!(kept.iter().all(|m| m.content != PROMPT));
        // Within both caps.
        prop_assert!(kept.iter().map(message_chars).sum::<usize>() <= cfg.max_chars.unwrap());
        prop_assert!(kept.iter().filter(|m| m.role == Role::User).count() <= cfg.max_turns);
        // The most recent turns: a suffix of the uncapped history, and the turn before it
        // would not have fit.
        let earlier = &conv[..conv.len() - 1];
        let full = messages(prepare(earlier, &unlimited()).0);
        prop_assert!(full.ends_with(&kept));
        // Whatever the caps left out is counted.
        let expected = if cfg.enabled { full.len() - kept.len() } else { 0 };
        prop_assert_eq!(turn.history_dropped, expected);
        if cfg.enabled && kept.len() < full.len() {
            let turns = split_turns(full.into_iter());
            let mut n = 0;
            let mut taken = 0;
            while taken < kept.len() {
                n += 1;
                taken += turns[turns.len() - n].len();
            }
            let next = &turns[turns.len() - n - 1];
            let chars: usize = kept.iter().chain(next).map(message_chars).sum();
            let users = kept.iter().chain(next).filter(|m| m.role == Role::User).count();
            prop_assert!(chars > cfg.max_chars.unwrap() || users > cfg.max_turns);
        }
        // Every tool result follows a kept call that it answers.
        for (i, m) in kept.iter().enumerate().filter(|(_, m)| m.role == Role::Tool) {
            let answered = kept[..i].iter().any(|a| {
                a.role == Role::Assistant
                    && a.tool_calls.iter().any(|c| m.tool_call_id.as_ref().is_none_or(|id| *id == c.id))
            });
            prop_assert!(answered, "tool result {:?} has no call", m);
        }
        // No system messages, no empty assistant messages.
        prop_assert!(kept.iter().all(|m| m.role != Role::System));
        prop_assert!(kept.iter().all(|m| m.role != Role::Assistant
            || !m.content.trim().is_empty() || !m.tool_calls.is_empty()));
    }
}
