//! The Ollama-compatible wire format: `POST /api/chat` and `POST /api/generate` (NDJSON
//! stream or one object), `POST /api/embed` and `/api/embeddings`, `POST /api/show`,
//! `GET /api/tags`, `GET /api/ps`, `GET /api/version`, `GET /`, and the `{"error":"..."}`
//! body.
//!
//! Pure types and encoders, no HTTP. Open WebUI's Ollama connection needs every `/api/tags`
//! entry to carry both `model` and `name`. Durations are in nanoseconds throughout.

pub mod embed;
pub mod generate;
pub mod generate_stream;
pub mod handlers;
pub mod manage;
pub mod request;
pub mod stream;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use request::ChatRequest;
pub use stream::{NdjsonEncoder, Timings, encode_chat_response};

/// An Ollama timestamp (`created_at`, `modified_at`, `expires_at`): RFC 3339 with nanoseconds.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// `GET /api/tags`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagsResponse {
    pub models: Vec<ModelTag>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelTag {
    pub name: String,
    pub model: String,
    pub modified_at: String,
    pub size: u64,
    pub digest: String,
    pub details: ModelDetails,
}

impl ModelTag {
    /// An entry for a model Coordinator offers; `digest` is derived from the name so it is
    /// stable, `size` is 0 unless a backend reported one.
    pub fn new(name: impl Into<String>, modified_at: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            model: name.clone(),
            digest: name_digest(&name),
            name,
            modified_at: modified_at.into(),
            size: 0,
            details: ModelDetails::default(),
        }
    }
}

/// A hex SHA-256 of a model name, standing in for a blob digest.
fn name_digest(name: &str) -> String {
    crate::domain::hex(&Sha256::digest(name.as_bytes()))
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDetails {
    pub parent_model: String,
    pub format: String,
    pub family: String,
    pub families: Option<Vec<String>>,
    pub parameter_size: String,
    pub quantization_level: String,
}

/// `GET /api/ps`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PsResponse {
    pub models: Vec<RunningModel>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningModel {
    pub name: String,
    pub model: String,
    pub size: u64,
    pub digest: String,
    pub details: ModelDetails,
    pub expires_at: String,
    pub size_vram: u64,
}

/// `GET /api/version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionResponse {
    pub version: String,
}

/// The Ollama error body `{"error":"..."}`, also one NDJSON line mid-stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

impl ErrorBody {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
        }
    }
}

#[cfg(test)]
mod tests;
