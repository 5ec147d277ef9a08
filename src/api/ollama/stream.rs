//! The `/api/chat` NDJSON encoder and the single-object (non-streamed) answer.
//!
//! Each chunk becomes one line
//! `{"model","created_at","message":{"role":"assistant","content",...},"done":false}`;
//! the last line has `"done":true`, `done_reason` and the counts and durations (in
//! nanoseconds). A failure after the stream started is one `{"error":"..."}` line. Before
//! a queued answer's first token, keep-alive lines with empty content may come first.

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};
use serde_json::Value;

use crate::api::openai::write_json;
use crate::chat::{Chunk, FinishReason, ToolCall, Usage};
use crate::turn::Answer;

/// Appends one NDJSON line: `value` and a newline.
pub(super) fn write_line(out: &mut Vec<u8>, value: &impl Serialize) {
    write_json(out, value);
    out.push(b'\n');
}

/// Ends a stream that has not ended with an `{"error":"..."}` line, for a failure after
/// it started; nothing once it has ended.
pub(super) fn end_with_error(finished: &mut bool, message: &str, out: &mut Vec<u8>) {
    if std::mem::replace(finished, true) {
        return;
    }
    write_line(out, &super::ErrorBody::new(message));
}

/// Durations for the final record, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timings {
    pub total_ns: u64,
    pub load_ns: u64,
    pub prompt_eval_ns: u64,
    pub eval_ns: u64,
}

impl Timings {
    /// What the backend reported: its total duration, nothing else.
    pub fn from_usage(usage: &Usage) -> Self {
        Self {
            total_ns: usage
                .backend_total_ms
                .unwrap_or(0)
                .saturating_mul(1_000_000),
            ..Self::default()
        }
    }
}

struct ToolCallsOut<'a> {
    calls: &'a [ToolCall],
    first_index: u32,
}

impl Serialize for ToolCallsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            index: u32,
            name: &'a str,
            arguments: Value,
        }
        #[derive(Serialize)]
        struct Call<'a> {
            #[serde(skip_serializing_if = "str::is_empty")]
            id: &'a str,
            function: Function<'a>,
        }
        let mut seq = s.serialize_seq(Some(self.calls.len()))?;
        for (i, c) in (0u32..).zip(self.calls) {
            seq.serialize_element(&Call {
                id: &c.id,
                function: Function {
                    index: self.first_index.saturating_add(i),
                    name: &c.name,
                    arguments: arguments_object(&c.arguments),
                },
            })?;
        }
        seq.end()
    }
}

/// Ollama carries arguments as an object; text that is not a JSON object becomes `{}`.
fn arguments_object(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            tracing::warn!(
                arguments = text,
                "tool-call arguments are not a JSON object"
            );
            Value::Object(Default::default())
        }
    }
}

#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<ToolCallsOut<'a>>,
}

#[derive(Serialize)]
struct Record<'a> {
    model: &'a str,
    created_at: &'a str,
    message: MessageOut<'a>,
    done: bool,
}

#[derive(Serialize)]
struct FinalRecord<'a> {
    model: &'a str,
    created_at: &'a str,
    message: MessageOut<'a>,
    done: bool,
    #[serde(flatten)]
    metrics: Metrics,
}

/// What a final record (of `/api/chat` and `/api/generate`) adds after `done`.
#[derive(Serialize)]
pub(super) struct Metrics {
    done_reason: &'static str,
    total_duration: u64,
    load_duration: u64,
    prompt_eval_count: u32,
    prompt_eval_duration: u64,
    eval_count: u32,
    eval_duration: u64,
}

impl Metrics {
    pub(super) fn new(reason: FinishReason, usage: &Usage, t: Timings) -> Self {
        Self {
            done_reason: done_reason(reason),
            total_duration: t.total_ns,
            load_duration: t.load_ns,
            prompt_eval_count: usage.prompt_tokens,
            prompt_eval_duration: t.prompt_eval_ns,
            eval_count: usage.completion_tokens,
            eval_duration: t.eval_ns,
        }
    }
}

