//! Rule answers: the JSON Open WebUI parses, in the chat's language, fast.

use serde_json::Value;

use super::*;
use crate::domain::InternalTask;
use crate::routing::rules_reply::{MAX_QUERY_CHARS, rules_reply};
use crate::testkit::owui as t;

fn answer(task: InternalTask, prompt: &str) -> Value {
    let text = rules_reply(task, &task_turn(prompt, None, None)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn titles_follow_the_first_user_message_and_its_language() {
    let ja = t::history(&[
        (
            "USER",
            "Ubuntuでpingコマンドが見つかりません。何をインストールすればいいですか？",
        ),
        ("ASSISTANT", "iputils-ping です"),
    ]);
    assert_eq!(
        answer(InternalTask::TitleGeneration, &t::title(&ja))["title"],
        "Ubuntuでpingコマンドが見つかりません"
    );
    let en = t::history(&[(
        "USER",
        "How do I bake sourdough bread at home without a dutch oven? Thanks",
    )]);
    assert_eq!(
        answer(InternalTask::TitleGeneration, &t::title(&en))["title"],
        "How do I bake sourdough bread at"
    );
    let long = t::history(&[("USER", &"とても長い質問文".repeat(20))]);
    let title = answer(InternalTask::TitleGeneration, &t::title(&long))["title"].clone();
    assert!(title.as_str().unwrap().chars().count() <= 25, "{title}");
    assert_eq!(
        answer(InternalTask::TitleGeneration, "### Task: nothing")["title"],
        "New Chat"
    );
}

#[test]
fn tags_are_few_and_in_the_chat_language() {
    let ja = t::history(&[("USER", "Pythonのエラーを直したい。明日の天気も気になる")]);
    let tags = answer(InternalTask::TagsGeneration, &t::tags(&ja));
    assert_eq!(tags["tags"], serde_json::json!(["プログラミング", "天気"]));
    let en = t::history(&[("USER", "hello")]);
    assert_eq!(
        answer(InternalTask::TagsGeneration, &t::tags(&en))["tags"],
        serde_json::json!(["General"])
    );
}

#[test]
fn queries_come_from_the_last_user_line_and_are_short() {
    let chat = t::history(&[
        ("USER", "柏市ってどこ？"),
        ("ASSISTANT", "千葉県です"),
        ("USER", "この市の明日の天気は？"),
    ]);
    assert_eq!(
        answer(InternalTask::QueryGeneration, &t::queries(&chat)),
        serde_json::json!({"queries": ["この市の明日の天気は？"]})
    );
    let huge = t::history(&[("USER", &"weather ".repeat(500))]);
    let q = answer(InternalTask::QueryGeneration, &t::queries(&huge));
    assert!(q["queries"][0].as_str().unwrap().chars().count() <= MAX_QUERY_CHARS);
    let none = answer(InternalTask::QueryGeneration, "### Task: queries");
    assert_eq!(none, serde_json::json!({"queries": []}));
}

#[test]
fn fixed_answers_for_the_other_tasks() {
    let chat = t::history(&[("USER", "夕焼けの海を描いて")]);
    assert_eq!(
        answer(InternalTask::FollowUpGeneration, &chat),
        serde_json::json!({"follow_ups": []})
    );
    assert_eq!(
        answer(InternalTask::AutocompleteGeneration, &chat),
        serde_json::json!({"text": ""})
    );
    assert_eq!(
        answer(InternalTask::FunctionCalling, "Query: x"),
        serde_json::json!({"tool_calls": []})
    );
    assert_eq!(
        answer(InternalTask::MemoryReview, "x"),
        serde_json::json!({"operations": []})
    );
    assert_eq!(
        answer(InternalTask::ImagePromptGeneration, &t::image_prompt(&chat)),
        serde_json::json!({"prompt": "夕焼けの海を描いて"})
    );
    let turn = task_turn(&t::emoji("ありがとう！"), None, Some(4));
    assert_eq!(
        rules_reply(InternalTask::EmojiGeneration, &turn).as_deref(),
        Some("😊")
    );
    for needs_model in [
        InternalTask::MoaResponseGeneration,
        InternalTask::ContextCompaction,
    ] {
        assert_eq!(rules_reply(needs_model, &turn), None);
    }
}

/// Every task on a 5,000-character template gets its rule answer, but the two that need
/// a model. How long they take is measured by `cargo bench --bench routing`
/// (`title_template_5k`), not here: a timed unit test fails on a loaded machine.
#[test]
fn every_rule_answer_comes_from_a_long_template() {
    let chat = t::history(&[
        ("USER", &"長い会話の本文です。".repeat(500)),
        ("ASSISTANT", "ok"),
    ]);
    let turn = task_turn(&t::title(&chat), None, Some(1000));
    for task in InternalTask::ALL {
        let needs_a_model = matches!(
            task,
            InternalTask::MoaResponseGeneration | InternalTask::ContextCompaction
        );
        assert_eq!(
            rules_reply(task, &turn).is_none(),
            needs_a_model,
            "{task:?}"
        );
    }
}
