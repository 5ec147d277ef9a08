//! HTTP ingress: the seed's own API (`/route`, `/tasks`), health, memory management, and (in their own
//! modules) the OpenAI- and Ollama-compatible front doors. Every route maps its request
//! to one `Turn` and hands it to the service layer.

pub mod chat;
pub mod error;
mod health;
pub mod http;
mod memory;
pub mod ollama;
pub mod openai;
mod route;
mod tasks;
pub mod wait;

#[cfg(test)]
mod request_props;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};

pub use error::{ApiError, OllamaError};

use crate::service::AppState;

/// All routes, with the shared state.
pub fn router(state: AppState) -> Router {
    let open = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics));
    let guarded = Router::new()
        .route("/workers", get(health::workers))
        .route("/route", post(route::route))
        .route(
            "/route/preview",
            get(route::preview_get).post(route::preview_post),
        )
        .route("/tasks/{id}", get(tasks::get_task))
        .route("/tasks/{id}/events", get(tasks::task_events))
        .route("/tasks/{id}/cancel", post(tasks::cancel_task))
        .route("/v1/models", get(openai::handlers::list_models))
        .route(
            "/v1/chat/completions",
            post(chat::chat::<openai::handlers::OpenAiChat>),
        )
        .route("/api/tags", get(ollama::handlers::tags))
        .route("/api/ps", get(ollama::handlers::ps))
        .route("/api/version", get(ollama::handlers::version))
        .route(
            "/api/chat",
            post(chat::chat::<ollama::handlers::OllamaChat>),
        )
        .route("/memory", get(memory::list).delete(memory::forget_thread))
        .route("/memory/{id}", delete(memory::forget_one))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_api_key,
        ));
    open.merge(guarded).with_state(state)
}

/// Checks `Authorization: Bearer <key>` when `[server] api_keys` is set.
async fn require_api_key(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let keys = &state.config.server.api_keys;
    if keys.is_empty() {
        return Ok(next.run(req).await);
    }
    let presented = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(k) if keys.iter().any(|key| key == k) => Ok(next.run(req).await),
        _ => Err(ApiError::Unauthorized),
    }
}
