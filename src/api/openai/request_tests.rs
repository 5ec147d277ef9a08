//! Tests for the OpenAI request body and its conversion.

use super::*;
use crate::api::openai::parse_body;
use crate::config::HistoryConfig;
use crate::turn::build_turn;

fn parse(json: &str) -> Result<ParsedChat, BodyError> {
    parse_body::<ChatCompletionRequest>(json.as_bytes())?.into_turn_input(ClientContext::default())
}

#[test]
fn open_webui_body_converts() {
    let body = r#"{
        "model": "auto",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8=", "detail": "auto"}}
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "name": "look", "content": "a cat"},
            {"role": "user", "content": "thanks"}
        ],
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0.5, "top_p": 0.9, "max_tokens": 100, "max_completion_tokens": 50,
        "stop": "END", "seed": 7,
        "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "user": {"id": "u-1", "name": "N"},
        "metadata": {"chat_id": "meta-chat", "other": 1},
        "unknown_field": [1, 2]
    }"#;
    let p = parse(body).unwrap();
    assert!(p.include_usage);
    let i = &p.input;
    assert_eq!(i.response, ResponseMode::Streamed);
    assert_eq!(i.model.as_deref(), Some("auto"));
    assert_eq!(i.messages.len(), 5);
    assert_eq!(i.messages[1].content, "what is this?");
    assert_eq!(i.messages[1].images, vec!["aGVsbG8=".to_owned()]);
    assert_eq!(i.messages[2].tool_calls[0].arguments, r#"{"x":1}"#);
    assert_eq!(i.messages[3].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(i.messages[3].name.as_deref(), Some("look"));
    assert_eq!(i.params.max_tokens, Some(50));
    assert_eq!(i.params.stop, vec!["END".to_owned()]);
    assert_eq!(i.params.seed, Some(7));
    assert_eq!(i.params.temperature, Some(0.5));
    assert_eq!(i.tools.len(), 1);
    assert_eq!(i.body_chat_id.as_deref(), Some("meta-chat"));
    assert_eq!(i.client.client_identity.as_deref(), Some("u-1"));
    assert!(i.remember);
    let turn = build_turn(p.input, &HistoryConfig::default()).unwrap();
    assert_eq!(turn.prompt, "thanks");
    assert_eq!(turn.thread_id.as_str(), "meta-chat");
}

#[test]
fn defaults_and_variants() {
    let p = parse(
        r#"{"messages":[{"role":"developer","content":"d"},{"role":"user","content":"hi"}],
            "stop":["a","b"],"chat_id":"top","stream_options":{"include_usage":true},
            "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","user":"me"}"#,
    )
    .unwrap();
    assert_eq!(p.input.response, ResponseMode::Whole);
    assert!(!p.include_usage, "usage chunk only for streams");
    assert_eq!(p.input.messages[0].role, Role::System);
    assert_eq!(p.input.params.stop, vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(p.input.body_chat_id.as_deref(), Some("top"));
    assert!(p.input.tools.is_empty(), "tool_choice none drops tools");
    assert_eq!(p.input.client.client_identity.as_deref(), Some("me"));
    assert_eq!(p.input.model, None);
}

#[test]
fn bad_input_names_the_field() {
    let cases = [
        (
            r#"{"messages":[{"role":"robot","content":"x"}]}"#,
            "messages[0].role",
        ),
        (
            r#"{"messages":[{"role":"user","content":42}]}"#,
            "messages[0].content",
        ),
        (
            r#"{"messages":[{"role":"user","content":[{"type":"text"}]}]}"#,
            "messages[0].content[0].text",
        ),
        (
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}"#,
            "messages[0].content[0].image_url.url",
        ),
        (
            r#"{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}"#,
            "messages[0].content[0].type",
        ),
        (r#"{"messages":[],"temperature":"hot"}"#, "temperature"),
        (r#"{"messages":[],"stop":[1]}"#, "stop[0]"),
        (
            r#"{"messages":[],"tools":[{"type":"custom"}]}"#,
            "tools[0].type",
        ),
        (r#"{"model":"m"}"#, "messages"),
        // Well-formed JSON of the wrong shape, which serde_json calls a syntax error.
        (
            r#"{"messages":[{"role":[],"content":"x"}]}"#,
            "messages[0].role",
        ),
        (r#"{"messages":[],"metadata":[null,null]}"#, "metadata"),
        (r#"{"messages":[}"#, "body"),
    ];
    for (body, path) in cases {
        let e = parse(body).unwrap_err();
        assert_eq!(e.path, path, "{body}: {e}");
    }
}

#[test]
fn tool_choice_is_read_against_the_tools() {
    let body = |tools: &str, choice: &str| {
        format!(
            r#"{{"messages":[{{"role":"user","content":"hi"}}],"tools":{tools},"tool_choice":{choice}}}"#
        )
    };
    let tools = r#"[{"type":"function","function":{"name":"look"}},{"type":"function","function":{"name":"find"}}]"#;
    let choice =
        |tools: &str, choice: &str| parse(&body(tools, choice)).map(|p| p.input.params.tool_choice);
    assert_eq!(choice(tools, r#""auto""#).unwrap(), Some(ToolChoice::Auto));
    assert_eq!(
        choice(tools, r#""required""#).unwrap(),
        Some(ToolChoice::Required)
    );
    assert_eq!(
        choice(tools, r#"{"type":"function","function":{"name":"find"}}"#).unwrap(),
        Some(ToolChoice::Function {
            name: "find".into()
        })
    );
    assert_eq!(choice(tools, "null").unwrap(), None);
    assert_eq!(
        choice("[]", r#""auto""#).unwrap(),
        None,
        "auto without tools says nothing"
    );
    for (tools, bad) in [
        (tools, r#""always""#),
        (tools, "true"),
        (tools, r#"{"type":"function"}"#),
        (tools, r#"{"type":"function","function":{"name":"fly"}}"#),
        (tools, r#"{"type":"allowed_tools"}"#),
        ("[]", r#""required""#),
        ("[]", r#"{"type":"function","function":{"name":"look"}}"#),
    ] {
        let e = parse(&body(tools, bad)).unwrap_err();
        assert_eq!(e.path, "tool_choice", "{bad}: {e}");
    }
}

#[test]
fn tool_call_ids_and_arguments_are_filled_in() {
    let p = parse(
        r#"{"messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[
            {"function":{"name":"f","arguments":{"a":1}}},{"id":"","function":{"name":"g"}}]}]}"#,
    )
    .unwrap();
    let calls = &p.input.messages[1].tool_calls;
    assert_eq!(calls[0].id, "call_1_0");
    assert_eq!(calls[0].arguments, r#"{"a":1}"#);
    assert_eq!(calls[1].id, "call_1_1");
    assert_eq!(calls[1].arguments, "{}");
}

#[test]
fn response_format_asks_for_json_or_a_schema() {
    let body = |format: &str| {
        format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"response_format":{format}}}"#
        )
    };
    let format = |f: &str| parse(&body(f)).map(|p| p.input.params.format);
    assert_eq!(format(r#"{"type":"text"}"#).unwrap(), None);
    assert_eq!(
        format(r#"{"type":"json_object"}"#).unwrap(),
        Some(AnswerFormat::Json)
    );
    assert_eq!(
        format(r#"{"type":"json_schema","json_schema":{"name":"haiku","strict":true,"schema":{"type":"object"}}}"#)
            .unwrap(),
        Some(AnswerFormat::JsonSchema {
            name: Some("haiku".into()),
            schema: serde_json::json!({ "type": "object" }),
            strict: Some(true),
        })
    );
    for (bad, field) in [
        (r#"{"type":"yaml"}"#, "response_format.type"),
        (r#"{"type":"json_schema"}"#, "response_format.json_schema"),
        (
            r#"{"type":"json_schema","json_schema":{"name":"x"}}"#,
            "response_format.json_schema.schema",
        ),
    ] {
        let e = format(bad).unwrap_err();
        assert!(e.to_string().contains(field), "{bad}: {e}");
    }
}

#[test]
fn reasoning_effort_is_a_thinking_level() {
    let body = |effort: &str| {
        format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"reasoning_effort":"{effort}"}}"#
        )
    };
    assert_eq!(
        parse(&body("low")).unwrap().input.params.think,
        Some(crate::chat::Think::Level("low".into()))
    );
    let e = parse(&body("extreme")).unwrap_err();
    assert!(e.to_string().contains("reasoning_effort"), "{e}");
}
