//! The rest of Ollama's API around the models: `GET /` and `HEAD /` ("Ollama is
//! running"), `POST /api/show` (answered by a machine that serves the model), and the
//! model management calls (`pull`, `push`, `create`, `copy`, `delete`), which Coordinator
//! refuses in Ollama's error shape: models are managed on the machines themselves.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::handlers::json_response;
use super::{ModelDetails, timestamp};
use crate::api::error::{ApiError, OllamaError};
use crate::api::http::{BodyError, JsonBody, parse_body, write_json};
use crate::backend::Backend;
use crate::people::Caller;
use crate::service::AppState;
use crate::turn::ModelRequest;

/// What Ollama answers at `/`, so tools that probe for it find it.
pub async fn root() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Ollama is running",
    )
        .into_response()
}

/// The body of `POST /api/show`: `model` (or the older `name`).
#[derive(Debug, Deserialize)]
pub struct ShowRequest {
    pub model: Option<String>,
    pub name: Option<String>,
    #[serde(default)]
    pub verbose: bool,
}

/// `POST /api/show`: the answer of an Ollama machine that serves the model, as it gave
/// it; for a model only OpenAI-compatible machines serve, and for `auto`, what
/// Coordinator knows (its name, the completion capability, tools when a machine said so).
pub async fn show(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    body: Result<JsonBody, ApiError>,
) -> Result<Response, OllamaError> {
    let JsonBody(body) = body?;
    let req: ShowRequest = parse_body(&body).map_err(ApiError::from)?;
    let asked = req.model.or(req.name).filter(|m| !m.trim().is_empty());
    let asked = asked.ok_or_else(|| ApiError::from(BodyError::new("model", "missing")))?;
    let (model, pinned) = match ModelRequest::parse(Some(&asked)) {
        Ok(ModelRequest::Named { model, worker }) => (model, worker),
        Ok(ModelRequest::Auto) => return Ok(ok(&coordinator_show(&["completion"]))),
        Err(e) => return Err(ApiError::from(BodyError::new("model", e.to_string())).into()),
    };
    let statuses: Vec<_> = state
        .directory
        .statuses()
        .into_iter()
        .filter(|s| s.models.iter().any(|m| m.names_same_model(&model)))
        .filter(|s| pinned.as_ref().is_none_or(|p| &s.name == p))
        .collect();
    if statuses.is_empty() {
        return Err(ApiError::UnknownModel(format!("model '{asked}' not found")).into());
    }
    let mut last_error = None;
    for status in statuses.iter().filter(|s| s.healthy) {
        let backend = Backend::for_worker(status, &state.config)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let listed = status.models.iter().find(|m| m.names_same_model(&model));
        match backend.show(listed.unwrap_or(&model)).await {
            Ok(Some(answer)) => return Ok(ok(&answer)),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
    }
    if let Some(e) = last_error {
        return Err(ApiError::Upstream {
            message: e.to_string(),
            task_id: None,
        }
        .into());
    }
    let tools = state
        .directory
        .catalog()
        .entries
        .iter()
        .any(|e| e.model == model && e.tools == Some(true));
    let capabilities: &[&str] = if tools {
        &["completion", "tools"]
    } else {
        &["completion"]
    };
    Ok(ok(&coordinator_show(capabilities)))
}

/// A `show` answer from what Coordinator knows of a model.
fn coordinator_show(capabilities: &[&str]) -> Value {
    json!({
        "modelfile": "",
        "parameters": "",
        "template": "",
        "details": ModelDetails::default(),
        "model_info": {},
        "capabilities": capabilities,
        "modified_at": timestamp(chrono::Utc::now()),
    })
}

fn ok(value: &Value) -> Response {
    let mut out = Vec::with_capacity(1024);
    write_json(&mut out, value);
    json_response(StatusCode::OK, out)
}

/// `pull`, `push`, `create`, `copy`, `delete`: refused, saying where models are managed.
/// The body is read first (and not looked at), so the connection can carry the client's
/// next request.
pub async fn managed_on_the_machines(_body: Bytes) -> OllamaError {
    OllamaError(ApiError::Forbidden(
        "models are managed on the machines, not through Coordinator: run ollama pull, push, \
         create, cp or rm on the machine that serves the model, and Coordinator picks the \
         change up on its own"
            .to_owned(),
    ))
}
