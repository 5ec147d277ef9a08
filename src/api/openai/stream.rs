//! The `chat.completion.chunk` SSE encoder: turns a task's [`Chunk`]s into the exact bytes
//! Open WebUI and the OpenAI SDKs read.
//!
//! Order on the wire: a role chunk (`delta: {role: "assistant", content: ""}`), content /
//! `reasoning_content` / `tool_calls` deltas, the final chunk with `finish_reason`, a usage
//! chunk with `choices: []` when `include_usage` was asked, then `data: [DONE]`. A failure
//! after the stream started is one `data: {"error":{...}}` event, then `data: [DONE]`.
//! Before a queued answer's first token, keep-alive comments (`: queued position=2
//! eta_s=14`) may come first.

use serde::Serialize;

use super::response::{CompletionMeta, ToolCallsOut, UsageBody};
use super::write_json;
use crate::api::wait::Waiting;
use crate::chat::{Chunk, FinishReason, Usage};

const DONE: &[u8] = b"data: [DONE]\n\n";

/// A keep-alive SSE comment saying how the wait stands (`: queued position=2 eta_s=14`),
/// which SSE readers skip.
pub(crate) fn waiting_comment(waiting: Waiting, out: &mut Vec<u8>) {
    match waiting {
        Waiting::Queued { position, eta_s } => {
            out.extend_from_slice(b": queued position=");
            out.extend_from_slice(position.to_string().as_bytes());
            if let Some(eta) = eta_s {
                out.extend_from_slice(b" eta_s=");
                out.extend_from_slice(eta.to_string().as_bytes());
            }
        }
        Waiting::NotQueued => out.extend_from_slice(b": waiting"),
    }
    out.extend_from_slice(b"\n\n");
}

/// What every frame of one stream begins with, up to its `choices`.
#[derive(Serialize)]
struct FrameHead<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize, Default)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<ToolCallsOut<'a>>,
}

/// Encodes one task's stream. Feed every chunk to [`SseEncoder::push`], or end with
/// [`SseEncoder::push_error`]; both append to a caller-owned buffer that can be reused.
#[derive(Debug, Clone)]
pub struct SseEncoder {
    /// `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":`,
    /// the same in every frame, rendered once: a frame is written as this, its choices and
    /// its end (a token's frame cost about a third of its encoding in the id's and model's
    /// escaping and the keys', every time).
    head: Vec<u8>,
    include_usage: bool,
    started: bool,
    finished: bool,
    next_tool_index: u32,
}

impl SseEncoder {
    pub fn new(meta: CompletionMeta, include_usage: bool) -> Self {
        let mut head = b"data: ".to_vec();
        write_json(
            &mut head,
            &FrameHead {
                id: &meta.id,
                object: "chat.completion.chunk",
                created: meta.created,
                model: &meta.model,
            },
        );
        // The object's closing brace is where its choices go.
        head.pop();
        head.extend_from_slice(b",\"choices\":");
        Self {
            head,
            include_usage,
            started: false,
            finished: false,
            next_tool_index: 0,
        }
    }

    /// Whether `[DONE]` has been written; later chunks are ignored.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Appends the events for one chunk (the role chunk first, once). Empty text is skipped.
    pub fn push(&mut self, chunk: &Chunk, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        if !self.started {
            self.started = true;
            self.delta(
                Delta {
                    role: Some("assistant"),
                    content: Some(""),
                    ..Delta::default()
                },
                out,
            );
        }
        match chunk {
            Chunk::Content { text } if !text.is_empty() => self.text_delta(b"content", text, out),
            Chunk::Reasoning { text } if !text.is_empty() => {
                self.text_delta(b"reasoning_content", text, out);
            }
            Chunk::ToolCalls { calls } if !calls.is_empty() => {
                let first_index = self.next_tool_index;
                self.next_tool_index = first_index.saturating_add(calls.len() as u32);
                self.delta(
                    Delta {
                        tool_calls: Some(ToolCallsOut {
                            calls,
                            first_index: Some(first_index),
                        }),
                        ..Delta::default()
                    },
                    out,
                );
            }
            Chunk::Done {
                finish_reason,
                usage,
            } => self.finish(*finish_reason, usage, out),
            _ => {}
        }
    }

