//! Managing conversation memory over HTTP: `GET /memory?thread_id=&q=&limit=` lists (or,
//! with `q`, searches) memories, `DELETE /memory/{id}` forgets one, and
//! `DELETE /memory?thread_id=` forgets a whole thread. Each person sees and forgets only
//! their own memories; an admin sees everyone's, or one person's with `person=`.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use super::error::ApiError;
use crate::domain::{Person, ThreadId};
use crate::memory::{Memory, MemoryHit, MemoryItem};
use crate::people::Caller;
use crate::service::AppState;

const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryQuery {
    thread_id: Option<String>,
    q: Option<String>,
    limit: Option<u32>,
    /// An admin's choice of whose memories; anyone else may only name themselves.
    person: Option<String>,
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

/// Whose memories a request is about: the caller's own, or (for an admin) everyone's or
/// the person the query names.
fn scope(caller: &Caller, q: &MemoryQuery) -> Result<Option<Person>, ApiError> {
    let named = q
        .person
        .as_deref()
        .map(Person::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest {
            message: e.to_string(),
            param: Some("person".to_owned()),
        })?;
    match named {
        Some(p) if caller.may_see(&p) => Ok(Some(p)),
        Some(_) => Err(ApiError::Forbidden(
            "only an admin key can see another person's memories".to_owned(),
        )),
        None => Ok(caller.scope().cloned()),
    }
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<MemoryQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let memory = memory(&state)?;
    let q = query(q)?;
    let person = scope(&caller, &q)?;
    let thread = thread(q.thread_id.as_deref())?;
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let items: Vec<Listed> = match q.q.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => {
            let hits: Vec<MemoryHit> = memory
                .search(text, person.as_ref(), thread.as_ref(), limit as usize)
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            hits.into_iter()
                .map(|h| Listed {
                    item: h.item,
                    score: Some(h.score),
                })
                .collect()
        }
        None => memory
            .list(person.as_ref(), thread.as_ref(), limit)
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
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let memory = memory(&state)?;
    let id = Uuid::parse_str(&id).map_err(|e| ApiError::BadRequest {
        message: format!("memory id: {e}"),
        param: Some("id".to_owned()),
    })?;
    match memory.forget(id, caller.scope()).await {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::NotFound(format!("no memory {id}"))),
        Err(e) => Err(ApiError::Internal(e.to_string())),
    }
}

pub async fn forget_thread(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<MemoryQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let memory = memory(&state)?;
    let q = query(q)?;
    let person = scope(&caller, &q)?;
    let Some(thread) = thread(q.thread_id.as_deref())? else {
        return Err(ApiError::BadRequest {
            message: "thread_id is required: DELETE /memory?thread_id=…".to_owned(),
            param: Some("thread_id".to_owned()),
        });
    };
    let deleted = memory
        .forget_thread(person.as_ref(), &thread)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Json(json!({ "thread_id": thread, "deleted": deleted })))
}
