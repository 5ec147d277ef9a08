//! Pinned wire bytes for the Anthropic encoders: a representative stream (thinking, text,
//! a tool use, usage), the whole message, the keep-alive and error events and the error body.

use super::*;
use crate::api::openai::snapshot_tests::representative_stream;
use crate::chat::Chunk;
use crate::domain::TaskId;
use crate::turn::Answer;

fn meta() -> MessageMeta {
    let task = TaskId::parse("0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d").unwrap();
    MessageMeta::new(task, "qwen2.5:7b")
}

fn encode_stream() -> String {
    let mut enc = MessagesSseEncoder::new(meta());
    let mut out = Vec::new();
    for c in representative_stream() {
        enc.push(&c, &mut out);
    }
    assert!(enc.is_finished());
    // Chunks after the end are ignored.
    enc.push(&Chunk::Content { text: "x".into() }, &mut out);
    String::from_utf8(out).unwrap()
}

fn encode_whole() -> String {
    let mut out = Vec::new();
    encode_message(
        &mut out,
        &meta(),
        &Answer::from_chunks(&representative_stream()),
    );
    String::from_utf8(out).unwrap()
}

/// A keep-alive before the first token, then a failure.
fn encode_wait_then_error() -> String {
    let mut enc = MessagesSseEncoder::new(meta());
    let mut out = Vec::new();
    enc.push_waiting(&mut out);
    enc.push_waiting(&mut out);
    enc.push(&Chunk::Content { text: "Hi".into() }, &mut out);
    let error = crate::api::ApiError::Upstream {
        message: "moon stopped".into(),
        task_id: None,
    };
    enc.push_error(&error.anthropic_body(), &mut out);
    assert!(enc.is_finished());
    enc.push_waiting(&mut out);
    String::from_utf8(out).unwrap()
}

/// Thinking, text, a tool use, then the end with the usage.
const STREAM_BODY: &str = concat!(
    "event: message_start\n",
    r#"data: {"message":{"content":[],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","model":"qwen2.5:7b","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":0,"output_tokens":0}},"type":"message_start"}"#,
    "\n\n",
    "event: ping\n",
    r#"data: {"type":"ping"}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"delta":{"thinking":"Think.","type":"thinking_delta"},"index":0,"type":"content_block_delta"}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"index":0,"type":"content_block_stop"}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"delta":{"text":"Hi","type":"text_delta"},"index":1,"type":"content_block_delta"}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"delta":{"text":" \"柏市\"\n","type":"text_delta"},"index":1,"type":"content_block_delta"}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"index":1,"type":"content_block_stop"}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"content_block":{"id":"call_1","input":{},"name":"get_weather","type":"tool_use"},"index":2,"type":"content_block_start"}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"delta":{"partial_json":"{\"city\":\"Kashiwa\"}","type":"input_json_delta"},"index":2,"type":"content_block_delta"}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"index":2,"type":"content_block_stop"}"#,
    "\n\n",
    "event: message_delta\n",
    r#"data: {"delta":{"stop_reason":"tool_use","stop_sequence":null},"type":"message_delta","usage":{"input_tokens":12,"output_tokens":7}}"#,
    "\n\n",
    "event: message_stop\n",
    r#"data: {"type":"message_stop"}"#,
    "\n\n",
);
/// The same answer, whole.
const WHOLE_BODY: &str = r#"{"content":[{"signature":"","thinking":"Think.","type":"thinking"},{"text":"Hi \"柏市\"\n","type":"text"},{"id":"call_1","input":{"city":"Kashiwa"},"name":"get_weather","type":"tool_use"}],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","model":"qwen2.5:7b","role":"assistant","stop_reason":"tool_use","stop_sequence":null,"type":"message","usage":{"input_tokens":12,"output_tokens":7}}"#;
/// Two keep-alives (the first with the opening), a token, a failure; nothing after it.
const WAIT_THEN_ERROR: &str = concat!(
    "event: message_start\n",
    r#"data: {"message":{"content":[],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","model":"qwen2.5:7b","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":0,"output_tokens":0}},"type":"message_start"}"#,
    "\n\n",
    "event: ping\n",
    r#"data: {"type":"ping"}"#,
    "\n\n",
    "event: ping\n",
    r#"data: {"type":"ping"}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"delta":{"text":"Hi","type":"text_delta"},"index":0,"type":"content_block_delta"}"#,
    "\n\n",
    "event: error\n",
    r#"data: {"error":{"message":"moon stopped","type":"api_error"},"type":"error"}"#,
    "\n\n",
);

#[test]
fn stream_bytes_are_pinned() {
    assert_eq!(encode_stream(), STREAM_BODY);
}

#[test]
fn whole_message_bytes_are_pinned() {
    assert_eq!(encode_whole(), WHOLE_BODY);
}

#[test]
fn keep_alives_are_pings_and_a_failure_ends_the_stream() {
    assert_eq!(encode_wait_then_error(), WAIT_THEN_ERROR);
}

#[test]
fn errors_take_anthropics_shape_and_types() {
    let body = |e: crate::api::ApiError| e.anthropic_body();
    assert_eq!(
        body(crate::api::ApiError::bad_request(
            "max_tokens: missing field"
        )),
        serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: missing field"}})
    );
    assert_eq!(
        body(crate::api::ApiError::Unauthorized)["error"]["type"],
        "authentication_error"
    );
    assert_eq!(
        body(crate::api::ApiError::NotFound("x".into()))["error"]["type"],
        "not_found_error"
    );
    assert_eq!(
        body(crate::api::ApiError::Internal("secret".into())),
        serde_json::json!({"type": "error", "error": {"type": "api_error", "message": "internal error"}})
    );
}
