//! Managing conversation memory over HTTP: `GET /memory?thread_id=&q=&limit=` lists (or,
//! with `q`, searches) memories, `DELETE /memory/{id}` forgets one, and
//! `DELETE /memory?thread_id=` forgets a whole thread.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use super::error::ApiError;
use crate::domain::ThreadId;
use crate::memory::{Memory, MemoryHit, MemoryItem};
use crate::service::AppState;

const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryQuery {
    thread_id: Option<String>,
    q: Option<String>,
    limit: Option<u32>,
}

/// One listed memory; `score` only when searching.
#[derive(Debug, Serialize)]
pub struct Listed {
    #[serde(flatten)]
    item: MemoryItem,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f32>,
}

fn memory(state: &AppState) -> Result<&Memory, ApiError> {
    state
        .memory
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("conversation memory is not available".to_owned()))
}

fn query(q: Result<Query<MemoryQuery>, QueryRejection>) -> Result<MemoryQuery, ApiError> {
    q.map(|Query(q)| q).map_err(ApiError::from)
}

fn thread(raw: Option<&str>) -> Result<Option<ThreadId>, ApiError> {
    raw.map(ThreadId::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest {
            message: e.to_string(),
            param: Some("thread_id".to_owned()),
        })
}

pub async fn list(
    State(state): State<AppState>,
    q: Result<Query<MemoryQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let memory = memory(&state)?;
    let q = query(q)?;
    let thread = thread(q.thread_id.as_deref())?;
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let items: Vec<Listed> = match q.q.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => {
            let hits: Vec<MemoryHit> = memory.search(text, thread.as_ref(), limit as usize).await;
            hits.into_iter()
                .map(|h| Listed {
                    item: h.item,
                    score: Some(h.score),
                })
                .collect()
        }
        None => memory
            .list(thread.as_ref(), limit)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
            .into_iter()
            .map(|item| Listed { item, score: None })
            .collect(),
    };
    Ok(Json(json!({ "items": items })))
}

pub async fn forget_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let memory = memory(&state)?;
    let id = Uuid::parse_str(&id).map_err(|e| ApiError::BadRequest {
        message: format!("memory id: {e}"),
        param: Some("id".to_owned()),
    })?;
    match memory.forget(id).await {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::NotFound(format!("no memory {id}"))),
        Err(e) => Err(ApiError::Internal(e.to_string())),
    }
}

pub async fn forget_thread(
    State(state): State<AppState>,
    q: Result<Query<MemoryQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let memory = memory(&state)?;
    let q = query(q)?;
    let Some(thread) = thread(q.thread_id.as_deref())? else {
        return Err(ApiError::BadRequest {
            message: "thread_id is required: DELETE /memory?thread_id=…".to_owned(),
            param: Some("thread_id".to_owned()),
        });
    };
    let deleted = memory
        .forget_thread(&thread)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(json!({ "thread_id": thread, "deleted": deleted })))
}
