//! The internal chat model: messages, tool calls, sampling parameters and usage.
//!
//! Every front door (OpenAI, Ollama, `/route`) maps its wire format into these types,
//! and every backend maps them back out. Nothing here knows about HTTP.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// One tool call requested by a model. `arguments` is the JSON text, as OpenAI carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    /// Text content; multi-part content is joined into text at the API boundary.
    pub content: String,
    /// Base64 images (data-URI payloads without the prefix), passed through to backends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool's name on a `tool` message (Ollama's `tool_name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            images: Vec::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
}

/// A tool the client offers the model (OpenAI `{"type":"function","function":{...}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default = "empty_object")]
    pub parameters: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// How the client takes its answer: one value from the request, through the turn, to the
/// worker's job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseMode {
    /// As it is generated, piece by piece (`stream: true`).
    Streamed,
    /// In one piece once complete (`stream: false`, also what a request that does not say
    /// gets by default); the backend is asked for it in one piece too.
    #[default]
    Whole,
}

impl ResponseMode {
    /// A request's `stream` flag: `true` is [`Streamed`](Self::Streamed).
    pub fn from_stream(stream: bool) -> Self {
        if stream { Self::Streamed } else { Self::Whole }
    }

    pub fn is_streamed(self) -> bool {
        self == Self::Streamed
    }
}

/// Sampling parameters common to every backend kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// The shape the answer must take (structured output), when the client asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<AnswerFormat>,
    /// How long an Ollama backend keeps the model loaded after this turn (Ollama's
    /// `keep_alive`: a duration string or seconds). OpenAI-compatible servers have no such
    /// setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<Value>,
    /// Whether, or how hard, a reasoning model thinks first: `true`/`false` or a level
    /// (`low`, `medium`, `high`, `max`). A level reaches OpenAI-compatible servers as
    /// `reasoning_effort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<Think>,
    /// Whether the model may, must, or must call one named tool (OpenAI's `tool_choice`),
    /// when the client said; only with tools (`none` drops the tools instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// The context window in tokens (Ollama's `options.num_ctx`): the client's own when it
    /// set one; a worker fills it in for Ollama backends (see [`crate::context`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<u32>,
    /// Set when the client asked for a text completion rather than a chat answer
    /// (Ollama's `POST /api/generate`, OpenAI's legacy `POST /v1/completions`): the
    /// backend gets its own completion endpoint where the form needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextForm>,
}

/// How a text completion is asked for: the prompt is the turn's prompt, the system
/// messages its `system`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextForm {
    /// Text after the cursor: the model fills in between the prompt and it
    /// (fill-in-the-middle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// The prompt goes to the model exactly as written, with no chat template.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raw: bool,
}

impl TextForm {
    /// Whether a chat cannot say it: a suffix or a raw prompt needs a completion endpoint.
    pub fn needs_completion_endpoint(&self) -> bool {
        self.raw || self.suffix.is_some()
    }
}

/// OpenAI's `tool_choice` beyond `none`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "choice")]
pub enum ToolChoice {
    /// The model decides (OpenAI's default when there are tools).
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must call this function.
    Function { name: String },
}

/// A reasoning request (Ollama's `think`, OpenAI's `reasoning_effort`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Think {
    On(bool),
    Level(String),
}

impl Think {
    /// The levels both kinds of server understand.
    pub const LEVELS: [&'static str; 4] = ["low", "medium", "high", "max"];

    /// Reads `think` / `reasoning_effort` as a client sent it; `None` if it is neither a
    /// bool nor a known level.
    pub fn parse(v: &Value) -> Option<Self> {
        match v {
            Value::Bool(b) => Some(Self::On(*b)),
            Value::String(s) if Self::LEVELS.contains(&s.as_str()) => Some(Self::Level(s.clone())),
            _ => None,
        }
    }
}

/// A structured-output request, in the terms both backend kinds share: OpenAI's
/// `response_format` (`json_object`, `json_schema`) and Ollama's `format` (`"json"`, a
/// schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AnswerFormat {
    /// Any JSON value.
    Json,
    /// JSON that matches `schema`.
    JsonSchema {
        /// The schema's name, as an OpenAI client gave it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        schema: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

/// Token counts and timings reported by a backend at the end of a generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Backend-reported total duration in milliseconds, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_total_ms: Option<u64>,
    /// Ollama's own account of where the time went, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_timings: Option<BackendTimings>,
}

/// Ollama's final-record durations (`load_duration`, `prompt_eval_duration`,
/// `eval_duration`), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BackendTimings {
    pub load_s: f64,
    pub prompt_eval_s: f64,
    pub eval_s: f64,
}

/// Why a generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
        }
    }
}

/// One piece of a streamed generation, as every backend yields it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Chunk {
    Content {
        text: String,
    },
    Reasoning {
        text: String,
    },
    ToolCalls {
        calls: Vec<ToolCall>,
    },
    Done {
        finish_reason: FinishReason,
        usage: Usage,
    },
}