    /// Appends a keep-alive comment for a client whose answer has not started:
    /// `: queued position=2 eta_s=14` (`eta_s` left out when unknown), or `: waiting` when
    /// the task is no longer in its lane but has sent no token yet. SSE clients skip
    /// comments; proxies see traffic.
    pub fn push_waiting(&self, waiting: Waiting, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        waiting_comment(waiting, out);
    }

    /// Appends an error event and `[DONE]`, for a failure after the stream started:
    /// [`super::ErrorBody`], or the whole OpenAI error object of an `ApiError`.
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

    fn finish(&mut self, reason: FinishReason, usage: &Usage, out: &mut Vec<u8>) {
        self.finished = true;
        self.frame(
            &[Choice {
                index: 0,
                delta: Delta::default(),
                logprobs: None,
                finish_reason: Some(reason.as_str()),
            }],
            None,
            out,
        );
        if self.include_usage {
            self.frame(&[], Some(UsageBody::from(usage)), out);
        }
        out.extend_from_slice(DONE);
    }

    fn delta(&self, delta: Delta<'_>, out: &mut Vec<u8>) {
        self.frame(
            &[Choice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: None,
            }],
            None,
            out,
        );
    }

    /// A token's frame, the one written most: a delta with only `field` (`content` or
    /// `reasoning_content`), byte for byte what [`Self::delta`] writes for it.
    fn text_delta(&self, field: &[u8], text: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        out.extend_from_slice(b"[{\"index\":0,\"delta\":{\"");
        out.extend_from_slice(field);
        out.extend_from_slice(b"\":");
        write_json(out, text);
        out.extend_from_slice(b"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }

    fn frame(&self, choices: &[Choice<'_>], usage: Option<UsageBody>, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        write_json(out, choices);
        if let Some(usage) = usage {
            out.extend_from_slice(b",\"usage\":");
            write_json(out, &usage);
        }
        out.extend_from_slice(b"}\n\n");
    }
}

impl super::OpenAiSse for SseEncoder {
    fn push(&mut self, chunk: &Chunk, out: &mut Vec<u8>) {
        SseEncoder::push(self, chunk, out);
    }

    fn push_waiting(&self, waiting: Waiting, out: &mut Vec<u8>) {
        SseEncoder::push_waiting(self, waiting, out);
    }

    fn push_error(&mut self, error: &impl Serialize, out: &mut Vec<u8>) {
        SseEncoder::push_error(self, error, out);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::TaskId;

    fn encoder(model: &str) -> SseEncoder {
        SseEncoder::new(
            CompletionMeta::new(TaskId::new(), 1_700_000_000, model),
            false,
        )
    }

    proptest! {
        /// A token's frame, written from the rendered head, is the frame the whole
        /// structure serialises to, whatever the text and the model's name hold (quotes,
        /// backslashes, control characters, any Unicode).
        #[test]
        fn a_tokens_frame_is_the_serialised_frame(text in any::<String>(), model in any::<String>()) {
            let enc = encoder(&model);
            for (field, delta) in [
                (&b"content"[..], Delta { content: Some(&text), ..Delta::default() }),
                (&b"reasoning_content"[..], Delta { reasoning_content: Some(&text), ..Delta::default() }),
            ] {
                let mut fast = Vec::new();
                enc.text_delta(field, &text, &mut fast);
                let mut whole = Vec::new();
                enc.delta(delta, &mut whole);
                prop_assert_eq!(&fast, &whole);
                let line = std::str::from_utf8(&fast).unwrap();
                let json: serde_json::Value =
                    serde_json::from_str(line.strip_prefix("data: ").unwrap().trim_end()).unwrap();
                prop_assert_eq!(json["model"].as_str(), Some(model.as_str()));
                prop_assert_eq!(json["object"].as_str(), Some("chat.completion.chunk"));
                let key = std::str::from_utf8(field).unwrap();
                prop_assert_eq!(json["choices"][0]["delta"][key].as_str(), Some(text.as_str()));
            }
        }
    }
}
