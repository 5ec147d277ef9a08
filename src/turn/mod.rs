//! The `Turn`: what every front door (OpenAI, Ollama, `/route`) turns a request into.
//!
//! A turn holds the user's current prompt exactly as typed, the earlier conversation
//! (cleaned of whatever Coordinator added to its own answers, and capped), the thread it
//! belongs to, the model asked for, and the signals the router needs to recognise Open
//! WebUI's background tasks. The stored prompt and the classifier only ever see
//! [`Turn::prompt`]; the history goes to the worker alone.

use serde::Serialize;

use crate::chat::{ChatMessage, ResponseMode, Role, SamplingParams, ToolSpec};
use crate::config::HistoryConfig;
use crate::domain::{ModelName, ParseError, Person, Priority, ThreadId, WorkerName};

pub mod answer;
pub mod decoration;
mod history;

pub use answer::Answer;
pub use decoration::{Decoration, RouteInfo};
pub use history::message_chars;
pub(crate) use history::split_turns as split_history_turns;

/// The earlier conversation that goes to the worker (never to the store or the classifier).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum History {
    #[default]
    None,
    /// Real chat messages, sent to the backend as messages.
    Messages(Vec<ChatMessage>),
    /// A pre-formatted text (the seed's `/route` `history` field), put before the prompt.
    Text(String),
}

impl History {
    pub fn is_empty(&self) -> bool {
        match self {
            Self::None => true,
            Self::Messages(m) => m.is_empty(),
            Self::Text(t) => t.trim().is_empty(),
        }
    }
}

/// Which model the client asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelRequest {
    /// Let the router choose (`auto`, an empty model, or no model field).
    #[default]
    Auto,
    /// A concrete model, optionally pinned to one worker (`model@worker`).
    Named {
        model: ModelName,
        worker: Option<WorkerName>,
    },
}

impl ModelRequest {
    /// Names that mean "let the router choose".
    pub const AUTO_NAMES: [&'static str; 2] = ["auto", "coordinator"];

    pub fn parse(s: Option<&str>) -> Result<Self, ParseError> {
        let s = s.map(str::trim).unwrap_or("");
        let base = s.strip_suffix(":latest").unwrap_or(s);
        if s.is_empty() || Self::AUTO_NAMES.contains(&base) {
            return Ok(Self::Auto);
        }
        match s.rsplit_once('@') {
            Some((m, w)) => Ok(Self::Named {
                model: ModelName::parse(m)?,
                worker: Some(WorkerName::parse(w)?),
            }),
            None => Ok(Self::Named {
                model: ModelName::parse(s)?,
                worker: None,
            }),
        }
    }
}

/// Facts about the request's shape, for recognising internal tasks without trusting text.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestSignals {
    /// The raw `X-OpenWebUI-Task` header, when present.
    pub task_header: Option<String>,
    /// All messages in the request, of every role.
    pub message_count: usize,
    pub user_message_count: usize,
    /// The first system message's text, if any.
    pub system: Option<String>,
    /// Whether the client asked for a streamed answer.
    pub response: ResponseMode,
    pub max_tokens: Option<u32>,
    pub has_tools: bool,
}

/// One request, in the form the router, the store and the composer share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    /// The last user message, exactly as the user wrote it.
    pub prompt: String,
    /// Images attached to the last user message (base64, no data-URI prefix).
    pub images: Vec<String>,
    /// System messages the client sent, passed on to the worker.
    pub system: Vec<String>,
    pub history: History,
    /// Earlier messages `[history]` limits left out of `history` (recorded on the row).
    pub history_dropped: usize,
    /// Messages after the prompt in this same turn (an assistant's tool calls and their
    /// results, or a partial answer to continue), in order; empty for a plain chat turn.
    pub continuation: Vec<ChatMessage>,
    /// Whose turn it is (see [`ClientContext::person`]).
    pub person: Person,
    pub thread_id: ThreadId,
    pub model: ModelRequest,
    pub tools: Vec<ToolSpec>,
    pub params: SamplingParams,
    pub signals: RequestSignals,
    /// False when the client asked that this turn not be remembered.
    pub remember: bool,
    /// How the client takes the answer: [`ResponseMode::Whole`] (a chat request without
    /// `stream`) has the backend asked for it in one piece too. Streamed where answers are
    /// streamed or watched as they come (`POST /route` and its events).
    pub response: ResponseMode,
    /// The priority the client asked for (`X-Coordinator-Priority`, `/route`'s
    /// `priority`); the service decides when it says none ([`Priority::of_turn`]).
    pub priority: Option<Priority>,
    /// Whether the row keeps [`Turn::conversation`], for a client that continues it by
    /// reference (the Responses API's `previous_response_id`); false from [`build_turn`].
    pub keep_conversation: bool,
}

impl Turn {
    /// The conversation as the turn has it, without system messages: the history it kept,
    /// the prompt with its images, and what followed the prompt.
    pub fn conversation(&self) -> Vec<ChatMessage> {
        let mut messages = match &self.history {
            History::Messages(m) => m.clone(),
            History::Text(t) => vec![ChatMessage::user(t.clone())],
            History::None => Vec::new(),
        };
        let mut user = ChatMessage::user(self.prompt.clone());
        user.images = self.images.clone();
        messages.push(user);
        messages.extend(self.continuation.iter().cloned());
        messages
    }

    /// [`Turn::conversation`] as the JSON the row keeps, when the turn keeps it.
    pub fn conversation_json(&self) -> Option<String> {
        self.keep_conversation
            .then(|| serde_json::to_string(&self.conversation()).ok())
            .flatten()
    }
}

