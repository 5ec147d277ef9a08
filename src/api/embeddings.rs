//! What the embedding routes of both front doors share (`/api/embed`, `/api/embeddings`,
//! `/v1/embeddings`): the inputs as a string or a list of strings, and how a failed
//! embedding is told in the API's error shape. The work is [`AppState::embed`].

use axum::http::{HeaderName, HeaderValue};
use serde::Deserialize;

use super::error::ApiError;
use super::http::BodyError;
use crate::lang::Lang;
use crate::service::embed::{EmbedError, Embeddings};

/// `x-coordinator-task-id`, `-model` and `-worker` of an embedding's answer.
pub fn headers(done: &Embeddings) -> Vec<(HeaderName, HeaderValue)> {
    [
        ("x-coordinator-task-id", done.task_id.to_string()),
        ("x-coordinator-model", done.model.to_string()),
        ("x-coordinator-worker", done.worker.to_string()),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((HeaderName::from_static(k), HeaderValue::from_str(&v).ok()?)))
    .collect()
}

/// `input`: one string or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Input {
    One(String),
    Many(Vec<String>),
}

impl Input {
    /// The texts, refusing none at all and empty ones (named by `field`).
    pub fn into_texts(self, field: &str) -> Result<Vec<String>, BodyError> {
        let texts = match self {
            Self::One(t) => vec![t],
            Self::Many(list) => list,
        };
        if texts.is_empty() {
            return Err(BodyError::new(field, "give at least one text to embed"));
        }
        if let Some(i) = texts.iter().position(|t| t.is_empty()) {
            return Err(BodyError::new(format!("{field}[{i}]"), "the text is empty"));
        }
        Ok(texts)
    }
}

/// The inputs read as a list: `input` is a string or an array of strings.
pub fn texts(input: Option<Input>, field: &str) -> Result<Vec<String>, BodyError> {
    input
        .ok_or_else(|| BodyError::new(field, "missing"))?
        .into_texts(field)
}

/// `dimensions` must be above 0.
pub fn dimensions(n: Option<i64>, field: &str) -> Result<Option<u32>, BodyError> {
    match n {
        None => Ok(None),
        Some(n) if n > 0 => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
        Some(_) => Err(BodyError::new(field, "must be above 0")),
    }
}

impl From<EmbedError> for ApiError {
    fn from(e: EmbedError) -> Self {
        match e {
            e @ (EmbedError::Model(_) | EmbedError::NoModel) => Self::BadRequest {
                message: e.to_string(),
                param: Some("model".to_owned()),
            },
            e @ EmbedError::NotServed(_) => Self::UnknownModel(e.to_string()),
            EmbedError::Backend { task_id, error } => Self::Upstream {
                message: error.to_string(),
                task_id: Some(task_id),
            },
            e @ EmbedError::Client { .. } => Self::Internal(e.to_string()),
            EmbedError::Store(s) => {
                tracing::error!(error = %s, "task store failed; the embedding was refused");
                Self::StoreUnavailable { lang: Lang::En }
            }
            EmbedError::ShuttingDown => Self::ShuttingDown {
                task_id: None,
                lang: Lang::En,
            },
            EmbedError::Limited(refusal) => Self::Limited {
                refusal,
                lang: Lang::En,
            },
        }
    }
}
