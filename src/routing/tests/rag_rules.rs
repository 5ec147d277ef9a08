//! `[routing.rag]` rules through `Decider::decide`: an `auto` prompt with a rule's keyword
//! goes to its collection's RAG lane, the reasons name the rule, and everything else
//! (named models, negatives, pasted code, structured output, tools, Open WebUI's
//! background tasks) is left alone.

use super::*;
use crate::routing::{RagRoutingConfig, RagRuleConfig};
use crate::testkit::owui as t;

fn rule(collection: Option<&str>, keywords: &[&str]) -> RagRuleConfig {
    RagRuleConfig {
        collection: collection.map(str::to_owned),
        keywords: keywords.iter().map(|k| (*k).to_owned()).collect(),
    }
}

fn with_rules() -> Decider {
    let mut c = config();
    c.rag = RagRoutingConfig {
        rules: vec![
            rule(Some("notes"), &["my notes", "メモ", "NAS backup*"]),
            rule(Some("manuals"), &["manual*", "取扱説明書"]),
            rule(None, &["my documents"]),
        ],
        negative: vec!["implement*".into(), "実装".into()],
    };
    assert!(c.validate().is_empty(), "{:?}", c.validate());
    Decider::new(c, InternalTasksConfig::default())
}

/// (lane, model) of `prompt` as an `auto` chat turn, and the decision's reasons.
async fn routed(r: &Decider, turn: Turn) -> (String, String, Vec<String>) {
    let d = r.decide(&turn, &two_models()).await.unwrap();
    (d.lane().to_string(), d.model.to_string(), d.reasons)
}

#[tokio::test]
async fn a_rule_sends_an_auto_prompt_to_its_collection() {
    let r = with_rules();
    let d = r
        .decide(
            &user_turn("what did my notes say about the NAS backup?"),
            &two_models(),
        )
        .await
        .unwrap();
    assert_eq!(
        (d.lane().to_string().as_str(), d.model.as_str(), d.named),
        ("tasks:rag", "rag:notes", false)
    );
    assert_eq!(
        d.reasons,
        vec![
            r#"rag: rule 1 pos="my notes" -> rag:notes"#.to_owned(),
            "rag: answered from the documents (no web search, no memory)".to_owned(),
        ]
    );
    assert!(!d.web_search() && !d.may_recall());

    let cases = [
        ("メモに書いたルーターの設定は？", "rag:notes"),
        ("When does the NAS backups run?", "rag:notes"),
        ("Where is the dishwasher manual?", "rag:manuals"),
        ("食洗機の取扱説明書はどこ？", "rag:manuals"),
        ("search my documents for the lease", "rag"),
        // Rules are tried in config order, not by where the word stands.
        ("the manuals, as my notes list them", "rag:notes"),
    ];
    for (prompt, model) in cases {
        let (lane, got, reasons) = routed(&r, user_turn(prompt)).await;
        assert_eq!(
            (lane.as_str(), got.as_str()),
            ("tasks:rag", model),
            "{prompt}: {reasons:?}"
        );
    }
}

#[tokio::test]
async fn negatives_and_misses_leave_the_prompt_to_the_other_rules() {
    let r = with_rules();
    let (lane, _, reasons) = routed(
        &r,
        user_turn("implement a tagging feature for my notes app"),
    )
    .await;
    assert_eq!(lane, "tasks:llm:coder");
    assert!(
        reasons.contains(&r#"rag: rule 1 pos="my notes" suppressed by neg="implement""#.to_owned()),
        "{reasons:?}"
    );
    let (lane, _, reasons) = routed(&r, user_turn("今日の柏市の天気は？")).await;
    assert_eq!(lane, "tasks:web");
    assert_eq!(reasons[0], "rag: no rule matched");
    // Pasted code is not prose: a keyword inside it does not count.
    let pasted = "```python\nprint('my notes')\n```\nWhy does this print nothing?";
    let (lane, _, _) = routed(&r, user_turn(pasted)).await;
    assert_ne!(lane, "tasks:rag");
    // Without rules nothing is said about them at all.
    let d = decider()
        .decide(&user_turn("what did my notes say?"), &two_models())
        .await
        .unwrap();
    assert!(
        d.reasons.iter().all(|x| !x.starts_with("rag:")),
        "{:?}",
        d.reasons
    );
}

#[tokio::test]
async fn named_models_json_tools_and_background_tasks_are_never_sent() {
    let r = with_rules();
    let prompt = "what did my notes say about the NAS backup?";
    let named = request(vec![ChatMessage::user(prompt)], true, None, None, "chat");
    let (lane, _, _) = routed(&r, named).await;
    assert_eq!(lane, "tasks:llm:chat");

    let mut json = user_turn(prompt);
    json.params.format = Some(crate::chat::AnswerFormat::Json);
    let (lane, _, reasons) = routed(&r, json).await;
    assert_eq!(lane, "tasks:llm:chat");
    assert!(
        reasons.contains(
            &r#"rag: rule 1 pos="my notes" -> rag:notes skipped, the client asked for structured output"#
                .to_owned()
        ),
        "{reasons:?}"
    );

    let mut tools = user_turn(prompt);
    tools.tools = vec![crate::chat::ToolSpec {
        name: "get_current_timestamp".into(),
        description: None,
        parameters: serde_json::json!({}),
    }];
    let (lane, _, reasons) = routed(&r, tools).await;
    assert_ne!(lane, "tasks:rag");
    assert!(
        reasons
            .iter()
            .any(|x| x.ends_with("skipped, the client asked for tools")),
        "{reasons:?}"
    );

    let chat = t::history(&[("USER", prompt)]);
    let title = task_turn(&t::title(&chat), None, None);
    let d = r.decide(&title, &two_models()).await.unwrap();
    assert!(d.internal_task.is_some());
    assert_ne!(d.lane().to_string(), "tasks:rag");
}
