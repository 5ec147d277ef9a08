//! Tests for the Anthropic Messages request body and its conversion.

use super::*;
use crate::api::http::parse_body;
use crate::config::HistoryConfig;
use crate::turn::build_turn;

fn parse(json: &str) -> Result<TurnInput, BodyError> {
    parse_body::<MessagesRequest>(json.as_bytes())?.into_turn_input(ClientContext::default())
}

#[test]
fn a_claude_style_agent_turn_converts() {
    let body = r#"{
        "model": "qwen2.5:7b",
        "max_tokens": 300,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}},
                   {"type": "text", "text": "use tools"}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}}
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"x": 1}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a cat"}]}
            ]}
        ],
        "stop_sequences": ["END"],
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 5,
        "stream": true,
        "tools": [{"name": "look", "description": "looks", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "u-1"},
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }"#;
    let i = parse(body).unwrap();
    assert_eq!(i.response, ResponseMode::Streamed);
    assert_eq!(i.messages.len(), 4, "{:?}", i.messages);
    assert_eq!(i.messages[0].role, Role::System);
    assert_eq!(i.messages[0].content, "be brief\nuse tools");
    assert_eq!(i.messages[1].images, vec!["aGVsbG8=".to_owned()]);
    assert_eq!(i.messages[2].content, "let me look");
    assert_eq!(i.messages[2].tool_calls[0].id, "toolu_1");
    assert_eq!(i.messages[2].tool_calls[0].arguments, r#"{"x":1}"#);
    assert_eq!(i.messages[3].role, Role::Tool);
    assert_eq!(i.messages[3].content, "a cat");
    assert_eq!(i.messages[3].tool_call_id.as_deref(), Some("toolu_1"));
    assert_eq!(
        i.messages[3].name.as_deref(),
        Some("look"),
        "named after its call"
    );
    assert_eq!(i.params.max_tokens, Some(300));
    assert_eq!(i.params.stop, vec!["END".to_owned()]);
    assert_eq!(i.params.temperature, Some(0.2));
    assert_eq!(i.params.think, Some(Think::On(true)));
    assert_eq!(i.params.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(i.tools[0].parameters, serde_json::json!({"type": "object"}));
    assert_eq!(i.client.client_identity.as_deref(), Some("u-1"));
    let turn = build_turn(i, &HistoryConfig::default()).unwrap();
    assert_eq!(turn.prompt, "what is this?");
    assert_eq!(turn.continuation.len(), 2, "the tool use and its result");
}

#[test]
fn string_content_and_system_and_tool_choices() {
    let i = parse(
        r#"{"max_tokens": 10, "system": "sys", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "f"}}"#,
    )
    .unwrap();
    assert_eq!(i.messages[0].content, "sys");
    assert_eq!(i.messages[1].content, "hi");
    assert_eq!(i.response, ResponseMode::Whole);
    assert_eq!(
        i.params.tool_choice,
        Some(ToolChoice::Function { name: "f".into() })
    );
    let none = parse(
        r#"{"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "f"}], "tool_choice": {"type": "none"}}"#,
    )
    .unwrap();
    assert!(none.tools.is_empty());
    let any = parse(
        r#"{"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "f"}], "tool_choice": {"type": "any"}}"#,
    )
    .unwrap();
    assert_eq!(any.params.tool_choice, Some(ToolChoice::Required));
}

#[test]
fn bad_bodies_name_the_field() {
    let cases = [
        (
            r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
            "max_tokens",
        ),
        (
            r#"{"max_tokens": 1, "messages": [{"role": "robot", "content": "hi"}]}"#,
            "messages[0].role",
        ),
        (
            r#"{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "video"}]}]}"#,
            "messages[0].content[0].type",
        ),
        (
            r#"{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url"}}]}]}"#,
            "messages[0].content[0].source",
        ),
        (
            r#"{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b"}]}]}"#,
            "messages[0].content[0].type",
        ),
        (
            r#"{"max_tokens": 1, "system": 3, "messages": []}"#,
            "system",
        ),
        (
            r#"{"max_tokens": 1, "messages": [], "tools": [{"type": "web_search_20250305", "name": "w"}]}"#,
            "tools[0].type",
        ),
        (
            r#"{"max_tokens": 1, "messages": [], "tools": [{"name": "f"}], "tool_choice": {"type": "tool", "name": "g"}}"#,
            "tool_choice",
        ),
        (
            r#"{"max_tokens": 1, "messages": [], "thinking": {"type": "maybe"}}"#,
            "thinking.type",
        ),
    ];
    for (body, field) in cases {
        let e = parse(body).unwrap_err();
        assert_eq!(e.path, field, "{body}: {e}");
    }
}
