//! Unit tests for turn extraction, including the seed's "この市" incident.

use super::*;
use crate::chat::ToolCall;
use crate::config::RoutingInfo;

const Q1: &str = "今日の千葉県柏市の天気を教えて";
const A1: &str = "柏市は晴れ時々曇、最高31℃の予報です。";
const Q2: &str = "この市の特産物をおしえて";

fn input(messages: Vec<ChatMessage>) -> TurnInput {
    TurnInput {
        messages,
        client: ClientContext {
            client_identity: Some("key-1".into()),
            ..ClientContext::default()
        },
        remember: true,
        ..Default::default()
    }
}

fn web_route() -> RouteInfo {
    RouteInfo {
        domain: "general".into(),
        model: "web_search".into(),
        worker: "web-worker".into(),
        queue: "tasks:web".into(),
        wait: String::new(),
    }
}

#[test]
fn seed_follow_up_sees_the_cleaned_first_exchange() {
    let cfg = HistoryConfig::default();
    let first = build_turn(input(vec![ChatMessage::user(Q1)]), &cfg).unwrap();
    let decorated = decoration::decorate(A1, &web_route(), RoutingInfo::HeaderFooter);
    assert!(decorated.contains("📡 ルーティング情報") && decorated.contains("*domain: general"));
    let second = build_turn(
        input(vec![
            ChatMessage::user(Q1),
            ChatMessage::assistant(decorated),
            ChatMessage::user(Q2),
        ]),
        &cfg,
    )
    .unwrap();
    assert_eq!(second.prompt, Q2);
    assert_eq!(
        second.history,
        History::Messages(vec![ChatMessage::user(Q1), ChatMessage::assistant(A1)])
    );
    assert_eq!(second.thread_id, first.thread_id);
    assert!(second.thread_id.as_str().starts_with("h-"));
    assert!(second.continuation.is_empty());
}

#[test]
fn seed_follow_up_with_the_legacy_pipe_answer() {
    let legacy = format!(
        "📡 ルーティング情報\n- ドメイン: general\n\n⏳ 処理中...\n{A1}\n\n---\n*domain: general / model: web_search / worker: web-worker*"
    );
    let t = build_turn(
        input(vec![
            ChatMessage::user(Q1),
            ChatMessage::assistant(legacy),
            ChatMessage::user(Q2),
        ]),
        &HistoryConfig::default(),
    )
    .unwrap();
    assert_eq!(
        t.history,
        History::Messages(vec![ChatMessage::user(Q1), ChatMessage::assistant(A1)])
    );
}

#[test]
fn thread_id_prefers_header_then_body_then_hash() {
    let cfg = HistoryConfig::default();
    let mut i = input(vec![ChatMessage::user(Q1)]);
    i.body_chat_id = Some("body-id".into());
    assert_eq!(
        build_turn(i.clone(), &cfg).unwrap().thread_id.as_str(),
        "body-id"
    );
    i.client.chat_id_header = Some("header-id".into());
    assert_eq!(
        build_turn(i.clone(), &cfg).unwrap().thread_id.as_str(),
        "header-id"
    );
    i.client.chat_id_header = Some("bad\u{7}".into());
    assert!(matches!(build_turn(i, &cfg), Err(TurnError::Thread { .. })));
    // Another client with the same first message is another thread.
    let mut other = input(vec![ChatMessage::user(Q1)]);
    other.client.client_identity = Some("key-2".into());
    assert_ne!(
        build_turn(other, &cfg).unwrap().thread_id,
        build_turn(input(vec![ChatMessage::user(Q1)]), &cfg)
            .unwrap()
            .thread_id
    );
}

#[test]
fn client_context_fills_the_input() {
    let i = TurnInput {
        client: ClientContext {
            chat_id_header: Some("c1".into()),
            task_header: Some("title_generation".into()),
            client_identity: None,
            remember: true,
            person: crate::domain::Person::parse("alice").unwrap(),
            priority: Some(crate::domain::Priority::Batch),
        },
        ..input(vec![ChatMessage::user(Q1)])
    };
    let t = build_turn(i, &HistoryConfig::default()).unwrap();
    assert_eq!(t.thread_id.as_str(), "c1");
    assert_eq!(t.person.as_str(), "alice", "the turn is the caller's");
    assert_eq!(t.priority, Some(crate::domain::Priority::Batch));
    assert_eq!(t.signals.task_header.as_deref(), Some("title_generation"));
}

#[test]
fn disabled_history_is_none() {
    let cfg = HistoryConfig {
        enabled: false,
        ..Default::default()
    };
    let t = build_turn(
        input(vec![
            ChatMessage::user(Q1),
            ChatMessage::assistant(A1),
            ChatMessage::user(Q2),
        ]),
        &cfg,
    )
    .unwrap();
    assert_eq!(t.history, History::None);
    assert_eq!(t.prompt, Q2);
}

#[test]
fn tool_exchange_after_the_prompt_is_the_continuation() {
    let mut call = ChatMessage::assistant("");
    call.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "get_weather".into(),
        arguments: r#"{"city":"Kashiwa"}"#.into(),
    }];
    let mut result = ChatMessage::new(Role::Tool, "晴れ");
    result.tool_call_id = Some("c1".into());
    let t = build_turn(
        input(vec![ChatMessage::user(Q1), call.clone(), result.clone()]),
        &HistoryConfig::default(),
    )
    .unwrap();
    assert_eq!(t.prompt, Q1);
    assert_eq!(t.history, History::None);
    assert_eq!(t.continuation, vec![call, result]);
}

#[test]
fn prompt_images_are_kept_and_errors_are_named() {
    let mut m = ChatMessage::user("");
    m.images = vec!["aGk=".into()];
    let t = build_turn(input(vec![m]), &HistoryConfig::default()).unwrap();
    assert_eq!(t.images, vec!["aGk=".to_owned()]);
    assert_eq!(
        build_turn(
            input(vec![ChatMessage::assistant("x")]),
            &HistoryConfig::default()
        ),
        Err(TurnError::NoUserMessage)
    );
    assert_eq!(
        build_turn(
            input(vec![ChatMessage::user("  ")]),
            &HistoryConfig::default()
        ),
        Err(TurnError::EmptyPrompt)
    );
}