fn done_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::Stop | FinishReason::ToolCalls => "stop",
    }
}

fn final_record<'a>(
    model: &'a str,
    created_at: &'a str,
    message: MessageOut<'a>,
    reason: FinishReason,
    usage: &Usage,
    t: Timings,
) -> FinalRecord<'a> {
    FinalRecord {
        model,
        created_at,
        message,
        done: true,
        metrics: Metrics::new(reason, usage, t),
    }
}

/// Encodes one task's stream as NDJSON lines appended to a caller-owned buffer.
#[derive(Debug, Clone)]
pub struct NdjsonEncoder {
    model: String,
    timings: Option<Timings>,
    next_tool_index: u32,
    finished: bool,
}

impl NdjsonEncoder {
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            timings: None,
            next_tool_index: 0,
            finished: false,
        }
    }

    /// Measured durations for the final record; without them [`Timings::from_usage`] is used.
    pub fn set_timings(&mut self, timings: Timings) {
        self.timings = Some(timings);
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
        let mut message = MessageOut {
            role: "assistant",
            content: "",
            thinking: None,
            tool_calls: None,
        };
        match chunk {
            Chunk::Content { text } if !text.is_empty() => message.content = text,
            Chunk::Reasoning { text } if !text.is_empty() => message.thinking = Some(text),
            Chunk::ToolCalls { calls } if !calls.is_empty() => {
                message.tool_calls = Some(ToolCallsOut {
                    calls,
                    first_index: self.next_tool_index,
                });
                self.next_tool_index = self.next_tool_index.saturating_add(calls.len() as u32);
            }
            Chunk::Done {
                finish_reason,
                usage,
            } => {
                self.finished = true;
                let t = self.timings.unwrap_or_else(|| Timings::from_usage(usage));
                let rec = final_record(&self.model, created_at, message, *finish_reason, usage, t);
                write_line(out, &rec);
                return;
            }
            _ => return,
        }
        let rec = Record {
            model: &self.model,
            created_at,
            message,
            done: false,
        };
        write_line(out, &rec);
    }

    /// Appends a keep-alive line for a client whose answer has not started: an assistant
    /// message with empty content and `"done":false`, which is what Ollama itself may
    /// send, so every client that reads each line as a chat chunk takes it (Open WebUI
    /// turns it into an empty delta; the `ollama` library yields an empty message). NDJSON
    /// has no comments, so the place and expected wait are not in it.
    pub fn push_waiting(&self, created_at: &str, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        let rec = Record {
            model: &self.model,
            created_at,
            message: MessageOut {
                role: "assistant",
                content: "",
                thinking: None,
                tool_calls: None,
            },
            done: false,
        };
        write_line(out, &rec);
    }

    /// Appends an `{"error":"..."}` line, for a failure after the stream started.
    pub fn push_error(&mut self, message: &str, out: &mut Vec<u8>) {
        end_with_error(&mut self.finished, message, out);
    }
}

/// Appends the single `/api/chat` object for a non-streamed answer (no trailing newline).
pub fn encode_chat_response(
    out: &mut Vec<u8>,
    model: &str,
    created_at: &str,
    answer: &Answer,
    timings: Timings,
) {
    let message = MessageOut {
        role: "assistant",
        content: &answer.content,
        thinking: (!answer.reasoning.is_empty()).then_some(answer.reasoning.as_str()),
        tool_calls: (!answer.tool_calls.is_empty()).then_some(ToolCallsOut {
            calls: &answer.tool_calls,
            first_index: 0,
        }),
    };
    let rec = final_record(
        model,
        created_at,
        message,
        answer.finish_reason_or_stop(),
        &answer.usage,
        timings,
    );
    write_json(out, &rec);
}
