//! Pinned wire bytes of `/api/generate` (stream and whole answer) and its request parsing.

use super::*;
use crate::api::ollama::generate_stream::{GenerateEncoder, encode_generate_response};
use crate::api::ollama::stream::Timings;
use crate::api::openai::parse_body;
use crate::api::openai::snapshot_tests::representative_stream;
use crate::chat::{Chunk, Role};

const AT: &str = "2024-05-01T12:00:00.000000000Z";

#[test]
fn generate_stream_bytes_are_pinned() {
    let mut enc = GenerateEncoder::new("qwen2.5:7b");
    let mut out = Vec::new();
    enc.push_waiting(AT, &mut out);
    for c in representative_stream() {
        enc.push(&c, AT, &mut out);
    }
    assert!(enc.is_finished());
    enc.push(
        &Chunk::Content {
            text: "late".into(),
        },
        AT,
        &mut out,
    );
    let expected = concat!(
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","response":"","done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","response":"","thinking":"Think.","done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","response":"Hi","done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","response":" \"柏市\"\n","done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","response":"","done":true,"done_reason":"stop","total_duration":1500000000,"load_duration":0,"prompt_eval_count":12,"prompt_eval_duration":0,"eval_count":7,"eval_duration":0}"#,
        "\n",
    );
    assert_eq!(String::from_utf8(out).unwrap(), expected);

    let mut enc = GenerateEncoder::new("m");
    let mut out = Vec::new();
    enc.push_error("backend moon stopped answering", &mut out);
    enc.push_error("again", &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"error\":\"backend moon stopped answering\"}\n"
    );
}

#[test]
fn generate_whole_object_is_pinned() {
    let mut out = Vec::new();
    let answer = Answer::from_chunks(&representative_stream());
    let timings = Timings {
        total_ns: 2_000_000_000,
        load_ns: 100_000_000,
        prompt_eval_ns: 200_000_000,
        eval_ns: 1_500_000_000,
    };
    encode_generate_response(&mut out, "qwen2.5:7b", AT, &answer, timings);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","response":"Hi \"柏市\"\n","thinking":"Think.","done":true,"done_reason":"stop","total_duration":2000000000,"load_duration":100000000,"prompt_eval_count":12,"prompt_eval_duration":200000000,"eval_count":7,"eval_duration":1500000000}"#
    );
}

fn parse(body: &str) -> Result<TurnInput, BodyError> {
    let req: GenerateRequest = parse_body(body.as_bytes())?;
    req.into_turn_input(ClientContext::default())
}

#[test]
fn a_generate_body_becomes_a_system_and_user_turn_with_its_text_form() {
    let i = parse(
        r#"{"model":"m","prompt":"p","system":"s","suffix":"x","images":["data:image/png;base64,QUJD","RA=="],
            "stream":false,"options":{"num_predict":9},"format":"json","keep_alive":30,"think":"high"}"#,
    )
    .unwrap();
    assert_eq!(i.messages.len(), 2);
    assert_eq!(i.messages[0].role, Role::System);
    assert_eq!(i.messages[0].content, "s");
    assert_eq!(i.messages[1].role, Role::User);
    assert_eq!(i.messages[1].content, "p");
    assert_eq!(i.messages[1].images, ["QUJD", "RA=="]);
    assert_eq!(i.response, ResponseMode::Whole);
    assert_eq!(i.params.max_tokens, Some(9));
    assert!(i.params.format.is_some());
    assert_eq!(i.params.keep_alive, Some(serde_json::json!(30)));
    let form = i.params.text.unwrap();
    assert_eq!(form.suffix.as_deref(), Some("x"));
    assert!(!form.raw);

    let i = parse(r#"{"prompt":"p","raw":true,"suffix":""}"#).unwrap();
    assert_eq!(i.messages.len(), 1);
    assert_eq!(
        i.response,
        ResponseMode::Streamed,
        "stream defaults to true"
    );
    assert_eq!(
        i.params.text,
        Some(TextForm {
            suffix: None,
            raw: true
        })
    );
    let e = parse(r#"{"prompt":"p","raw":true,"system":"s"}"#).unwrap_err();
    assert_eq!(e.path, "raw");
    let e = parse(r#"{"prompt":"p","images":["data:image/png,raw"]}"#).unwrap_err();
    assert_eq!(e.path, "images[0]");
    let e = parse(r#"{"prompt":"p","think":"hard"}"#).unwrap_err();
    assert_eq!(e.path, "think");
}
