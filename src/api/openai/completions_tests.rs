//! Pinned wire bytes of `text_completion` (stream and whole answer) and request parsing.

use super::*;
use crate::api::openai::completions_stream::{TextSseEncoder, encode_text_completion};
use crate::api::openai::snapshot_tests::representative_stream;
use crate::api::openai::{ErrorBody, parse_body};
use crate::api::wait::Waiting;
use crate::chat::Chunk;

fn meta() -> CompletionMeta {
    CompletionMeta {
        id: "cmpl-1".into(),
        created: 1_714_564_800,
        model: "qwen2.5-coder:7b".into(),
    }
}

#[test]
fn text_completion_stream_bytes_are_pinned() {
    let mut enc = TextSseEncoder::new(meta(), true);
    let mut out = Vec::new();
    enc.push_waiting(
        Waiting::Queued {
            position: 2,
            eta_s: Some(14),
        },
        &mut out,
    );
    for c in representative_stream() {
        enc.push(&c, &mut out);
    }
    assert!(enc.is_finished());
    enc.push(
        &Chunk::Content {
            text: "late".into(),
        },
        &mut out,
    );
    let expected = concat!(
        ": queued position=2 eta_s=14\n\n",
        r#"data: {"id":"cmpl-1","object":"text_completion","created":1714564800,"model":"qwen2.5-coder:7b","choices":[{"text":"Hi","index":0,"logprobs":null,"finish_reason":null}]}"#,
        "\n\n",
        r#"data: {"id":"cmpl-1","object":"text_completion","created":1714564800,"model":"qwen2.5-coder:7b","choices":[{"text":" \"柏市\"\n","index":0,"logprobs":null,"finish_reason":null}]}"#,
        "\n\n",
        r#"data: {"id":"cmpl-1","object":"text_completion","created":1714564800,"model":"qwen2.5-coder:7b","choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"stop"}]}"#,
        "\n\n",
        r#"data: {"id":"cmpl-1","object":"text_completion","created":1714564800,"model":"qwen2.5-coder:7b","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#,
        "\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(String::from_utf8(out).unwrap(), expected);

    let mut enc = TextSseEncoder::new(meta(), false);
    let mut out = Vec::new();
    enc.push(&Chunk::Content { text: "a".into() }, &mut out);
    enc.push_error(
        &ErrorBody::new("moon failed", "server_error", Some("backend_error")),
        &mut out,
    );
    enc.push(&Chunk::Content { text: "b".into() }, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.ends_with(concat!(
            r#"data: {"error":{"message":"moon failed","type":"server_error","code":"backend_error"}}"#,
            "\n\ndata: [DONE]\n\n"
        )),
        "{text}"
    );
}

#[test]
fn text_completion_whole_body_is_pinned() {
    let mut out = Vec::new();
    let answer = Answer::from_chunks(&representative_stream());
    encode_text_completion(&mut out, &meta(), &answer);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"id":"cmpl-1","object":"text_completion","created":1714564800,"model":"qwen2.5-coder:7b","choices":[{"text":"Hi \"柏市\"\n","index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#
    );
}

fn parse(body: &str) -> Result<(TurnInput, bool), BodyError> {
    let req: CompletionRequest = parse_body(body.as_bytes())?;
    req.into_turn_input(ClientContext::default())
}

#[test]
fn a_completion_body_becomes_a_user_turn_continued_raw_unless_it_has_a_suffix() {
    let (i, usage) = parse(
        r#"{"model":"m","prompt":"fn a","max_tokens":8,"stop":"\n","temperature":0.2,"stream":true,
            "stream_options":{"include_usage":true}}"#,
    )
    .unwrap();
    assert!(usage);
    assert_eq!(i.response, ResponseMode::Streamed);
    assert_eq!(i.messages.len(), 1);
    assert_eq!(i.messages[0].content, "fn a");
    assert_eq!(i.params.max_tokens, Some(8));
    assert_eq!(i.params.stop, ["\n"]);
    assert_eq!(
        i.params.text,
        Some(TextForm {
            suffix: None,
            raw: true
        })
    );
    let (i, usage) = parse(r#"{"prompt":["x"],"suffix":"y"}"#).unwrap();
    assert!(!usage, "usage only on a stream");
    assert_eq!(i.response, ResponseMode::Whole);
    assert_eq!(
        i.params.text,
        Some(TextForm {
            suffix: Some("y".into()),
            raw: false
        })
    );
    for (body, field) in [
        (r#"{"prompt":["a","b"]}"#, "prompt"),
        (r#"{"prompt":[[1,2]]}"#, "prompt[0]"),
        (r#"{"prompt":3}"#, "prompt"),
        (r#"{}"#, "prompt"),
        (r#"{"prompt":"x","n":3}"#, "n"),
        (r#"{"prompt":"x","echo":true}"#, "echo"),
    ] {
        assert_eq!(parse(body).unwrap_err().path, field, "{body}");
    }
}
