//! LLM backends: Ollama and OpenAI-compatible servers, behind one closed enum.
//!
//! Workers call [`Backend::chat`] and get a stream of [`Chunk`]s; the registry calls
//! [`Backend::list_models`] and [`Backend::loaded_models`] to keep the catalog fresh.

pub mod activity;
pub mod classify;
pub mod clock;
#[cfg(test)]
mod embed_tests;
pub mod keep_alive;
pub mod ollama;
pub mod openai;
pub mod perf;
mod public;
pub mod registry;
pub mod slots;
#[cfg(test)]
mod text_tests;
mod windows;
mod wire;
#[cfg(test)]
mod wire_props;

use std::time::Duration;

use futures::stream::BoxStream;
use serde::Serialize;

pub use registry::{BackendHandle, Registry, WorkerStatus};

use crate::chat::{ChatMessage, Chunk, Role, SamplingParams, ToolSpec};
use crate::config::{BackendConfig, BackendKind, TimeoutsConfig};
use crate::domain::{ModelName, WorkerName};

/// One generation request, as a worker sends it to a backend.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct BackendRequest {
    pub model: ModelName,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub params: SamplingParams,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
}

impl BackendRequest {
    /// The last user message (the prompt; empty when there is none) and the conversation
    /// before it without system messages: what the web and RAG lanes rewrite a follow-up
    /// from.
    pub fn prompt_and_history(&self) -> (&str, Vec<crate::chat::ChatMessage>) {
        let last_user = self
            .messages
            .iter()
            .rposition(|m| m.role == crate::chat::Role::User);
        let prompt = last_user.map_or("", |i| self.messages[i].content.as_str());
        let history = last_user
            .map(|i| {
                self.messages[..i]
                    .iter()
                    .filter(|m| m.role != crate::chat::Role::System)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        (prompt, history)
    }

    /// The prompt's tokens as [`crate::context::request_tokens`] estimates them (one per
    /// CJK character), for placement and the window.
    pub fn estimated_prompt_tokens(&self) -> u32 {
        crate::context::request_tokens(&self.messages)
    }

    /// The request as a text completion's parts: the last user message is the prompt
    /// (with its images), the system messages joined are the system text.
    pub(crate) fn text_parts(&self) -> TextParts<'_> {
        let user = self.messages.iter().rev().find(|m| m.role == Role::User);
        let system: Vec<&str> = self
            .messages
            .iter()
            .filter(|m| m.role == Role::System && !m.content.is_empty())
            .map(|m| m.content.as_str())
            .collect();
        TextParts {
            prompt: user.map_or("", |m| m.content.as_str()),
            system: (!system.is_empty()).then(|| system.join("\n\n")),
            images: user.map_or(&[], |m| m.images.as_slice()),
        }
    }

    /// The same request with the window `num_ctx` (Ollama's `options.num_ctx`).
    pub fn with_num_ctx(&self, num_ctx: u32) -> Self {
        let mut sized = self.clone();
        sized.params.num_ctx = Some(num_ctx);
        sized
    }
}

/// A text completion's parts (see [`BackendRequest::text_parts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextParts<'a> {
    pub prompt: &'a str,
    pub system: Option<String>,
    pub images: &'a [String],
}

/// A model a backend reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInfo {
    pub name: ModelName,
    /// Whether the model accepts `tools`; `None` when the backend does not say.
    pub tools: Option<bool>,
    /// The model's maximum window (Ollama's `/api/show`); `None` when the backend does not say.
    pub context_length: Option<u32>,
    /// Bytes of its weights (Ollama's `/api/tags` `size`); `None` when the backend does not
    /// say. Placement scales what a machine showed of one model to another by it.
    pub size: Option<u64>,
}

/// A model resident on a backend (`/api/ps`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub model: ModelName,
    /// The window it was loaded with, when the backend says.
    pub num_ctx: Option<u32>,
    /// When the backend unloads it unless it is used meanwhile (Ollama's `expires_at`),
    /// when it says.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

pub type ChunkStream = BoxStream<'static, Result<Chunk, BackendError>>;