/// A request could not become a turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error("messages: there is no user message")]
    NoUserMessage,
    #[error("messages: the last user message is empty")]
    EmptyPrompt,
    #[error("model: {0}")]
    Model(ParseError),
    /// `field` is where the id came from: the `X-OpenWebUI-Chat-Id` header or the body's
    /// `chat_id`.
    #[error("{field}: {error}")]
    Thread {
        field: &'static str,
        error: ParseError,
    },
}

impl TurnError {
    /// The field of the request the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            Self::NoUserMessage | Self::EmptyPrompt => "messages",
            Self::Model(_) => "model",
            Self::Thread { field, .. } => field,
        }
    }
}

/// What a front door knows about a chat request, before it is a turn.
#[derive(Debug, Clone, Default)]
pub struct TurnInput {
    pub messages: Vec<ChatMessage>,
    pub model: Option<String>,
    /// How the client asked for the answer; the turn and its job keep it.
    pub response: ResponseMode,
    pub params: SamplingParams,
    pub tools: Vec<ToolSpec>,
    /// What the front door read from the HTTP request besides the body.
    pub client: ClientContext,
    /// A `chat_id` / `metadata.chat_id` field in the body.
    pub body_chat_id: Option<String>,
    /// Whether the request lets this turn be remembered (its headers and, for `/route`, its
    /// body); the thread's own rule is applied to the turn by the front door.
    pub remember: bool,
}

/// Headers and identity a front door read from the HTTP request, shared by every wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientContext {
    /// `X-OpenWebUI-Chat-Id` header.
    pub chat_id_header: Option<String>,
    /// `X-OpenWebUI-Task` header.
    pub task_header: Option<String>,
    /// Who the client is (API key, user header, or peer), for the fallback thread hash.
    pub client_identity: Option<String>,
    /// False when the request says `X-Coordinator-Remember: false` (or `0`, `no`, `off`);
    /// the front door folds it into [`TurnInput::remember`].
    pub remember: bool,
    /// The person the API key names (or, for a trusted front end's key, the user it
    /// vouches for): the owner of the turn's task and memories.
    pub person: Person,
    /// `X-Coordinator-Priority`, when the request sets it.
    pub priority: Option<Priority>,
}

/// A client that says nothing: no Open WebUI headers, no identity, memory allowed.
impl Default for ClientContext {
    fn default() -> Self {
        Self {
            chat_id_header: None,
            task_header: None,
            client_identity: None,
            remember: true,
            person: Person::default(),
            priority: None,
        }
    }
}

/// Builds a turn from a chat request: current prompt, cleaned and capped history, thread.
///
/// The prompt is the last user message. Messages after it (an assistant's tool calls and
/// their results, in an agent loop) are the turn's [`Turn::continuation`]; messages
/// before it become the history. The prompt itself is never part of the history.
pub fn build_turn(input: TurnInput, history: &HistoryConfig) -> Result<Turn, TurnError> {
    let last_user = input
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .ok_or(TurnError::NoUserMessage)?;
    let current = &input.messages[last_user];
    if current.content.trim().is_empty() && current.images.is_empty() {
        return Err(TurnError::EmptyPrompt);
    }
    let model = ModelRequest::parse(input.model.as_deref()).map_err(TurnError::Model)?;
    let thread_id = thread_id(&input)?;
    let system: Vec<String> = input
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.clone())
        .collect();
    let signals = RequestSignals {
        task_header: input
            .client
            .task_header
            .clone()
            .filter(|h| !h.trim().is_empty()),
        message_count: input.messages.len(),
        user_message_count: input
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count(),
        system: system.first().cloned(),
        response: input.response,
        max_tokens: input.params.max_tokens,
        has_tools: !input.tools.is_empty(),
    };
    let (history, history_dropped) = history::prepare(&input.messages[..last_user], history);
    let mut messages = input.messages;
    let continuation: Vec<ChatMessage> = messages
        .drain(last_user + 1..)
        .filter(|m| m.role != Role::System)
        .collect();
    let prompt = std::mem::take(&mut messages[last_user].content);
    let images = std::mem::take(&mut messages[last_user].images);
    Ok(Turn {
        prompt,
        images,
        system,
        history,
        history_dropped,
        continuation,
        person: input.client.person.clone(),
        thread_id,
        model,
        tools: input.tools,
        params: input.params,
        signals,
        remember: input.remember,
        response: input.response,
        priority: input.client.priority,
        keep_conversation: false,
    })
}

/// The header, then the body field, then a stable hash of the first user message and the client.
fn thread_id(input: &TurnInput) -> Result<ThreadId, TurnError> {
    let named = |field: &'static str, id: &str| {
        ThreadId::parse(id).map_err(|error| TurnError::Thread { field, error })
    };
    if let Some(h) = input
        .client
        .chat_id_header
        .as_deref()
        .filter(|h| !h.trim().is_empty())
    {
        return named("X-OpenWebUI-Chat-Id", h);
    }
    if let Some(b) = input
        .body_chat_id
        .as_deref()
        .filter(|b| !b.trim().is_empty())
    {
        return named("chat_id", b);
    }
    use sha2::{Digest, Sha256};
    let first_user = input
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
        .unwrap_or("");
    let mut h = Sha256::new();
    h.update(
        input
            .client
            .client_identity
            .as_deref()
            .unwrap_or("")
            .as_bytes(),
    );
    h.update([0]);
    h.update(first_user.as_bytes());
    let digest = h.finalize();
    let id = format!("h-{}", crate::domain::hex(&digest[..12]));
    // A hash always makes a valid id; were it not one, the messages it came from are named.
    named("messages", &id)
}

#[cfg(test)]
mod tests;
