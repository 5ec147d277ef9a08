//! Tests for the Responses request body and its conversion.

use super::*;
use crate::api::http::parse_body;
use crate::config::HistoryConfig;
use crate::turn::build_turn;

fn parse(json: &str) -> Result<TurnInput, BodyError> {
    parse_body::<ResponsesRequest>(json.as_bytes())?.into_turn_input(ClientContext::default())
}

#[test]
fn a_string_input_is_the_users_prompt() {
    let i = parse(
        r#"{"model": "m", "input": "hi", "instructions": "be brief", "max_output_tokens": 20}"#,
    )
    .unwrap();
    assert_eq!(i.messages.len(), 2);
    assert_eq!(i.messages[0], ChatMessage::system("be brief"));
    assert_eq!(i.messages[1], ChatMessage::user("hi"));
    assert_eq!(i.params.max_tokens, Some(20));
    assert_eq!(i.response, ResponseMode::Whole);
}

/// What Open WebUI's Responses connection sends: its chat as items (system as
/// `instructions`), parts typed `input_text` / `output_text` / `input_image`, the tool
/// calls and outputs of an earlier step, and chat-completions fields it keeps.
#[test]
fn open_webui_items_convert() {
    let body = r#"{
        "model": "auto",
        "stream": true,
        "seed": 7,
        "reasoning_effort": "low",
        "instructions": "sys",
        "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "what is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,aGVsbG8="}
            ]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "let me look"}]},
            {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{\"x\":1}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a cat"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"role": "user", "content": "thanks"}
        ],
        "tools": [{"type": "function", "name": "look", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "look"},
        "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}}
    }"#;
    let i = parse(body).unwrap();
    assert_eq!(i.response, ResponseMode::Streamed);
    assert_eq!(i.messages.len(), 5, "{:?}", i.messages);
    assert_eq!(i.messages[1].images, vec!["aGVsbG8=".to_owned()]);
    assert_eq!(i.messages[2].content, "let me look");
    assert_eq!(
        i.messages[2].tool_calls[0].name, "look",
        "the call joins the message"
    );
    assert_eq!(i.messages[3].role, Role::Tool);
    assert_eq!(i.messages[3].name.as_deref(), Some("look"));
    assert_eq!(i.messages[3].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(i.params.seed, Some(7));
    assert_eq!(i.params.think, Some(Think::Level("low".into())));
    assert_eq!(
        i.params.tool_choice,
        Some(ToolChoice::Function {
            name: "look".into()
        })
    );
    assert!(matches!(
        i.params.format,
        Some(AnswerFormat::JsonSchema { .. })
    ));
    let turn = build_turn(i, &HistoryConfig::default()).unwrap();
    assert_eq!(turn.prompt, "thanks");
}

#[test]
fn a_previous_response_comes_before_the_new_input_and_keeps_its_thread() {
    let mut req: ResponsesRequest = parse_body(
        br#"{"input": [{"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}"#,
    )
    .unwrap();
    let mut asked = ChatMessage::assistant("");
    asked.tool_calls.push(ToolCall {
        id: "c1".into(),
        name: "weather".into(),
        arguments: "{}".into(),
    });
    req.previous = Some(Previous {
        messages: vec![ChatMessage::user("weather?"), asked],
        thread_id: ThreadId::parse("th-1").unwrap(),
    });
    let i = req.into_turn_input(ClientContext::default()).unwrap();
    assert_eq!(i.body_chat_id.as_deref(), Some("th-1"));
    assert_eq!(i.messages[2].name.as_deref(), Some("weather"));
    let turn = build_turn(i, &HistoryConfig::default()).unwrap();
    assert_eq!(turn.prompt, "weather?");
    assert_eq!(turn.continuation.len(), 2);
    assert_eq!(turn.thread_id.as_str(), "th-1");
}

#[test]
fn bad_bodies_name_the_field() {
    let cases = [
        (r#"{"model": "m"}"#, "input"),
        (r#"{"input": 3}"#, "input"),
        (
            r#"{"input": [{"role": "robot", "content": "x"}]}"#,
            "input[0].role",
        ),
        (r#"{"input": [{"content": "x"}]}"#, "input[0].role"),
        (
            r#"{"input": [{"type": "item_reference", "id": "x"}]}"#,
            "input[0].type",
        ),
        (
            r#"{"input": [{"type": "function_call", "name": "f"}]}"#,
            "input[0].call_id",
        ),
        (
            r#"{"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}"#,
            "input[0].content[0].type",
        ),
        (
            r#"{"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]}"#,
            "input[0].content[0].image_url",
        ),
        (
            r#"{"input": "x", "tools": [{"type": "web_search_preview"}]}"#,
            "tools[0].type",
        ),
        (
            r#"{"input": "x", "tools": [{"type": "function"}]}"#,
            "tools[0].name",
        ),
        (
            r#"{"input": "x", "tool_choice": "sometimes"}"#,
            "tool_choice",
        ),
        (
            r#"{"input": "x", "text": {"format": {"type": "yaml"}}}"#,
            "text.format.type",
        ),
        (
            r#"{"input": "x", "reasoning": {"effort": "extreme"}}"#,
            "reasoning.effort",
        ),
        (
            r#"{"input": "x", "max_output_tokens": "many"}"#,
            "max_output_tokens",
        ),
    ];
    for (body, field) in cases {
        let e = parse(body).unwrap_err();
        assert_eq!(e.path, field, "{body}: {e}");
    }
}
