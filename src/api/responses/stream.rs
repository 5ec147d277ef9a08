//! The Responses API's event stream: `response.created`, `response.in_progress`, then per
//! output item `response.output_item.added`, `response.content_part.added`, its deltas
//! (`response.output_text.delta`, `response.reasoning_text.delta`,
//! `response.function_call_arguments.delta`) and `….done` events, and at the end
//! `response.completed` (`response.incomplete` when cut at `max_output_tokens`, or
//! `response.failed`) with the whole response. Events are numbered in order
//! (`sequence_number`); keep-alives are SSE comments. A pure encoder writing into the
//! caller's buffer.

use serde_json::{Value, json};

use super::response::{ResponseMeta, TextKind, call_item, item_status, status_of, text_item};
use crate::api::http::write_json;
use crate::api::openai::stream::waiting_comment;
use crate::api::wait::Waiting;
use crate::chat::{Chunk, ToolCall};

/// The text item being streamed.
#[derive(Debug)]
struct OpenText {
    kind: TextKind,
    id: String,
    index: usize,
    text: String,
}

/// Encodes one streamed answer as Responses events, numbered in order.
#[derive(Debug)]
pub struct ResponsesSseEncoder {
    meta: ResponseMeta,
    sequence: u64,
    started: bool,
    /// Finished output items, for the final response object.
    output: Vec<Value>,
    open: Option<OpenText>,
    finished: bool,
}

impl ResponsesSseEncoder {
    pub fn new(meta: ResponseMeta) -> Self {
        Self {
            meta,
            sequence: 0,
            started: false,
            output: Vec::new(),
            open: None,
            finished: false,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn event(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        write_json(out, &data);
        out.extend_from_slice(b"\n\n");
    }

    /// `response.created` and `response.in_progress`, once.
    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.meta.object("in_progress", &[], None, Value::Null);
        self.event(
            out,
            "response.created",
            json!({"response": response.clone()}),
        );
        self.event(out, "response.in_progress", json!({"response": response}));
    }

    fn open_text(&mut self, kind: TextKind, out: &mut Vec<u8>) {
        if self.open.as_ref().is_some_and(|o| o.kind == kind) {
            return;
        }
        self.close(out);
        let index = self.output.len();
        let id = self.meta.item_id(kind.prefix(), index);
        let item = text_item(kind, &id, None, "in_progress");
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        let part = kind.part("");
        self.event(
            out,
            "response.content_part.added",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
        );
        self.open = Some(OpenText {
            kind,
            id,
            index,
            text: String::new(),
        });
    }

    fn text(&mut self, kind: TextKind, text: &str, out: &mut Vec<u8>) {
        if text.is_empty() {
            return;
        }
        self.open_text(kind, out);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.text.push_str(text);
        let mut data = json!({"item_id": open.id, "output_index": open.index, "content_index": 0, "delta": text});
        if kind == TextKind::Message {
            data["logprobs"] = json!([]);
        }
        self.event(out, kind.events().0, data);
    }

    /// Ends the open text item: `completed`, or `incomplete` when the answer failed.
    fn close(&mut self, out: &mut Vec<u8>) {
        self.close_as("completed", out);
    }

    fn close_as(&mut self, status: &str, out: &mut Vec<u8>) {
        let Some(open) = self.open.take() else {
            return;
        };
        let OpenText {
            kind,
            id,
            index,
            text,
        } = open;
        let mut done =
            json!({"item_id": id, "output_index": index, "content_index": 0, "text": text});
        if kind == TextKind::Message {
            done["logprobs"] = json!([]);
        }
        self.event(out, kind.events().1, done);
        let part = kind.part(&text);
        self.event(
            out,
            "response.content_part.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part.clone()}),
        );
        let item = text_item(kind, &id, Some(part), status);
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": item.clone()}),
        );
        self.output.push(item);
    }

    fn call(&mut self, call: &ToolCall, out: &mut Vec<u8>) {
        let index = self.output.len();
        let id = self.meta.item_id("fc", index);
        let added = call_item(&id, call, "", "in_progress");
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        );
        self.event(
            out,
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": call.arguments}),
        );
        self.event(
            out,
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "name": call.name, "arguments": call.arguments}),
        );
        let item = call_item(&id, call, &call.arguments, "completed");
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": item.clone()}),
        );
        self.output.push(item);
    }

    /// Appends the events for one chunk; nothing after the end.
    pub fn push(&mut self, chunk: &Chunk, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.start(out);
        match chunk {
            Chunk::Content { text } => self.text(TextKind::Message, text, out),
            Chunk::Reasoning { text } => self.text(TextKind::Reasoning, text, out),
            Chunk::ToolCalls { calls } => {
                self.close(out);
                for call in calls {
                    self.call(call, out);
                }
            }
            Chunk::Done {
                finish_reason,
                usage,
            } => {
                let status = status_of(*finish_reason);
                self.close_as(item_status(status), out);
                let response = self
                    .meta
                    .object(status, &self.output, Some(usage), Value::Null);
                let kind = match status {
                    "incomplete" => "response.incomplete",
                    _ => "response.completed",
                };
                self.event(out, kind, json!({"response": response}));
                self.finished = true;
            }
        }
    }

    /// A keep-alive while the answer waits (an SSE comment, after the opening events).
    pub fn push_waiting(&mut self, waiting: Waiting, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.start(out);
        waiting_comment(waiting, out);
    }

    /// `response.failed`, which ends the stream, with `code` and `message`.
    pub fn push_failed(&mut self, code: &str, message: &str, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.start(out);
        self.close_as("incomplete", out);
        let error = json!({"code": code, "message": message});
        let response = self.meta.object("failed", &self.output, None, error);
        self.event(out, "response.failed", json!({"response": response}));
        self.finished = true;
    }
}
