//! Pinned wire bytes for the OpenAI encoders: a representative stream (reasoning, text,
//! a tool call, usage), the non-stream body, the error event and the model list.

use super::*;
use crate::chat::{Chunk, FinishReason, ToolCall, Usage};
use crate::domain::TaskId;
use crate::turn::Answer;

pub(crate) fn representative_stream() -> Vec<Chunk> {
    vec![
        Chunk::Reasoning {
            text: "Think.".into(),
        },
        Chunk::Content { text: "Hi".into() },
        Chunk::Content {
            text: String::new(),
        },
        Chunk::Content {
            text: " \"柏市\"\n".into(),
        },
        Chunk::ToolCalls {
            calls: vec![ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Kashiwa"}"#.into(),
            }],
        },
        Chunk::Done {
            finish_reason: FinishReason::ToolCalls,
            usage: Usage {
                prompt_tokens: 12,
                completion_tokens: 7,
                backend_total_ms: Some(1500),
                backend_timings: None,
            },
        },
    ]
}

fn meta() -> CompletionMeta {
    let task = TaskId::parse("0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d").unwrap();
    CompletionMeta::new(task, 1_700_000_000, "qwen2.5:7b")
}

fn encode_stream(include_usage: bool) -> String {
    let mut enc = SseEncoder::new(meta(), include_usage);
    let mut out = Vec::new();
    for c in representative_stream() {
        enc.push(&c, &mut out);
    }
    assert!(enc.is_finished());
    // Chunks after the end are ignored.
    enc.push(&Chunk::Content { text: "x".into() }, &mut out);
    String::from_utf8(out).unwrap()
}

macro_rules! frame {
    ($choices:literal) => {
        concat!(
            r#"data: {"id":"chatcmpl-0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","object":"chat.completion.chunk","created":1700000000,"model":"qwen2.5:7b","choices":"#,
            $choices,
            "}\n\n"
        )
    };
}

const STREAM_BODY: &str = concat!(
    frame!(
        r#"[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]"#
    ),
    frame!(
        r#"[{"index":0,"delta":{"reasoning_content":"Think."},"logprobs":null,"finish_reason":null}]"#
    ),
    frame!(r#"[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]"#),
    frame!(
        r#"[{"index":0,"delta":{"content":" \"柏市\"\n"},"logprobs":null,"finish_reason":null}]"#
    ),
    frame!(
        r#"[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Kashiwa\"}"}}]},"logprobs":null,"finish_reason":null}]"#
    ),
    frame!(r#"[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]"#),
);

#[test]
fn sse_stream_bytes_are_pinned() {
    let usage =
        frame!(r#"[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}"#);
    assert_eq!(
        encode_stream(true),
        format!("{STREAM_BODY}{usage}data: [DONE]\n\n")
    );
    assert_eq!(
        encode_stream(false),
        format!("{STREAM_BODY}data: [DONE]\n\n")
    );
}

#[test]
fn sse_tool_call_indexes_continue_across_chunks() {
    let mut enc = SseEncoder::new(meta(), false);
    let mut out = Vec::new();
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "f".into(),
        arguments: "{}".into(),
    };
    enc.push(
        &Chunk::ToolCalls {
            calls: vec![call("a"), call("b")],
        },
        &mut out,
    );
    enc.push(
        &Chunk::ToolCalls {
            calls: vec![call("c")],
        },
        &mut out,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(r#"{"index":0,"id":"a""#));
    assert!(text.contains(r#"{"index":1,"id":"b""#));
    assert!(text.contains(r#"{"index":2,"id":"c""#));
    assert!(!enc.is_finished());
}

#[test]
fn sse_error_event_ends_the_stream() {
    let mut enc = SseEncoder::new(meta(), true);
    let mut out = Vec::new();
    enc.push(&Chunk::Content { text: "Hi".into() }, &mut out);
    out.clear();
    let err = ErrorBody::new(
        "backend moon stopped answering",
        "server_error",
        Some("backend_failed"),
    );
    enc.push_error(&err, &mut out);
    enc.push_error(&err, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "data: {\"error\":{\"message\":\"backend moon stopped answering\",\"type\":\"server_error\",\"code\":\"backend_failed\"}}\n\ndata: [DONE]\n\n"
    );
    assert!(enc.is_finished());
}

#[test]
fn sse_keep_alive_comments_and_a_failure_before_the_first_token_are_pinned() {
    use crate::api::error::ApiError;
    use crate::api::wait::Waiting;
    use crate::lang::Lang;

    let mut enc = SseEncoder::new(meta(), false);
    let mut out = Vec::new();
    for waiting in [
        Waiting::Queued {
            position: 2,
            eta_s: Some(14),
        },
        Waiting::Queued {
            position: 1,
            eta_s: None,
        },
        Waiting::NotQueued,
    ] {
        enc.push_waiting(waiting, &mut out);
    }
    assert_eq!(
        String::from_utf8(std::mem::take(&mut out)).unwrap(),
        ": queued position=2 eta_s=14\n\n: queued position=1\n\n: waiting\n\n"
    );
    let task = TaskId::parse("0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d").unwrap();
    let busy = ApiError::Busy {
        task_id: task,
        waited_s: 60,
        lang: Lang::En,
    };
    enc.push_error(&busy.openai_body(), &mut out);
    enc.push_waiting(Waiting::NotQueued, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        concat!(
            r#"data: {"error":{"code":"cluster_busy","message":"the cluster is busy: task 0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d has not started answering after 60 s; it is still queued and can be read at GET /tasks/0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","param":null,"task_id":"0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","type":"server_error"}}"#,
            "\n\ndata: [DONE]\n\n"
        ),
        "nothing after the end"
    );
}

#[test]
fn non_stream_body_is_pinned() {
    let mut out = Vec::new();
    encode_completion(
        &mut out,
        &meta(),
        &Answer::from_chunks(&representative_stream()),
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"id":"chatcmpl-0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","object":"chat.completion","created":1700000000,"model":"qwen2.5:7b","choices":[{"index":0,"message":{"role":"assistant","content":"Hi \"柏市\"\n","reasoning_content":"Think.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Kashiwa\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#
    );
    let mut out = Vec::new();
    let only_tools = Answer::from_chunks(&representative_stream()[4..]);
    encode_completion(&mut out, &meta(), &only_tools);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(r#""message":{"role":"assistant","content":null,"tool_calls":"#),
        "{text}"
    );
}

#[test]
fn models_and_error_bodies_are_pinned() {
    let list = ModelList::new(vec![ModelEntry::new("auto", 1_700_000_000, "coordinator")]);
    assert_eq!(
        serde_json::to_string(&list).unwrap(),
        r#"{"object":"list","data":[{"id":"auto","object":"model","created":1700000000,"owned_by":"coordinator"}]}"#
    );
    let mut out = Vec::new();
    let bad = BodyError::new("messages[0].role", "unknown variant `robot`");
    encode_error(&mut out, &ErrorBody::invalid_request(&bad));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"error":{"message":"messages[0].role: unknown variant `robot`","type":"invalid_request_error","code":null}}"#
    );
}
