//! Pinned wire bytes for the Responses encoders: a representative stream (reasoning, text,
//! a function call, usage), the whole response, a failure and the id round trip.

use super::*;
use crate::api::openai::snapshot_tests::representative_stream;
use crate::chat::Chunk;
use crate::domain::TaskId;
use crate::turn::Answer;

fn task() -> TaskId {
    TaskId::parse("0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d").unwrap()
}

fn meta() -> ResponseMeta {
    ResponseMeta {
        task_id: task(),
        created_at: 1_700_000_000,
        model: "qwen2.5:7b".into(),
        echo: Echo::default(),
    }
}

fn encode_stream() -> String {
    let mut enc = ResponsesSseEncoder::new(meta());
    let mut out = Vec::new();
    for c in representative_stream() {
        enc.push(&c, &mut out);
    }
    assert!(enc.is_finished());
    // Chunks after the end are ignored.
    enc.push(&Chunk::Content { text: "x".into() }, &mut out);
    String::from_utf8(out).unwrap()
}

fn encode_whole(answer: &Answer, echo: Echo) -> String {
    let mut out = Vec::new();
    let meta = ResponseMeta { echo, ..meta() };
    encode_response(&mut out, &meta, answer);
    String::from_utf8(out).unwrap()
}

/// A keep-alive before the first token, a little text, then a failure.
fn encode_wait_then_failure() -> String {
    let mut enc = ResponsesSseEncoder::new(meta());
    let mut out = Vec::new();
    enc.push_waiting(
        crate::api::wait::Waiting::Queued {
            position: 2,
            eta_s: Some(14),
        },
        &mut out,
    );
    enc.push(&Chunk::Content { text: "Hi".into() }, &mut out);
    enc.push_failed("backend_error", "moon stopped", &mut out);
    assert!(enc.is_finished());
    enc.push(&Chunk::Content { text: "x".into() }, &mut out);
    String::from_utf8(out).unwrap()
}

fn echo() -> Echo {
    Echo {
        instructions: Some("be brief".into()),
        previous_response_id: Some("resp_0190f5b2-0000-7000-8000-000000000000".into()),
        store: false,
        temperature: Some(0.5),
        top_p: None,
        max_output_tokens: Some(64),
        tools: vec![serde_json::json!({"type": "function", "name": "get_weather"})],
        tool_choice: serde_json::json!("required"),
    }
}

fn cut_short() -> Answer {
    Answer::from_chunks(&[
        Chunk::Content {
            text: "Once upon".into(),
        },
        Chunk::Done {
            finish_reason: crate::chat::FinishReason::Length,
            usage: crate::chat::Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                backend_total_ms: None,
                backend_timings: None,
            },
        },
    ])
}

