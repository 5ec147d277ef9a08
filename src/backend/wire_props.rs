//! Property tests of the backend stream decoders (Ollama NDJSON, OpenAI SSE, a whole
//! `chat.completion`) through the driver that splits bodies into lines: however the network
//! cuts a body, the chunks are those of the body in one piece; any bytes give chunks or a
//! `BackendError`, never a panic; a stream written by our own front-door encoders reads
//! back as the chunks it was written from.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use proptest::prelude::*;
use serde_json::Value;

use super::ollama::NdjsonDecoder;
use super::openai::{CompletionDecoder, SseDecoder};
use super::wire::{Decoder, decode_body};
use super::{BackendError, ClientSettings};
use crate::api::ollama::NdjsonEncoder;
use crate::api::openai::{CompletionMeta, SseEncoder};
use crate::chat::{Chunk, FinishReason, ToolCall, Usage};
use crate::domain::{TaskId, WorkerName};

type Decoded = Vec<Result<Chunk, BackendError>>;

fn settings() -> ClientSettings {
    ClientSettings {
        name: WorkerName::parse("moon").unwrap(),
        base_url: reqwest::Url::parse("http://127.0.0.1:1/").unwrap(),
        connect_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(60),
        answer_timeout: Duration::from_secs(60),
        look_timeout: Duration::from_secs(10),
        api_key: None,
    }
}

/// Everything the driver makes of `body` arriving in `pieces`: the chunks, and the error
/// that ends them (or is all there is).
fn decode<D: Decoder>(decoder: D, pieces: Vec<Bytes>) -> Decoded {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async move {
        let body = futures::stream::iter(pieces.into_iter().map(Ok)).boxed();
        match decode_body(&settings(), body, decoder).await {
            Err(e) => vec![Err(e)],
            Ok(stream) => stream.collect().await,
        }
    })
}

/// `body` cut at `cuts` (positions taken modulo its length; repeats make empty pieces).
fn cut(body: &[u8], cuts: &[prop::sample::Index]) -> Vec<Bytes> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
    at.sort_unstable();
    let mut pieces = Vec::with_capacity(at.len() + 1);
    let mut from = 0;
    for to in at {
        pieces.push(Bytes::copy_from_slice(&body[from..to]));
        from = to;
    }
    pieces.push(Bytes::copy_from_slice(&body[from..]));
    pieces
}

fn whole(body: &[u8]) -> Vec<Bytes> {
    vec![Bytes::copy_from_slice(body)]
}

fn cuts() -> impl Strategy<Value = Vec<prop::sample::Index>> {
    prop::collection::vec(any::<prop::sample::Index>(), 0..12)
}

/// Text a model might send, including what JSON must escape and multi-byte characters
/// (which a cut may split).
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{1,8}",
        "[\"\\\\\\n\\r\\t/]{1,3}",
        "[日本語の回答😀é]{1,3}",
        Just("data: [DONE]".to_owned()),
        Just("\n\n".to_owned()),
    ]
}

/// An answer as chunks, ending with `Done`.
fn answer() -> impl Strategy<Value = Vec<Chunk>> {
    let piece = prop_oneof![
        3 => token().prop_map(|text| Chunk::Content { text }),
        1 => token().prop_map(|text| Chunk::Reasoning { text }),
    ];
    let call = (
        "[a-z_]{1,8}",
        prop::collection::btree_map("[a-z]{1,4}", token(), 0..3),
    )
        .prop_map(|(name, args)| ToolCall {
            id: String::new(),
            name,
            arguments: serde_json::to_string(&args).unwrap(),
        });
    (
        prop::collection::vec(piece, 0..12),
        prop::collection::vec(call, 0..3),
        any::<bool>(),
        0u32..5000,
        0u32..5000,
    )
        .prop_map(|(mut chunks, calls, cut_short, prompt, completion)| {
            let finish_reason = if !calls.is_empty() {
                FinishReason::ToolCalls
            } else if cut_short {
                FinishReason::Length
            } else {
                FinishReason::Stop
            };
            for (i, mut call) in calls.into_iter().enumerate() {
                call.id = format!("call_{i}");
                chunks.push(Chunk::ToolCalls { calls: vec![call] });
            }
            chunks.push(Chunk::Done {
                finish_reason,
                usage: Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    backend_total_ms: None,
                    backend_timings: None,
                },
            });
            chunks
        })
}

fn ndjson(chunks: &[Chunk]) -> Vec<u8> {
    let mut enc = NdjsonEncoder::new("qwen2.5:7b");
    let mut out = Vec::new();
    for c in chunks {
        enc.push(c, "2026-01-01T00:00:00.000000000Z", &mut out);
    }
    out
}

fn sse(chunks: &[Chunk]) -> Vec<u8> {
    let meta = CompletionMeta::new(TaskId::new(), 0, "qwen2.5:7b");
    let mut enc = SseEncoder::new(meta, true);
    let mut out = Vec::new();
    for c in chunks {
        enc.push(c, &mut out);
    }
    out
}

/// What an answer says, in a form both wires keep: the text pieces in order, the tool
/// calls (name and arguments as JSON), how it finished and the token counts.
#[derive(Debug, PartialEq)]
struct Said {
    pieces: Vec<(bool, String)>,
    calls: Vec<(String, Value)>,
    finish: Option<(FinishReason, u32, u32)>,
}

