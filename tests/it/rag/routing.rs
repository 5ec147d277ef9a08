//! `[routing.rag]` through the running server: an `auto` chat whose prompt has a rule's
//! keyword is answered from that collection, with its citation, and the preview says
//! which rule fired; a prompt without one is an ordinary chat.

use coordinator::routing::{RagRoutingConfig, RagRuleConfig};
use serde_json::{Value, json};

use super::{app_with_notes_and, ask, messages};
use crate::helpers::MODEL;

#[tokio::test]
async fn a_rule_answers_an_auto_prompt_from_its_collection() {
    let app = app_with_notes_and(|c| {
        c.routing.rag = RagRoutingConfig {
            rules: vec![RagRuleConfig {
                collection: Some("notes".into()),
                keywords: vec!["my notes".into(), "メモ".into()],
            }],
            negative: vec!["implement*".into()],
        };
    })
    .await;
    let prompt = "what did my notes say about the NAS backup?";
    let preview: Value = app
        .http
        .get(app.url("/route/preview"))
        .query(&[("prompt", prompt)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(preview["queue"], "tasks:rag", "{preview}");
    assert_eq!(preview["model"], "rag:notes");
    assert_eq!(preview["named"], false);
    assert_eq!(
        preview["reasons"][0], r#"rag: rule 1 pos="my notes" -> rag:notes"#,
        "{preview}"
    );

    let (text, backend) = ask(&app, "auto", prompt).await;
    assert_eq!(backend["model"], MODEL);
    let user = messages(&backend).last().unwrap().1.clone();
    assert!(
        user.contains("Source: notes/backup.md › Backup › NAS › Schedule"),
        "{user}"
    );
    assert!(
        text.contains("Sources:\n- [1] notes/backup.md › Backup › NAS › Schedule"),
        "{text}"
    );

    // A suppressed rule, and a prompt with no keyword: ordinary chats.
    for prompt in [
        "implement search in my notes app",
        "Write a haiku about autumn",
    ] {
        let res = app
            .post(
                "/v1/chat/completions",
                json!({"model": "auto", "messages": [{"role": "user", "content": prompt}]}),
            )
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(
            res.headers()["x-coordinator-queue"],
            format!("tasks:llm:{MODEL}").as_str(),
            "{prompt}"
        );
    }
    app.stop().await;
}
