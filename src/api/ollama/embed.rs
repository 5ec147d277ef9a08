//! `POST /api/embed` (`input`: a string or a list, `dimensions`, `truncate`, `options`,
//! `keep_alive`) and the older `POST /api/embeddings` (`prompt`: one string, one
//! `embedding`), in Ollama's shapes; the work is [`AppState::embed`].

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::handlers::json_response;
use crate::api::embeddings::{Input, dimensions, headers, texts};
use crate::api::error::{ApiError, OllamaError};
use crate::api::http::{BodyError, JsonBody, parse_body, write_json};
use crate::people::Caller;
use crate::service::AppState;
use crate::service::embed::{EmbedAsk, Embeddings};

/// The body of `POST /api/embed`. `truncate`, `options` and `keep_alive` are the
/// machine's business: they are read, and the backend's defaults apply.
#[derive(Debug, Deserialize)]
pub struct EmbedRequest {
    pub model: Option<String>,
    pub input: Option<Input>,
    pub dimensions: Option<i64>,
    pub truncate: Option<bool>,
    pub options: Option<serde_json::Value>,
    pub keep_alive: Option<serde_json::Value>,
}

/// The body of the older `POST /api/embeddings`.
#[derive(Debug, Deserialize)]
pub struct LegacyEmbedRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub options: Option<serde_json::Value>,
    pub keep_alive: Option<serde_json::Value>,
}

/// `POST /api/embed`'s answer; durations in nanoseconds.
#[derive(Debug, Serialize)]
pub struct EmbedResponse<'a> {
    pub model: &'a str,
    pub embeddings: &'a [Vec<f32>],
    pub total_duration: u64,
    pub load_duration: u64,
    pub prompt_eval_count: u32,
}

impl<'a> EmbedResponse<'a> {
    pub fn of(done: &'a Embeddings) -> Self {
        Self {
            model: done.model.as_str(),
            embeddings: &done.vectors,
            total_duration: done.total_ms.saturating_mul(1_000_000),
            load_duration: 0,
            prompt_eval_count: done.prompt_tokens,
        }
    }
}

fn ok(done: &Embeddings, value: &impl Serialize) -> Response {
    let mut out = Vec::with_capacity(4096);
    write_json(&mut out, value);
    let mut res = json_response(StatusCode::OK, out);
    res.headers_mut().extend(headers(done));
    res
}

/// `POST /api/embed`.
pub async fn embed(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<JsonBody, ApiError>,
) -> Result<Response, OllamaError> {
    let JsonBody(body) = body?;
    let req: EmbedRequest = parse_body(&body).map_err(ApiError::from)?;
    let ask = EmbedAsk {
        inputs: texts(req.input, "input").map_err(ApiError::from)?,
        dimensions: dimensions(req.dimensions, "dimensions").map_err(ApiError::from)?,
        model: req.model,
        person: caller.person,
    };
    let done = state.embed(ask).await.map_err(ApiError::from)?;
    Ok(ok(&done, &EmbedResponse::of(&done)))
}

/// `POST /api/embeddings`: one `prompt`, one `embedding`.
pub async fn embeddings(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<JsonBody, ApiError>,
) -> Result<Response, OllamaError> {
    #[derive(Serialize)]
    struct Legacy<'a> {
        embedding: &'a [f32],
    }
    let JsonBody(body) = body?;
    let req: LegacyEmbedRequest = parse_body(&body).map_err(ApiError::from)?;
    let prompt = req
        .prompt
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::from(BodyError::new("prompt", "give the text to embed")))?;
    let ask = EmbedAsk {
        inputs: vec![prompt],
        dimensions: None,
        model: req.model,
        person: caller.person,
    };
    let done = state.embed(ask).await.map_err(ApiError::from)?;
    let embedding = done.vectors.first().map_or(&[][..], Vec::as_slice);
    Ok(ok(&done, &Legacy { embedding }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ModelName, TaskId, WorkerName};

    #[test]
    fn embed_body_is_pinned() {
        let done = Embeddings {
            task_id: TaskId::new(),
            model: ModelName::parse("nomic-embed-text").unwrap(),
            worker: WorkerName::parse("moon").unwrap(),
            vectors: vec![vec![0.5, -0.25], vec![1.0, 0.0]],
            prompt_tokens: 4,
            total_ms: 12,
        };
        let mut out = Vec::new();
        write_json(&mut out, &EmbedResponse::of(&done));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"model":"nomic-embed-text","embeddings":[[0.5,-0.25],[1.0,0.0]],"total_duration":12000000,"load_duration":0,"prompt_eval_count":4}"#
        );
    }
}
