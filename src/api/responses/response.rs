//! The Responses API's answer as one `response` object, and the output items and response
//! objects its stream ([`super::stream`]) repeats. Pure encoders writing into the caller's
//! buffer.
//!
//! Output items: a `reasoning` item when the model thought, a `message` with one
//! `output_text` part, and one `function_call` item per tool call, in the order the
//! model produced them.

use serde_json::{Value, json};

use crate::api::http::write_json;
use crate::chat::{FinishReason, ToolCall, Usage};
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
    pub(super) fn item_id(&self, prefix: &str, index: usize) -> String {
        format!("{prefix}_{}_{index}", self.task_id)
    }

    /// The response object in `status`, with `output` and, once known, `usage`.
    pub(super) fn object(
        &self,
        status: &str,
        output: &[Value],
        usage: Option<&Usage>,
        error: Value,
    ) -> Value {
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

pub(super) fn status_of(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "incomplete",
        FinishReason::Stop | FinishReason::ToolCalls => "completed",
    }
}

/// An output item's status in a response of `status`: a text cut short is incomplete.
pub(super) fn item_status(status: &str) -> &'static str {
    match status {
        "incomplete" => "incomplete",
        _ => "completed",
    }
}

pub(super) fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

pub(super) fn reasoning_part(text: &str) -> Value {
    json!({"type": "reasoning_text", "text": text})
}

/// A message or reasoning item with its one part (none while it is in progress).
pub(super) fn text_item(kind: TextKind, id: &str, part: Option<Value>, status: &str) -> Value {
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

pub(super) fn call_item(id: &str, call: &ToolCall, arguments: &str, status: &str) -> Value {
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
pub(super) enum TextKind {
    Message,
    Reasoning,
}

impl TextKind {
    pub(super) fn prefix(self) -> &'static str {
        match self {
            Self::Message => "msg",
            Self::Reasoning => "rs",
        }
    }

    pub(super) fn part(self, text: &str) -> Value {
        match self {
            Self::Message => text_part(text),
            Self::Reasoning => reasoning_part(text),
        }
    }

    /// The event names of this kind's text: `(delta, done)`.
    pub(super) fn events(self) -> (&'static str, &'static str) {
        match self {
            Self::Message => ("response.output_text.delta", "response.output_text.done"),
            Self::Reasoning => (
                "response.reasoning_text.delta",
                "response.reasoning_text.done",
            ),
        }
    }
}