fn said(chunks: impl IntoIterator<Item = Chunk>) -> Said {
    let mut s = Said {
        pieces: Vec::new(),
        calls: Vec::new(),
        finish: None,
    };
    for c in chunks {
        match c {
            Chunk::Content { text } => s.pieces.push((false, text)),
            Chunk::Reasoning { text } => s.pieces.push((true, text)),
            Chunk::ToolCalls { calls } => s.calls.extend(calls.into_iter().map(|c| {
                let args = serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments));
                (c.name, args)
            })),
            Chunk::Done {
                finish_reason,
                usage,
            } => s.finish = Some((finish_reason, usage.prompt_tokens, usage.completion_tokens)),
        }
    }
    s
}

fn all_ok(decoded: Decoded) -> Result<Vec<Chunk>, TestCaseError> {
    decoded
        .into_iter()
        .map(|r| r.map_err(|e| TestCaseError::fail(format!("{e}"))))
        .collect()
}

/// Lines of both wires, their parts, and what breaks them, to build bodies from.
const NDJSON_PARTS: &[&str] = &[
    r#"{"message":{"role":"assistant","content":"hi"},"done":false}"#,
    r#"{"message":{"thinking":"hm","content":""},"done":false}"#,
    r#"{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},"done":false}"#,
    r#"{"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":2}"#,
    r#"{"done":true,"done_reason":"length"}"#,
    r#"{"error":"model ran out of memory"}"#,
    r#"{"message":{"content":"#,
    r#"{"done":"yes"}"#,
    "\n",
    "\r\n",
    "   ",
];

const SSE_PARTS: &[&str] = &[
    "data: ",
    "data:",
    r#"{"choices":[{"delta":{"role":"assistant","content":"hi"}}]}"#,
    r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#,
    r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\""}}]}}]}"#,
    r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
    r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
    r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
    r#"{"error":{"message":"overloaded"}}"#,
    "[DONE]",
    ": keep-alive",
    "event: message",
    "\n",
    "\n\n",
    "\r\n",
];

fn body_from(parts: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let part = prop_oneof![
        4 => prop::sample::select(parts).prop_map(|p| p.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..8),
        1 => Just(vec![0xe6, 0x97]),
    ];
    prop::collection::vec(part, 0..24).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn an_ndjson_answer_reads_back_however_it_is_cut(chunks in answer(), at in cuts()) {
        let body = ndjson(&chunks);
        let one = all_ok(decode(NdjsonDecoder::default(), whole(&body)))?;
        prop_assert_eq!(said(one.clone()), said(chunks));
        let split = all_ok(decode(NdjsonDecoder::default(), cut(&body, &at)))?;
        prop_assert_eq!(split, one);
    }

    #[test]
    fn an_sse_answer_reads_back_however_it_is_cut(chunks in answer(), at in cuts()) {
        let body = sse(&chunks);
        let one = all_ok(decode(SseDecoder::default(), whole(&body)))?;
        prop_assert_eq!(said(one.clone()), said(chunks));
        let split = all_ok(decode(SseDecoder::default(), cut(&body, &at)))?;
        prop_assert_eq!(split, one);
    }

    #[test]
    fn any_ndjson_bytes_decode_the_same_however_they_are_cut(body in body_from(NDJSON_PARTS), at in cuts()) {
        let one = decode(NdjsonDecoder::default(), whole(&body));
        prop_assert_eq!(decode(NdjsonDecoder::default(), cut(&body, &at)), one);
    }

    #[test]
    fn any_sse_bytes_decode_the_same_however_they_are_cut(body in body_from(SSE_PARTS), at in cuts()) {
        let one = decode(SseDecoder::default(), whole(&body));
        prop_assert_eq!(decode(SseDecoder::default(), cut(&body, &at)), one);
    }

    #[test]
    fn any_whole_answer_bytes_decode_the_same_however_they_are_cut(body in body_from(SSE_PARTS), at in cuts()) {
        let one = decode(CompletionDecoder::default(), whole(&body));
        prop_assert_eq!(decode(CompletionDecoder::default(), cut(&body, &at)), one);
    }

    #[test]
    fn random_bytes_end_in_chunks_or_an_error(body in prop::collection::vec(any::<u8>(), 0..512), at in cuts()) {
        for decoded in [
            decode(NdjsonDecoder::default(), cut(&body, &at)),
            decode(SseDecoder::default(), cut(&body, &at)),
            decode(CompletionDecoder::default(), cut(&body, &at)),
        ] {
            // At most one error, and only at the end.
            let errors = decoded.iter().filter(|r| r.is_err()).count();
            prop_assert!(errors <= 1);
            prop_assert!(errors == 0 || decoded.last().is_some_and(Result::is_err));
        }
    }
}

/// Found by the properties above: bytes that are no UTF-8 after the final record failed
/// the stream when they came in the same network read as that record, and were ignored
/// when they came later.
#[test]
fn what_follows_the_final_record_is_ignored_however_it_arrives() {
    let body = b"{\"done\":true,\"done_reason\":\"stop\"}\n\xff\xfe\n".to_vec();
    let one = decode(NdjsonDecoder::default(), whole(&body));
    assert!(
        matches!(one.as_slice(), [Ok(Chunk::Done { .. })]),
        "{one:?}"
    );
    let body = b"data: [DONE]\n\n\xff\n".to_vec();
    let one = decode(SseDecoder::default(), whole(&body));
    assert!(
        matches!(one.as_slice(), [Ok(Chunk::Done { .. })]),
        "{one:?}"
    );
}
