//! HTTP ingress: the seed's own API (`/route`, `/tasks`), health, memory and document
//! management, and (in their own modules) the OpenAI- (chat completions, Responses),
//! Ollama- and Anthropic-compatible front doors. Every route maps its request to one `Turn` and hands it
//! to the service layer.

pub mod anthropic;
pub mod browser;
pub mod chat;
mod docs;
pub mod embeddings;
pub mod error;
mod health;
pub mod http;
mod memory;
pub mod ollama;
pub mod openai;
mod queued;
pub mod responses;
mod route;
pub(crate) mod tasks;
pub mod text_or;
pub mod wait;

#[cfg(test)]
mod request_props;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};

pub use error::{ApiError, ErrorShape, OllamaError};

use crate::people::AuthError;
use crate::service::AppState;

/// All routes, with the shared state.
pub fn router(state: AppState) -> Router {
    let open = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .merge(crate::dashboard::open_routes());
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
        .route(
            "/v1/responses",
            post(chat::chat::<responses::handlers::OpenAiResponses>),
        )
        .route(
            "/v1/messages",
            post(chat::chat::<anthropic::handlers::AnthropicMessages>),
        )
        .route("/api/tags", get(ollama::handlers::tags))
        .route("/api/ps", get(ollama::handlers::ps))
        .route("/api/version", get(ollama::handlers::version))
        .route(
            "/api/chat",
            post(chat::chat::<ollama::handlers::OllamaChat>),
        )
        .route(
            "/api/generate",
            post(chat::chat::<ollama::generate::OllamaGenerate>),
        )
        .route("/api/embed", post(ollama::embed::embed))
        .route("/api/embeddings", post(ollama::embed::embeddings))
        .route("/api/show", post(ollama::manage::show))
        .route("/api/pull", post(ollama::manage::managed_on_the_machines))
        .route("/api/push", post(ollama::manage::managed_on_the_machines))
        .route("/api/create", post(ollama::manage::managed_on_the_machines))
        .route("/api/copy", post(ollama::manage::managed_on_the_machines))
        .route(
            "/api/delete",
            delete(ollama::manage::managed_on_the_machines),
        )
        .route(
            "/v1/completions",
            post(chat::chat::<openai::completions::OpenAiCompletions>),
        )
        .route("/v1/embeddings", post(openai::embeddings::embeddings))
        .route("/memory", get(memory::list).delete(memory::forget_thread))
        .route("/memory/{id}", delete(memory::forget_one))
        .route("/docs", get(docs::list).post(docs::upload))
        .route("/docs/{collection}", delete(docs::forget))
        .merge(crate::dashboard::guarded_routes(&state))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_api_key,
        ));
    let origins = browser::AllowedOrigins::from_config(&state.config.server);
    open.merge(guarded)
        .fallback(unknown_path)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(http::BODY_LIMIT))
        .layer(browser::cors(origins.clone()))
        .layer(middleware::from_fn_with_state(
            origins,
            browser::refuse_foreign_origins,
        ))
        .with_state(state)
}

/// 404 for a path no route serves, in the shape of the front door it is under.
async fn unknown_path(method: Method, uri: Uri) -> Response {
    let path: String = uri.path().chars().take(200).collect();
    ApiError::NotFound(format!("there is no {method} {path}"))
        .into_shaped_response(ErrorShape::for_path(uri.path()))
}

/// 405 for a route asked with a method it does not serve (axum adds the `Allow` header).
async fn wrong_method(method: Method, uri: Uri) -> Response {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().chars().take(200).collect(),
    }
    .into_shaped_response(ErrorShape::for_path(uri.path()))
}

/// Identifies the caller by their API key (see [`crate::people`]) and hands the
/// [`Caller`](crate::people::Caller) to the route; refuses a missing or unknown key with
/// 401, counted in `/metrics` and logged at WARN (at most every ten seconds).
async fn require_api_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let shape = ErrorShape::for_path(req.uri().path());
    let from = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    if let Some(ip) = from
        && !state.keys.is_empty()
        && let Err(refusal) = state.limits.not_guessing(ip)
    {
        return ApiError::Limited {
            refusal,
            lang: crate::lang::Lang::En,
        }
        .into_shaped_response(shape);
    }
    match state.keys.identify(req.headers()) {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(AuthError::BadUser(reason)) => ApiError::BadRequest {
            message: format!("X-OpenWebUI-User-Id: {reason}"),
            param: None,
        }
        .into_shaped_response(shape),
        Err(e) => {
            if let Some(ip) = from {
                state.limits.wrong_key(ip);
            }
            if let Some(unlogged) = state.metrics.refused() {
                tracing::warn!(
                    reason = %e,
                    path = %req.uri().path(),
                    refused_since_last_log = unlogged,
                    "request refused: missing or invalid API key"
                );
            }
            ApiError::Unauthorized.into_shaped_response(shape)
        }
    }
}