/// Reasoning, text, a function call, then `response.completed` with everything.
const STREAM_BODY: &str = concat!(
    "event: response.created\n",
    r#"data: {"response":{"created_at":1700000000,"error":null,"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"status":"in_progress","store":true,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":null,"user":null},"sequence_number":0,"type":"response.created"}"#,
    "\n\n",
    "event: response.in_progress\n",
    r#"data: {"response":{"created_at":1700000000,"error":null,"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"status":"in_progress","store":true,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":null,"user":null},"sequence_number":1,"type":"response.in_progress"}"#,
    "\n\n",
    "event: response.output_item.added\n",
    r#"data: {"item":{"content":[],"id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","status":"in_progress","summary":[],"type":"reasoning"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}"#,
    "\n\n",
    "event: response.content_part.added\n",
    r#"data: {"content_index":0,"item_id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","output_index":0,"part":{"text":"","type":"reasoning_text"},"sequence_number":3,"type":"response.content_part.added"}"#,
    "\n\n",
    "event: response.reasoning_text.delta\n",
    r#"data: {"content_index":0,"delta":"Think.","item_id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","output_index":0,"sequence_number":4,"type":"response.reasoning_text.delta"}"#,
    "\n\n",
    "event: response.reasoning_text.done\n",
    r#"data: {"content_index":0,"item_id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","output_index":0,"sequence_number":5,"text":"Think.","type":"response.reasoning_text.done"}"#,
    "\n\n",
    "event: response.content_part.done\n",
    r#"data: {"content_index":0,"item_id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","output_index":0,"part":{"text":"Think.","type":"reasoning_text"},"sequence_number":6,"type":"response.content_part.done"}"#,
    "\n\n",
    "event: response.output_item.done\n",
    r#"data: {"item":{"content":[{"text":"Think.","type":"reasoning_text"}],"id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","status":"completed","summary":[],"type":"reasoning"},"output_index":0,"sequence_number":7,"type":"response.output_item.done"}"#,
    "\n\n",
    "event: response.output_item.added\n",
    r#"data: {"item":{"content":[],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","role":"assistant","status":"in_progress","type":"message"},"output_index":1,"sequence_number":8,"type":"response.output_item.added"}"#,
    "\n\n",
    "event: response.content_part.added\n",
    r#"data: {"content_index":0,"item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","output_index":1,"part":{"annotations":[],"logprobs":[],"text":"","type":"output_text"},"sequence_number":9,"type":"response.content_part.added"}"#,
    "\n\n",
    "event: response.output_text.delta\n",
    r#"data: {"content_index":0,"delta":"Hi","item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","logprobs":[],"output_index":1,"sequence_number":10,"type":"response.output_text.delta"}"#,
    "\n\n",
    "event: response.output_text.delta\n",
    r#"data: {"content_index":0,"delta":" \"柏市\"\n","item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","logprobs":[],"output_index":1,"sequence_number":11,"type":"response.output_text.delta"}"#,
    "\n\n",
    "event: response.output_text.done\n",
    r#"data: {"content_index":0,"item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","logprobs":[],"output_index":1,"sequence_number":12,"text":"Hi \"柏市\"\n","type":"response.output_text.done"}"#,
    "\n\n",
    "event: response.content_part.done\n",
    r#"data: {"content_index":0,"item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","output_index":1,"part":{"annotations":[],"logprobs":[],"text":"Hi \"柏市\"\n","type":"output_text"},"sequence_number":13,"type":"response.content_part.done"}"#,
    "\n\n",
    "event: response.output_item.done\n",
    r#"data: {"item":{"content":[{"annotations":[],"logprobs":[],"text":"Hi \"柏市\"\n","type":"output_text"}],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","role":"assistant","status":"completed","type":"message"},"output_index":1,"sequence_number":14,"type":"response.output_item.done"}"#,
    "\n\n",
    "event: response.output_item.added\n",
    r#"data: {"item":{"arguments":"","call_id":"call_1","id":"fc_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_2","name":"get_weather","status":"in_progress","type":"function_call"},"output_index":2,"sequence_number":15,"type":"response.output_item.added"}"#,
    "\n\n",
    "event: response.function_call_arguments.delta\n",
    r#"data: {"delta":"{\"city\":\"Kashiwa\"}","item_id":"fc_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_2","output_index":2,"sequence_number":16,"type":"response.function_call_arguments.delta"}"#,
    "\n\n",
    "event: response.function_call_arguments.done\n",
    r#"data: {"arguments":"{\"city\":\"Kashiwa\"}","item_id":"fc_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_2","name":"get_weather","output_index":2,"sequence_number":17,"type":"response.function_call_arguments.done"}"#,
    "\n\n",
    "event: response.output_item.done\n",
    r#"data: {"item":{"arguments":"{\"city\":\"Kashiwa\"}","call_id":"call_1","id":"fc_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_2","name":"get_weather","status":"completed","type":"function_call"},"output_index":2,"sequence_number":18,"type":"response.output_item.done"}"#,
    "\n\n",
    "event: response.completed\n",
    r#"data: {"response":{"created_at":1700000000,"error":null,"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[{"content":[{"text":"Think.","type":"reasoning_text"}],"id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","status":"completed","summary":[],"type":"reasoning"},{"content":[{"annotations":[],"logprobs":[],"text":"Hi \"柏市\"\n","type":"output_text"}],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","role":"assistant","status":"completed","type":"message"},{"arguments":"{\"city\":\"Kashiwa\"}","call_id":"call_1","id":"fc_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_2","name":"get_weather","status":"completed","type":"function_call"}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"status":"completed","store":true,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":19},"user":null},"sequence_number":19,"type":"response.completed"}"#,
    "\n\n",
);
/// The same answer, whole.
const WHOLE_BODY: &str = r#"{"created_at":1700000000,"error":null,"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[{"content":[{"text":"Think.","type":"reasoning_text"}],"id":"rs_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","status":"completed","summary":[],"type":"reasoning"},{"content":[{"annotations":[],"logprobs":[],"text":"Hi \"柏市\"\n","type":"output_text"}],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_1","role":"assistant","status":"completed","type":"message"},{"arguments":"{\"city\":\"Kashiwa\"}","call_id":"call_1","id":"fc_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_2","name":"get_weather","status":"completed","type":"function_call"}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"status":"completed","store":true,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":19},"user":null}"#;
/// An answer cut at max_output_tokens, with the request's settings repeated.
const CUT_SHORT_BODY: &str = r#"{"created_at":1700000000,"error":null,"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":{"reason":"max_output_tokens"},"instructions":"be brief","max_output_tokens":64,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[{"content":[{"annotations":[],"logprobs":[],"text":"Once upon","type":"output_text"}],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","role":"assistant","status":"incomplete","type":"message"}],"parallel_tool_calls":true,"previous_response_id":"resp_0190f5b2-0000-7000-8000-000000000000","reasoning":{"effort":null,"summary":null},"status":"incomplete","store":false,"temperature":0.5,"text":{"format":{"type":"text"}},"tool_choice":"required","tools":[{"name":"get_weather","type":"function"}],"top_p":null,"truncation":"disabled","usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":5},"user":null}"#;
/// A keep-alive after the opening, a token, a failure; nothing after it.
const WAIT_THEN_FAILURE: &str = concat!(
    "event: response.created\n",
    r#"data: {"response":{"created_at":1700000000,"error":null,"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"status":"in_progress","store":true,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":null,"user":null},"sequence_number":0,"type":"response.created"}"#,
    "\n\n",
    "event: response.in_progress\n",
    r#"data: {"response":{"created_at":1700000000,"error":null,"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"status":"in_progress","store":true,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":null,"user":null},"sequence_number":1,"type":"response.in_progress"}"#,
    "\n\n",
    ": queued position=2 eta_s=14\n",
    "\n",
    "event: response.output_item.added\n",
    r#"data: {"item":{"content":[],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","role":"assistant","status":"in_progress","type":"message"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}"#,
    "\n\n",
    "event: response.content_part.added\n",
    r#"data: {"content_index":0,"item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","output_index":0,"part":{"annotations":[],"logprobs":[],"text":"","type":"output_text"},"sequence_number":3,"type":"response.content_part.added"}"#,
    "\n\n",
    "event: response.output_text.delta\n",
    r#"data: {"content_index":0,"delta":"Hi","item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","logprobs":[],"output_index":0,"sequence_number":4,"type":"response.output_text.delta"}"#,
    "\n\n",
    "event: response.output_text.done\n",
    r#"data: {"content_index":0,"item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","logprobs":[],"output_index":0,"sequence_number":5,"text":"Hi","type":"response.output_text.done"}"#,
    "\n\n",
    "event: response.content_part.done\n",
    r#"data: {"content_index":0,"item_id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","output_index":0,"part":{"annotations":[],"logprobs":[],"text":"Hi","type":"output_text"},"sequence_number":6,"type":"response.content_part.done"}"#,
    "\n\n",
    "event: response.output_item.done\n",
    r#"data: {"item":{"content":[{"annotations":[],"logprobs":[],"text":"Hi","type":"output_text"}],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","role":"assistant","status":"incomplete","type":"message"},"output_index":0,"sequence_number":7,"type":"response.output_item.done"}"#,
    "\n\n",
    "event: response.failed\n",
    r#"data: {"response":{"created_at":1700000000,"error":{"code":"backend_error","message":"moon stopped"},"id":"resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d","incomplete_details":null,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"qwen2.5:7b","object":"response","output":[{"content":[{"annotations":[],"logprobs":[],"text":"Hi","type":"output_text"}],"id":"msg_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d_0","role":"assistant","status":"incomplete","type":"message"}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"status":"failed","store":true,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","usage":null,"user":null},"sequence_number":8,"type":"response.failed"}"#,
    "\n\n",
);

#[test]
fn stream_bytes_are_pinned() {
    assert_eq!(encode_stream(), STREAM_BODY);
}

#[test]
fn whole_response_bytes_are_pinned() {
    assert_eq!(
        encode_whole(
            &Answer::from_chunks(&representative_stream()),
            Echo::default()
        ),
        WHOLE_BODY
    );
    assert_eq!(encode_whole(&cut_short(), echo()), CUT_SHORT_BODY);
}

#[test]
fn keep_alives_are_comments_and_a_failure_ends_the_stream() {
    assert_eq!(encode_wait_then_failure(), WAIT_THEN_FAILURE);
}

#[test]
fn a_response_id_names_its_task() {
    let id = response_id(task());
    assert_eq!(id, "resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d");
    assert_eq!(task_of_response(&id), Some(task()));
    assert_eq!(
        task_of_response("0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d"),
        None
    );
    assert_eq!(task_of_response("resp_nope"), None);
}