/// What went wrong talking to a backend. Every variant names the backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("cannot connect to backend {backend} at {url}: {detail}")]
    Connect {
        backend: String,
        url: String,
        detail: String,
    },
    #[error("backend {backend} did not answer within {after_ms} ms")]
    Timeout { backend: String, after_ms: u64 },
    #[error("backend {backend} is busy (HTTP {status}): {message}")]
    Busy {
        backend: String,
        status: u16,
        message: String,
    },
    #[error("backend {backend} rejected the request (HTTP {status}): {message}")]
    Rejected {
        backend: String,
        status: u16,
        message: String,
    },
    #[error("backend {backend} failed (HTTP {status}): {message}")]
    Server {
        backend: String,
        status: u16,
        message: String,
    },
    #[error("backend {backend} sent something unreadable: {message}")]
    Protocol { backend: String, message: String },
    #[error("backend {backend} stopped sending for {after_s} s in the middle of an answer")]
    Stalled { backend: String, after_s: u64 },
    #[error("backend {backend} reported an error mid-stream: {message}")]
    MidStream { backend: String, message: String },
}

impl BackendError {
    /// Whether another worker could reasonably succeed where this one failed.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Self::Rejected { .. })
    }
}

/// A configured backend. Closed set of kinds, so an enum.
#[derive(Debug, Clone)]
pub enum Backend {
    Ollama(ollama::OllamaClient),
    OpenAi(openai::OpenAiClient),
}

/// Settings every client shares.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    pub name: WorkerName,
    pub base_url: reqwest::Url,
    pub connect_timeout: Duration,
    /// Longest silence between two chunks (and before the first) of a stream.
    pub idle_timeout: Duration,
    /// Longest wait for a whole answer asked for in one piece (`stream: false`).
    pub answer_timeout: Duration,
    /// Longest wait for a small answer about the machine (its models, those it holds
    /// loaded, a model's details), which never waits for a generation: a machine that
    /// takes connections but does not answer (a hung server) holds start-up and every look
    /// at it this long at most, not `idle_timeout`.
    pub look_timeout: Duration,
    pub api_key: Option<String>,
}

/// [`ClientSettings::look_timeout`] of every configured backend.
pub const LOOK_TIMEOUT: Duration = Duration::from_secs(10);

