//! Pinned wire bytes for the Ollama encoders and list bodies.

use super::*;
use crate::api::openai::snapshot_tests::representative_stream;
use crate::chat::Chunk;
use crate::turn::Answer;

const AT: &str = "2024-05-01T12:00:00.000000000Z";

fn timings() -> Timings {
    Timings {
        total_ns: 2_000_000_000,
        load_ns: 100_000_000,
        prompt_eval_ns: 200_000_000,
        eval_ns: 1_500_000_000,
    }
}

#[test]
fn ndjson_stream_bytes_are_pinned() {
    let mut enc = NdjsonEncoder::new("qwen2.5:7b");
    enc.set_timings(timings());
    let mut out = Vec::new();
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
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","message":{"role":"assistant","content":"","thinking":"Think."},"done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","message":{"role":"assistant","content":"Hi"},"done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","message":{"role":"assistant","content":" \"柏市\"\n"},"done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"index":0,"name":"get_weather","arguments":{"city":"Kashiwa"}}}]},"done":false}"#,
        "\n",
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":2000000000,"load_duration":100000000,"prompt_eval_count":12,"prompt_eval_duration":200000000,"eval_count":7,"eval_duration":1500000000}"#,
        "\n",
    );
    assert_eq!(String::from_utf8(out).unwrap(), expected);
}

#[test]
fn ndjson_keep_alive_is_an_empty_message_that_is_not_done() {
    let mut enc = NdjsonEncoder::new("qwen2.5:7b");
    let mut out = Vec::new();
    enc.push_waiting(AT, &mut out);
    assert_eq!(
        String::from_utf8(std::mem::take(&mut out)).unwrap(),
        concat!(
            r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","message":{"role":"assistant","content":""},"done":false}"#,
            "\n"
        )
    );
    enc.push_error("busy", &mut out);
    enc.push_waiting(AT, &mut out);
    assert_eq!(String::from_utf8(out).unwrap(), "{\"error\":\"busy\"}\n");
}

#[test]
fn ndjson_without_timings_uses_the_backend_total_and_errors_are_one_line() {
    let mut enc = NdjsonEncoder::new("m");
    let mut out = Vec::new();
    enc.push(representative_stream().last().unwrap(), AT, &mut out);
    let line = String::from_utf8(out).unwrap();
    assert!(
        line.contains(r#""total_duration":1500000000,"load_duration":0"#),
        "{line}"
    );

    let mut enc = NdjsonEncoder::new("m");
    let mut out = Vec::new();
    enc.push_error("backend moon stopped answering", &mut out);
    enc.push_error("again", &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"error\":\"backend moon stopped answering\"}\n"
    );
}

#[test]
fn non_stream_object_is_pinned() {
    let mut out = Vec::new();
    let answer = Answer::from_chunks(&representative_stream());
    encode_chat_response(&mut out, "qwen2.5:7b", AT, &answer, timings());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"model":"qwen2.5:7b","created_at":"2024-05-01T12:00:00.000000000Z","message":{"role":"assistant","content":"Hi \"柏市\"\n","thinking":"Think.","tool_calls":[{"id":"call_1","function":{"index":0,"name":"get_weather","arguments":{"city":"Kashiwa"}}}]},"done":true,"done_reason":"stop","total_duration":2000000000,"load_duration":100000000,"prompt_eval_count":12,"prompt_eval_duration":200000000,"eval_count":7,"eval_duration":1500000000}"#
    );
}

#[test]
fn list_bodies_are_pinned() {
    let tags = TagsResponse {
        models: vec![ModelTag::new("auto", AT)],
    };
    assert_eq!(
        serde_json::to_string(&tags).unwrap(),
        r#"{"models":[{"name":"auto","model":"auto","modified_at":"2024-05-01T12:00:00.000000000Z","size":0,"digest":"929260ad9b9ea9fe0f3553dd964f4ff3deb5792efd031a2b90f573fe91f012bb","details":{"parent_model":"","format":"","family":"","families":null,"parameter_size":"","quantization_level":""}}]}"#
    );
    let ps = PsResponse {
        models: vec![RunningModel {
            name: "qwen2.5:7b".into(),
            model: "qwen2.5:7b".into(),
            size: 5,
            digest: "d".into(),
            details: ModelDetails::default(),
            expires_at: AT.into(),
            size_vram: 4,
        }],
    };
    let ps_json = serde_json::to_string(&ps).unwrap();
    assert!(ps_json.contains(r#""expires_at":"2024-05-01T12:00:00.000000000Z","size_vram":4"#));
    assert_eq!(
        serde_json::to_string(&VersionResponse {
            version: "0.1.0".into()
        })
        .unwrap(),
        r#"{"version":"0.1.0"}"#
    );
    assert_eq!(
        serde_json::to_string(&ErrorBody::new("model not found")).unwrap(),
        r#"{"error":"model not found"}"#
    );
    let t = chrono::DateTime::parse_from_rfc3339("2024-05-01T12:00:00Z").unwrap();
    assert_eq!(timestamp(t.with_timezone(&chrono::Utc)), AT);
}
