//! The legacy `text_completion` encoders: the whole body of `POST /v1/completions`, and its
//! SSE stream.
//!
//! Stream order: one event per text piece (`choices[0].text`, `finish_reason: null`), the
//! last with an empty text and its `finish_reason`, a usage event with `choices: []` when
//! `stream_options.include_usage` was asked, then `data: [DONE]`. A failure after the
//! stream started is one `data: {"error":{...}}` event, then `data: [DONE]`; keep-alive
//! comments may come before the first piece, as in a chat stream. A completion has no
//! reasoning or tool calls: they are left out.

use serde::Serialize;

use super::response::{CompletionMeta, UsageBody};
use super::write_json;
use crate::api::wait::Waiting;
use crate::chat::{Chunk, FinishReason};
use crate::turn::Answer;

const DONE: &[u8] = b"data: [DONE]\n\n";

#[derive(Serialize)]
struct Body<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: &'a [Choice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageBody>,
}

#[derive(Serialize)]
struct Choice<'a> {
    text: &'a str,
    index: u32,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

/// A completion's `finish_reason`: `stop` or `length` (a completion calls no tools).
fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::Stop | FinishReason::ToolCalls => "stop",
    }
}

fn write_body(
    out: &mut Vec<u8>,
    meta: &CompletionMeta,
    choices: &[Choice<'_>],
    usage: Option<UsageBody>,
) {
    write_json(
        out,
        &Body {
            id: &meta.id,
            object: "text_completion",
            created: meta.created,
            model: &meta.model,
            choices,
            usage,
        },
    );
}

/// Appends a whole `text_completion` body for `answer` to `out`.
pub fn encode_text_completion(out: &mut Vec<u8>, meta: &CompletionMeta, answer: &Answer) {
    let choice = Choice {
        text: &answer.content,
        index: 0,
        logprobs: None,
        finish_reason: Some(finish_reason(answer.finish_reason_or_stop())),
    };
    write_body(out, meta, &[choice], Some(UsageBody::from(&answer.usage)));
}

/// Encodes one task's `text_completion` stream into a caller-owned buffer.
#[derive(Debug, Clone)]
pub struct TextSseEncoder {
    meta: CompletionMeta,
    include_usage: bool,
    finished: bool,
}

impl TextSseEncoder {
    pub fn new(meta: CompletionMeta, include_usage: bool) -> Self {
        Self {
            meta,
            include_usage,
            finished: false,
        }
    }

    /// Whether `[DONE]` has been written; later chunks are ignored.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Appends the event for one chunk; empty text, reasoning and tool calls send nothing.
    pub fn push(&mut self, chunk: &Chunk, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        match chunk {
            Chunk::Content { text } if !text.is_empty() => self.event(text, None, out),
            Chunk::Done {
                finish_reason: reason,
                usage,
            } => {
                self.finished = true;
                self.event("", Some(finish_reason(*reason)), out);
                if self.include_usage {
                    out.extend_from_slice(b"data: ");
                    write_body(out, &self.meta, &[], Some(UsageBody::from(usage)));
                    out.extend_from_slice(b"\n\n");
                }
                out.extend_from_slice(DONE);
            }
            _ => {}
        }
    }

    /// The keep-alive comment of a chat stream (see [`super::SseEncoder::push_waiting`]).
    pub fn push_waiting(&self, waiting: Waiting, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        super::stream::waiting_comment(waiting, out);
    }

    /// Appends an error event and `[DONE]`, for a failure after the stream started.
    pub fn push_error(&mut self, error: &impl Serialize, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.finished = true;
        out.extend_from_slice(b"data: ");
        write_json(out, error);
        out.extend_from_slice(b"\n\n");
        out.extend_from_slice(DONE);
    }

    fn event(&self, text: &str, finish: Option<&'static str>, out: &mut Vec<u8>) {
        out.extend_from_slice(b"data: ");
        let choice = Choice {
            text,
            index: 0,
            logprobs: None,
            finish_reason: finish,
        };
        write_body(out, &self.meta, &[choice], None);
        out.extend_from_slice(b"\n\n");
    }
}

impl super::OpenAiSse for TextSseEncoder {
    fn push(&mut self, chunk: &Chunk, out: &mut Vec<u8>) {
        TextSseEncoder::push(self, chunk, out);
    }

    fn push_waiting(&self, waiting: Waiting, out: &mut Vec<u8>) {
        TextSseEncoder::push_waiting(self, waiting, out);
    }

    fn push_error(&mut self, error: &impl Serialize, out: &mut Vec<u8>) {
        TextSseEncoder::push_error(self, error, out);
    }
}
