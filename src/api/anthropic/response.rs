//! Anthropic's answers: the whole `message` object, and the stream of Messages events
//! (`message_start`, `content_block_start` / `_delta` / `_stop`, `message_delta`,
//! `message_stop`, `ping`, `error`). Pure encoders writing into the caller's buffer.

use serde_json::{Value, json};

use crate::api::http::write_json;
use crate::chat::{Chunk, FinishReason, ToolCall, Usage};
use crate::domain::TaskId;
use crate::turn::Answer;

/// What every answer to one request carries: its id and model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageMeta {
    pub id: String,
    pub model: String,
}

impl MessageMeta {
    pub fn new(task_id: TaskId, model: impl Into<String>) -> Self {
        Self {
            id: format!("msg_{task_id}"),
            model: model.into(),
        }
    }
}

fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
    }
}

/// A tool call's arguments as the object Anthropic's `input` is; text that is no JSON
/// object is kept under `arguments`.
fn tool_input(call: &ToolCall) -> Value {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ "arguments": call.arguments }),
    }
}

fn tool_use_block(call: &ToolCall, input: Value) -> Value {
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

/// The whole answer: `{"type": "message", "content": [...], "stop_reason", "usage"}`.
pub fn encode_message(out: &mut Vec<u8>, meta: &MessageMeta, answer: &Answer) {
    let mut content = Vec::new();
    if !answer.reasoning.is_empty() {
        content.push(json!({"type": "thinking", "thinking": answer.reasoning, "signature": ""}));
    }
    if !answer.content.is_empty() {
        content.push(json!({"type": "text", "text": answer.content}));
    }
    for call in &answer.tool_calls {
        content.push(tool_use_block(call, tool_input(call)));
    }
    let reason = match answer.finish_reason_or_stop() {
        // A backend that calls tools may still say it stopped.
        _ if !answer.tool_calls.is_empty() => FinishReason::ToolCalls,
        r => r,
    };
    let body = json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": content,
        "stop_reason": stop_reason(reason),
        "stop_sequence": null,
        "usage": usage(&answer.usage),
    });
    write_json(out, &body);
}

fn usage(u: &Usage) -> Value {
    json!({"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens})
}

/// The kind of content block open in a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// Encodes one streamed answer as Messages events.
#[derive(Debug)]
pub struct MessagesSseEncoder {
    meta: MessageMeta,
    started: bool,
    open: Option<Open>,
    /// The index the next content block gets.
    next_index: usize,
    saw_tools: bool,
    finished: bool,
}

fn event(out: &mut Vec<u8>, name: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    write_json(out, data);
    out.extend_from_slice(b"\n\n");
}

impl MessagesSseEncoder {
    pub fn new(meta: MessageMeta) -> Self {
        Self {
            meta,
            started: false,
            open: None,
            next_index: 0,
            saw_tools: false,
            finished: false,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// `message_start` and a first `ping`, once.
    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let message = json!({
            "id": self.meta.id,
            "type": "message",
            "role": "assistant",
            "model": self.meta.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        });
        event(
            out,
            "message_start",
            &json!({"type": "message_start", "message": message}),
        );
        event(out, "ping", &json!({"type": "ping"}));
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if self.open.take().is_some() {
            let index = self.next_index - 1;
            event(
                out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
    }

    /// Opens a block of `kind` unless one is open already; returns its index.
    fn open(&mut self, kind: Open, out: &mut Vec<u8>) -> usize {
        if self.open != Some(kind) {
            self.close(out);
            let block = match kind {
                Open::Text => json!({"type": "text", "text": ""}),
                Open::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            };
            let index = self.next_index;
            event(
                out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": block}),
            );
            self.next_index += 1;
            self.open = Some(kind);
        }
        self.next_index - 1
    }

    fn delta(out: &mut Vec<u8>, index: usize, delta: Value) {
        event(
            out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }

    /// Appends the events for one chunk; nothing after the end.
    pub fn push(&mut self, chunk: &Chunk, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.start(out);
        match chunk {
            Chunk::Content { text } if text.is_empty() => {}
            Chunk::Content { text } => {
                let index = self.open(Open::Text, out);
                Self::delta(out, index, json!({"type": "text_delta", "text": text}));
            }
            Chunk::Reasoning { text } if text.is_empty() => {}
            Chunk::Reasoning { text } => {
                let index = self.open(Open::Thinking, out);
                Self::delta(
                    out,
                    index,
                    json!({"type": "thinking_delta", "thinking": text}),
                );
            }
            Chunk::ToolCalls { calls } => self.tool_uses(calls, out),
            Chunk::Done {
                finish_reason,
                usage: u,
            } => self.end(*finish_reason, u, out),
        }
    }

    /// One `tool_use` block per call, each whole: start, its input, stop.
    fn tool_uses(&mut self, calls: &[ToolCall], out: &mut Vec<u8>) {
        self.close(out);
        self.saw_tools |= !calls.is_empty();
        for call in calls {
            let index = self.next_index;
            self.next_index += 1;
            let block = tool_use_block(call, json!({}));
            event(
                out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": block}),
            );
            let partial = tool_input(call).to_string();
            Self::delta(
                out,
                index,
                json!({"type": "input_json_delta", "partial_json": partial}),
            );
            event(
                out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
    }

    /// `message_delta` with the stop reason and usage, then `message_stop`.
    fn end(&mut self, finish_reason: FinishReason, u: &Usage, out: &mut Vec<u8>) {
        self.close(out);
        let reason = if self.saw_tools {
            FinishReason::ToolCalls
        } else {
            finish_reason
        };
        let delta = json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(reason), "stop_sequence": null},
            "usage": usage(u),
        });
        event(out, "message_delta", &delta);
        event(out, "message_stop", &json!({"type": "message_stop"}));
        self.finished = true;
    }

    /// A keep-alive while the answer waits: a `ping`.
    pub fn push_waiting(&mut self, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        if self.started {
            event(out, "ping", &json!({"type": "ping"}));
        } else {
            self.start(out);
        }
    }

    /// An `error` event that ends the stream; `body` is the whole error object
    /// (`{"type": "error", "error": {...}}`).
    pub fn push_error(&mut self, body: &Value, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.finished = true;
        event(out, "error", body);
    }
}