impl Backend {
    pub fn from_config(cfg: &BackendConfig, timeouts: &TimeoutsConfig) -> anyhow::Result<Self> {
        let name = WorkerName::parse(&cfg.name)?;
        let api_key = match &cfg.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                anyhow::anyhow!("backend {name}: environment variable {var} is not set")
            })?),
            None => None,
        };
        Self::build(name, cfg.kind, &cfg.url, api_key, timeouts)
    }

    /// A client for a worker known by its status (its heartbeat, in cluster mode): this
    /// process's `[[backends]]` entry of that name when there is one (its API key too),
    /// else the kind and URL the worker reported, without a key.
    pub fn for_worker(
        status: &WorkerStatus,
        config: &crate::config::Config,
    ) -> anyhow::Result<Self> {
        match config
            .backends
            .iter()
            .find(|b| b.name == status.name.as_str())
        {
            Some(cfg) => Self::from_config(cfg, &config.timeouts),
            None => Self::build(
                status.name.clone(),
                status.kind,
                &status.url,
                None,
                &config.timeouts,
            ),
        }
    }

    fn build(
        name: WorkerName,
        kind: BackendKind,
        url: &str,
        api_key: Option<String>,
        timeouts: &TimeoutsConfig,
    ) -> anyhow::Result<Self> {
        let mut base_url = reqwest::Url::parse(url)?;
        if !base_url.path().ends_with('/') {
            let path = format!("{}/", base_url.path());
            base_url.set_path(&path);
        }
        let settings = ClientSettings {
            name,
            base_url,
            connect_timeout: Duration::from_millis(timeouts.connect_ms),
            idle_timeout: Duration::from_secs(timeouts.stream_idle_s),
            answer_timeout: Duration::from_secs(timeouts.answer_s),
            look_timeout: LOOK_TIMEOUT,
            api_key,
        };
        Ok(match kind {
            BackendKind::Ollama => Self::Ollama(ollama::OllamaClient::new(settings)?),
            BackendKind::Openai => Self::OpenAi(openai::OpenAiClient::new(settings)?),
        })
    }

    pub fn settings(&self) -> &ClientSettings {
        match self {
            Self::Ollama(c) => c.settings(),
            Self::OpenAi(c) => c.settings(),
        }
    }

    pub fn name(&self) -> &WorkerName {
        &self.settings().name
    }

    pub fn kind(&self) -> BackendKind {
        match self {
            Self::Ollama(_) => BackendKind::Ollama,
            Self::OpenAi(_) => BackendKind::Openai,
        }
    }

    /// The models the backend serves (`/api/tags`, `/v1/models`).
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, BackendError> {
        match self {
            Self::Ollama(c) => c.list_models().await,
            Self::OpenAi(c) => c.list_models().await,
        }
    }

    /// The models loaded in memory right now (`/api/ps`); empty where the kind cannot tell.
    pub async fn loaded_models(&self) -> Result<Vec<Loaded>, BackendError> {
        match self {
            Self::Ollama(c) => c.loaded_models().await,
            Self::OpenAi(_) => Ok(Vec::new()),
        }
    }

    /// How far the server's clock reads ahead of this one's (negative: behind), where the
    /// kind tells times on its own clock and an answer has shown it (Ollama's `/api/ps`).
    pub fn clock_ahead(&self) -> Option<chrono::TimeDelta> {
        match self {
            Self::Ollama(c) => c.clock_ahead(),
            Self::OpenAi(_) => None,
        }
    }

    /// Embeds `inputs` with `model` (Ollama `POST /api/embed`, OpenAI-compatible
    /// `POST embeddings`): one vector per input, in order, as the backend made them.
    pub async fn embed(
        &self,
        model: &ModelName,
        inputs: &[String],
    ) -> Result<Vec<Vec<f32>>, BackendError> {
        self.embed_sized(model, inputs, None).await
    }

    /// [`embed`](Self::embed) with the vectors' size asked for (`dimensions`, which both
    /// APIs take; a model that cannot shorten its vectors refuses or ignores it).
    pub async fn embed_sized(
        &self,
        model: &ModelName,
        inputs: &[String],
        dimensions: Option<u32>,
    ) -> Result<Vec<Vec<f32>>, BackendError> {
        match self {
            Self::Ollama(c) => c.embed(model, inputs, dimensions).await,
            Self::OpenAi(c) => c.embed(model, inputs, dimensions).await,
        }
    }

    /// What the backend tells of a model (Ollama's `POST /api/show`, as it answers);
    /// `None` for a kind whose API has no such call.
    pub async fn show(&self, model: &ModelName) -> Result<Option<serde_json::Value>, BackendError> {
        match self {
            Self::Ollama(c) => c.show_json(model).await.map(Some),
            Self::OpenAi(_) => Ok(None),
        }
    }

    /// Starts a streamed generation. Errors before the first chunk come back here; later
    /// ones come in the stream.
    pub async fn chat(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        match self {
            Self::Ollama(c) => c.chat(req).await,
            Self::OpenAi(c) => c.chat(req).await,
        }
    }

    /// [`Self::chat`] up to its first chunk, returned apart from the rest: a stream that
    /// ends before one is a protocol error. For the lanes that decorate an answer (web,
    /// RAG) and must not emit anything before the backend has answered.
    pub async fn chat_first(
        &self,
        req: &BackendRequest,
    ) -> Result<(crate::chat::Chunk, ChunkStream), BackendError> {
        use futures::StreamExt;
        let mut chunks = self.chat(req).await?;
        match chunks.next().await {
            Some(Ok(first)) => Ok((first, chunks)),
            Some(Err(e)) => Err(e),
            None => Err(BackendError::Protocol {
                backend: self.name().to_string(),
                message: "the stream ended before its first chunk".to_owned(),
            }),
        }
    }

    /// The text of a short answer (its content, not its reasoning or tool calls): for
    /// Coordinator's own small asks of a model (query rewriting, classification, fact
    /// extraction).
    pub async fn answer_text(&self, req: &BackendRequest) -> Result<String, BackendError> {
        use futures::StreamExt;
        let mut stream = self.chat(req).await?;
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            match chunk? {
                crate::chat::Chunk::Content { text: t } => text.push_str(&t),
                crate::chat::Chunk::Done { .. } => break,
                crate::chat::Chunk::Reasoning { .. } | crate::chat::Chunk::ToolCalls { .. } => {}
            }
        }
        Ok(text)
    }

    /// The whole answer in one response (`stream: false`), for clients that do not
    /// stream: the same chunks as [`chat`](Self::chat), but not one per token.
    pub async fn complete(&self, req: &BackendRequest) -> Result<ChunkStream, BackendError> {
        match self {
            Self::Ollama(c) => c.complete(req).await,
            Self::OpenAi(c) => c.complete(req).await,
        }
    }
}
