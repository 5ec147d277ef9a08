//! The `/api/generate` NDJSON encoder and its single-object (non-streamed) answer.
//!
//! Each chunk is one line `{"model","created_at","response":"…","done":false}` (reasoning
//! as `"thinking"` beside an empty `response`); the last line has `"done":true`,
//! `done_reason` and the counts and durations in nanoseconds, as `/api/chat`'s does. A
//! failure after the stream started is one `{"error":"..."}` line; keep-alives before the
//! first token are lines with an empty `response`. A completion has no tool calls.

use serde::Serialize;

use super::stream::{Metrics, Timings};
use super::stream::{end_with_error, write_line};
use crate::api::openai::write_json;
use crate::chat::Chunk;
use crate::turn::Answer;

#[derive(Serialize)]
struct Record<'a> {
    model: &'a str,
    created_at: &'a str,
    response: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
    done: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    metrics: Option<Metrics>,
}

impl<'a> Record<'a> {
    fn piece(model: &'a str, created_at: &'a str) -> Self {
        Self {
            model,
            created_at,
            response: "",
            thinking: None,
            done: false,
            metrics: None,
        }
    }
}

/// Encodes one task's `/api/generate` stream into a caller-owned buffer.
#[derive(Debug, Clone)]
pub struct GenerateEncoder {
    model: String,
    finished: bool,
}

impl GenerateEncoder {
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            finished: false,
        }
    }

    /// Whether the final record (or an error line) has been written.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Appends the line for one chunk; `created_at` is the RFC 3339 time of the chunk.
    pub fn push(&mut self, chunk: &Chunk, created_at: &str, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        let mut rec = Record::piece(&self.model, created_at);
        match chunk {
            Chunk::Content { text } if !text.is_empty() => rec.response = text,
            Chunk::Reasoning { text } if !text.is_empty() => rec.thinking = Some(text),
            Chunk::Done {
                finish_reason,
                usage,
            } => {
                self.finished = true;
                rec.done = true;
                rec.metrics = Some(Metrics::new(
                    *finish_reason,
                    usage,
                    Timings::from_usage(usage),
                ));
            }
            _ => return,
        }
        write_line(out, &rec);
    }

    /// Appends a keep-alive line (an empty `response`, not done) for a client whose answer
    /// has not started.
    pub fn push_waiting(&self, created_at: &str, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        write_line(out, &Record::piece(&self.model, created_at));
    }

    /// Appends an `{"error":"..."}` line, for a failure after the stream started.
    pub fn push_error(&mut self, message: &str, out: &mut Vec<u8>) {
        end_with_error(&mut self.finished, message, out);
    }
}

/// Appends the single `/api/generate` object for a non-streamed answer (no newline).
pub fn encode_generate_response(
    out: &mut Vec<u8>,
    model: &str,
    created_at: &str,
    answer: &Answer,
    timings: Timings,
) {
    let rec = Record {
        model,
        created_at,
        response: &answer.content,
        thinking: (!answer.reasoning.is_empty()).then_some(answer.reasoning.as_str()),
        done: true,
        metrics: Some(Metrics::new(
            answer.finish_reason_or_stop(),
            &answer.usage,
            timings,
        )),
    };
    write_json(out, &rec);
}
