//! Non-streamed OpenAI responses: `chat.completion`, `GET /v1/models` and the error body,
//! plus the serialisable pieces the SSE encoder shares.

use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use super::write_json;
use crate::chat::{ToolCall, Usage};
use crate::domain::TaskId;
use crate::turn::Answer;

/// What every response for one task repeats: id, creation time, model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionMeta {
    /// `chatcmpl-<task id>`.
    pub id: String,
    /// Unix seconds.
    pub created: i64,
    pub model: String,
}

impl CompletionMeta {
    pub fn new(task_id: TaskId, created: i64, model: impl Into<String>) -> Self {
        Self {
            id: format!("chatcmpl-{task_id}"),
            created,
            model: model.into(),
        }
    }
}

#[derive(Serialize)]
pub(crate) struct UsageBody {
    prompt_tokens: u32,
    completion_tokens: u32,
    total_tokens: u32,
}

impl From<&Usage> for UsageBody {
    fn from(u: &Usage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.prompt_tokens.saturating_add(u.completion_tokens),
        }
    }
}

/// Tool calls as OpenAI writes them; `first_index` adds `index` (stream deltas only).
pub(crate) struct ToolCallsOut<'a> {
    pub calls: &'a [ToolCall],
    pub first_index: Option<u32>,
}

impl Serialize for ToolCallsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        #[derive(Serialize)]
        struct Call<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            index: Option<u32>,
            id: &'a str,
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        let mut seq = s.serialize_seq(Some(self.calls.len()))?;
        for (i, c) in (0u32..).zip(self.calls) {
            seq.serialize_element(&Call {
                index: self.first_index.map(|f| f.saturating_add(i)),
                id: &c.id,
                kind: "function",
                function: Function {
                    name: &c.name,
                    arguments: &c.arguments,
                },
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct CompletionBody<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: [CompletionChoice<'a>; 1],
    usage: UsageBody,
}

#[derive(Serialize)]
struct CompletionChoice<'a> {
    index: u32,
    message: AssistantMessage<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct AssistantMessage<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<ToolCallsOut<'a>>,
}

/// Appends a whole `chat.completion` body for `answer` to `out`. `content` is null only
/// when the answer is tool calls alone.
pub fn encode_completion(out: &mut Vec<u8>, meta: &CompletionMeta, answer: &Answer) {
    let only_tools = answer.content.is_empty() && !answer.tool_calls.is_empty();
    let body = CompletionBody {
        id: &meta.id,
        object: "chat.completion",
        created: meta.created,
        model: &meta.model,
        choices: [CompletionChoice {
            index: 0,
            message: AssistantMessage {
                role: "assistant",
                content: (!only_tools).then_some(answer.content.as_str()),
                reasoning_content: (!answer.reasoning.is_empty())
                    .then_some(answer.reasoning.as_str()),
                tool_calls: (!answer.tool_calls.is_empty()).then_some(ToolCallsOut {
                    calls: &answer.tool_calls,
                    first_index: None,
                }),
            },
            logprobs: None,
            finish_reason: answer.finish_reason_or_stop().as_str(),
        }],
        usage: UsageBody::from(&answer.usage),
    };
    write_json(out, &body);
}

/// `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelList {
    pub object: String,
    pub data: Vec<ModelEntry>,
}

impl ModelList {
    pub fn new(data: Vec<ModelEntry>) -> Self {
        Self {
            object: "list".to_owned(),
            data,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEntry {
    pub id: String,
    pub object: String,
    /// Unix seconds.
    pub created: i64,
    pub owned_by: String,
}

impl ModelEntry {
    pub fn new(id: impl Into<String>, created: i64, owned_by: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            object: "model".to_owned(),
            created,
            owned_by: owned_by.into(),
        }
    }
}

/// The OpenAI error body `{"error":{"message","type","code"}}`, also sent as an SSE event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub message: String,
    /// `invalid_request_error`, `server_error`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub code: Option<String>,
}

impl ErrorBody {
    pub fn new(message: impl Into<String>, kind: impl Into<String>, code: Option<&str>) -> Self {
        Self {
            error: ErrorDetail {
                message: message.into(),
                kind: kind.into(),
                code: code.map(str::to_owned),
            },
        }
    }

    /// A 400 for a body that could not be understood; the message names the field.
    pub fn invalid_request(error: &super::BodyError) -> Self {
        Self::new(error.to_string(), "invalid_request_error", None)
    }
}

/// Appends an error body to `out`.
pub fn encode_error(out: &mut Vec<u8>, error: &ErrorBody) {
    write_json(out, error);
}
