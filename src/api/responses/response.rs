//! The Responses API's answers: the whole `response` object, and its stream of events
//! (`response.created`, `response.in_progress`, `response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta`, `…done`,
//! `response.function_call_arguments.delta`, …, `response.completed`). Pure encoders
//! writing into the caller's buffer.
//!
//! Output items: a `reasoning` item when the model thought, a `message` with one
//! `output_text` part, and one `function_call` item per tool call, in the order the
//! model produced them.

use serde_json::{Value, json};

use crate::api::http::write_json;
use crate::api::openai::stream::waiting_comment;
use crate::api::wait::Waiting;
use crate::chat::{Chunk, FinishReason, ToolCall, Usage};
use crate::domain::TaskId;
use crate::turn::Answer;

/// The request's settings a response object repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct Echo {
    pub instructions: Option<String>,
    pub previous_response_id: Option<String>,
    pub store: bool,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub tools: Vec<Value>,
    pub tool_choice: Value,
}

impl Default for Echo {
    fn default() -> Self {
        Self {
            instructions: None,
            previous_response_id: None,
            store: true,
            temperature: None,
            top_p: None,
            max_output_tokens: None,
            tools: Vec::new(),
            tool_choice: json!("auto"),
        }
    }
}

/// What every event of one response carries: its ids, time, model and the echo.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseMeta {
    pub task_id: TaskId,
    pub created_at: i64,
    pub model: String,
    pub echo: Echo,
}

/// A response id: `resp_` and the task's id, so the store finds the turn again.
pub fn response_id(task_id: TaskId) -> String {
    format!("resp_{task_id}")
}

/// The task a response id names, if it is one of ours.
pub fn task_of_response(id: &str) -> Option<TaskId> {
    TaskId::parse(id.strip_prefix("resp_")?).ok()
}

impl ResponseMeta {
    fn item_id(&self, prefix: &str, index: usize) -> String {
        format!("{prefix}_{}_{index}", self.task_id)
    }

    /// The response object in `status`, with `output` and, once known, `usage`.
    fn object(&self, status: &str, output: &[Value], usage: Option<&Usage>, error: Value) -> Value {
        let incomplete = match status {
            "incomplete" => json!({"reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        let e = &self.echo;
        json!({
            "id": response_id(self.task_id),
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": e.instructions,
            "max_output_tokens": e.max_output_tokens,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": e.previous_response_id,
            "reasoning": {"effort": null, "summary": null},
            "store": e.store,
            "temperature": e.temperature,
            "text": {"format": {"type": "text"}},
            "tool_choice": e.tool_choice,
            "tools": e.tools,
            "top_p": e.top_p,
            "truncation": "disabled",
            "usage": usage.map(usage_body),
            "user": null,
            "metadata": {},
        })
    }
}

fn usage_body(u: &Usage) -> Value {
    json!({
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    })
}

fn status_of(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "incomplete",
        FinishReason::Stop | FinishReason::ToolCalls => "completed",
    }
}

/// An output item's status in a response of `status`: a text cut short is incomplete.
fn item_status(status: &str) -> &'static str {
    match status {
        "incomplete" => "incomplete",
        _ => "completed",
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

fn reasoning_part(text: &str) -> Value {
    json!({"type": "reasoning_text", "text": text})
}

/// A message or reasoning item with its one part (none while it is in progress).
fn text_item(kind: TextKind, id: &str, part: Option<Value>, status: &str) -> Value {
    let content: Vec<Value> = part.into_iter().collect();
    match kind {
        TextKind::Message => json!({
            "type": "message", "id": id, "status": status, "role": "assistant", "content": content,
        }),
        TextKind::Reasoning => json!({
            "type": "reasoning", "id": id, "status": status, "summary": [], "content": content,
        }),
    }
}

fn call_item(id: &str, call: &ToolCall, arguments: &str, status: &str) -> Value {
    json!({
        "type": "function_call", "id": id, "status": status, "call_id": call.id,
        "name": call.name, "arguments": arguments,
    })
}

/// The whole answer as one response object.
pub fn encode_response(out: &mut Vec<u8>, meta: &ResponseMeta, answer: &Answer) {
    let mut output = Vec::new();
    if !answer.reasoning.is_empty() {
        let id = meta.item_id("rs", output.len());
        let part = reasoning_part(&answer.reasoning);
        output.push(text_item(TextKind::Reasoning, &id, Some(part), "completed"));
    }
    let status = status_of(answer.finish_reason_or_stop());
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        let id = meta.item_id("msg", output.len());
        let part = text_part(&answer.content);
        let done = item_status(status);
        output.push(text_item(TextKind::Message, &id, Some(part), done));
    }
    for call in &answer.tool_calls {
        let id = meta.item_id("fc", output.len());
        output.push(call_item(&id, call, &call.arguments, "completed"));
    }
    let status = status_of(answer.finish_reason_or_stop());
    write_json(
        out,
        &meta.object(status, &output, Some(&answer.usage), Value::Null),
    );
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Message,
    Reasoning,
}

impl TextKind {
    fn prefix(self) -> &'static str {
        match self {
            Self::Message => "msg",
            Self::Reasoning => "rs",
        }
    }

    fn part(self, text: &str) -> Value {
        match self {
            Self::Message => text_part(text),
            Self::Reasoning => reasoning_part(text),
        }
    }

    /// The event names of this kind's text: `(delta, done)`.
    fn events(self) -> (&'static str, &'static str) {
        match self {
            Self::Message => ("response.output_text.delta", "response.output_text.done"),
            Self::Reasoning => (
                "response.reasoning_text.delta",
                "response.reasoning_text.done",
            ),
        }
    }
}

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
