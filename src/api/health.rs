//! Health: `/healthz` (alive), `/readyz` (the store answers and can write, and a backend
//! is healthy), `/workers` (each worker and the queue depths).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::service::AppState;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    // Reads can go on while another program holds the write lock: ask for both.
    let store = match state.store.writable() {
        Ok(()) => state.store.ping().await,
        Err(e) => Err(e),
    };
    let queue = state.dispatch.queue().ping().await;
    let backends = state.directory.any_healthy();
    let mut problems = Vec::new();
    if let Err(e) = &store {
        problems.push(format!("task store: {e}"));
    }
    if let Err(e) = &queue {
        problems.push(format!("queue: {e}"));
    }
    if !backends {
        problems.push("no healthy backend".to_owned());
    }
    let status = if problems.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "ready": problems.is_empty(),
        "store": store.is_ok(),
        "queue": queue.is_ok(),
        "healthy_backend": backends,
        "problems": problems,
    });
    (status, Json(body))
}

pub async fn workers(State(state): State<AppState>) -> Json<Value> {
    let depths: Vec<Value> = state
        .dispatch
        .queue()
        .depths()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(lane, n)| json!({"queue": lane, "waiting": n}))
        .collect();
    Json(json!({"workers": state.directory.statuses(), "queues": depths}))
}

pub async fn metrics(State(state): State<AppState>) -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        state.metrics.render(),
    )
}
