//! Internal-task detection: header, markers and shape, RAG turns, and user turns that
//! must never be taken for tasks.

use super::*;
use crate::domain::InternalTask;
use crate::routing::internal::{TurnKind, detect};
use crate::testkit::owui as t;

fn task_of(turn: &Turn) -> Option<InternalTask> {
    match detect(turn) {
        TurnKind::Internal { task, .. } => Some(task),
        _ => None,
    }
}

#[test]
fn every_header_value_wins() {
    for task in InternalTask::ALL {
        let turn = user_turn("普通の質問です");
        let mut turn = turn;
        turn.signals.task_header = Some(task.as_str().to_owned());
        assert_eq!(task_of(&turn), Some(task));
    }
    let mut turn = user_turn("hello");
    turn.signals.task_header = Some("weird".into());
    assert_eq!(
        detect(&turn),
        TurnKind::User {
            note: Some(r#"internal: unknown X-OpenWebUI-Task="weird" ignored"#.into())
        }
    );
}

#[test]
fn default_shaped_templates_are_recognised_without_the_header() {
    let chat = t::history(&[("USER", "今日の天気は？"), ("ASSISTANT", "晴れです")]);
    let cases = [
        (t::title(&chat), Some(1000), InternalTask::TitleGeneration),
        (t::tags(&chat), None, InternalTask::TagsGeneration),
        (t::follow_ups(&chat), None, InternalTask::FollowUpGeneration),
        (t::queries(&chat), None, InternalTask::QueryGeneration),
        (
            t::image_prompt(&chat),
            None,
            InternalTask::ImagePromptGeneration,
        ),
        (
            t::autocomplete("General", "The weather today"),
            None,
            InternalTask::AutocompleteGeneration,
        ),
        (t::compaction(&chat), None, InternalTask::ContextCompaction),
        (t::emoji("やった！"), Some(4), InternalTask::EmojiGeneration),
        (
            t::moa("Rustとは"),
            None,
            InternalTask::MoaResponseGeneration,
        ),
    ];
    for (prompt, max_tokens, expected) in cases {
        let turn = task_turn(&prompt, None, max_tokens);
        assert_eq!(task_of(&turn), Some(expected), "{prompt}");
    }
}

#[test]
fn system_markers_find_legacy_tools_and_memory_review() {
    let turn = request(
        vec![
            ChatMessage::system(t::TOOLS_SYSTEM),
            ChatMessage::user("Query: 今日の天気"),
        ],
        false,
        None,
        None,
        "auto",
    );
    assert_eq!(task_of(&turn), Some(InternalTask::FunctionCalling));
    let turn = request(
        vec![
            ChatMessage::system(t::MEMORY_SYSTEM),
            ChatMessage::user("Recent turns: ..."),
        ],
        false,
        None,
        None,
        "auto",
    );
    assert_eq!(task_of(&turn), Some(InternalTask::MemoryReview));
}

#[test]
fn admin_rewritten_templates_still_match() {
    // No "### Task:", a different wording, but Open WebUI still needs the JSON key back.
    let custom = "チャット履歴に合う短いタイトルを日本語で付けてください。\n\
                  必ず JSON で返すこと: {\"title\": \"...\"}\n\nUSER: 犬の散歩の頻度\nASSISTANT: 1日2回が目安です";
    assert_eq!(
        task_of(&task_turn(custom, None, Some(1000))),
        Some(InternalTask::TitleGeneration)
    );
    let custom_tags = "### Task:\nClassify this chat.\nReturn {'tags': [...]}.\n<chat_history>\nUSER: hi\n</chat_history>";
    assert_eq!(
        task_of(&task_turn(custom_tags, None, None)),
        Some(InternalTask::TagsGeneration)
    );
}

#[test]
fn keys_inside_the_embedded_chat_do_not_decide_the_kind() {
    let chat = t::history(&[("USER", r#"Return {"queries": ["x"]} for my parser test"#)]);
    let turn = task_turn(&t::title(&chat), None, Some(1000));
    assert_eq!(task_of(&turn), Some(InternalTask::TitleGeneration));
}

#[test]
fn rag_turns_are_user_turns_with_the_question_extracted() {
    let turn = user_turn(&t::rag("最新リリースで何が直った？"));
    match detect(&turn) {
        TurnKind::Rag { question, .. } => assert_eq!(question, "最新リリースで何が直った？"),
        other => panic!("{other:?}"),
    }
    // Even non-streamed (an API client) it stays a user turn.
    assert!(matches!(
        detect(&task_turn(&t::rag("q"), None, None)),
        TurnKind::Rag { .. }
    ));
}

#[test]
fn user_turns_that_mention_task_words_stay_user_turns() {
    for p in [
        "### Task: write a title for my blog post about Rust",
        r#"How do I parse {"title": "x"} in Python?"#,
        "Your task is to help me pick a laptop",
        "Generate tags for my photos, in JSON",
        "USER: hi\nASSISTANT: hello\nこれはログです。titleは？",
    ] {
        assert_eq!(task_of(&user_turn(p)), None, "{p}");
    }
    // A pasted template in the UI is streamed: still a user turn.
    let chat = t::history(&[("USER", "hi")]);
    assert_eq!(task_of(&user_turn(&t::title(&chat))), None);
}
