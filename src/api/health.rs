//! Health: `/healthz` (alive), `/readyz` (the store answers and can write, and a backend
//! is healthy), `/workers` (each worker and the queue depths).

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{Value, json};

use crate::people::Caller;
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
    // `/readyz` needs no key: it says what is wrong, and the log says why (a database
    // path, a Redis address and its errors are no business of the network's).
    let mut problems = Vec::new();
    if let Err(e) = &store {
        tracing::warn!(error = %e, "readiness: the task store is not ready");
        problems.push("task store: cannot read or write (see the log)".to_owned());
    }
    if let Err(e) = &queue {
        tracing::warn!(error = %e, "readiness: the queue is not ready");
        problems.push("queue: unreachable (see the log)".to_owned());
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

/// Each worker and the queue depths. Backend addresses and their last errors are for
/// admins (or a household without keys); other people see the machines without them.
pub async fn workers(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Json<Value> {
    let depths: Vec<Value> = state
        .dispatch
        .queue()
        .depths()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(lane, n)| json!({"queue": lane, "waiting": n}))
        .collect();
    let mut workers = serde_json::to_value(state.directory.statuses()).unwrap_or_default();
    if !caller.admin
        && let Some(list) = workers.as_array_mut()
    {
        for w in list.iter_mut().filter_map(Value::as_object_mut) {
            w.remove("url");
            w.remove("last_error");
        }
    }
    Json(json!({"workers": workers, "queues": depths}))
}

/// Prometheus text: the counters and histograms, and the gauges set from the workers and
/// the queue as they are now.
pub async fn metrics(State(state): State<AppState>) -> impl axum::response::IntoResponse {
    let depths = state.dispatch.queue().depths().await.unwrap_or_default();
    let machines = state.directory.statuses();
    let household = crate::metrics::Household {
        machines: &machines,
        depths: &depths,
    };
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        state.metrics.render(&household),
    )
}
