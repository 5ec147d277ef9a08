//! The seed's own API: `POST /route` answers as soon as the task is queued;
//! `/route/preview` shows the decision without running anything.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::http::{ApiJson, JsonBody, client_context, parse_body};
use super::openai::ChatCompletionRequest;
use crate::chat::{ChatMessage, ResponseMode, Role};
use crate::domain::{Priority, WorkerName};
use crate::memory::thread_allows_memory;
use crate::people::Caller;
use crate::routing::RouteDecision;
use crate::service::AppState;
use crate::turn::{History, Turn, TurnInput, build_turn};

/// `history` as the seed sent it (one text), or as chat messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum HistoryField {
    Text(String),
    Messages(Vec<HistoryMessage>),
}

#[derive(Debug, Clone, Deserialize)]
pub struct HistoryMessage {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RouteRequest {
    pub prompt: String,
    #[serde(default)]
    pub thread_id: Option<String>,
    #[serde(default)]
    pub history: Option<HistoryField>,
    #[serde(default)]
    pub model: Option<String>,
    /// `false`: do not write this turn to conversation memory.
    #[serde(default)]
    pub remember: Option<bool>,
    /// `interactive` (the default), `background` or `batch`; over the
    /// `X-Coordinator-Priority` header when both are given.
    #[serde(default)]
    pub priority: Option<Priority>,
}

#[derive(Debug, Serialize)]
pub struct RouteResponse {
    pub task_id: String,
    pub worker_id: Option<WorkerName>,
    pub model: String,
    pub domain: String,
    pub queue: String,
    pub web_search: bool,
    pub internal_task: Option<String>,
}

/// Turns the seed's request shape into a turn, with the same history rules as chat APIs.
pub fn turn_from_route(
    state: &AppState,
    req: RouteRequest,
    headers: &HeaderMap,
    caller: &Caller,
) -> Result<Turn, ApiError> {
    let mut messages = Vec::new();
    let mut text_history = None;
    match req.history {
        Some(HistoryField::Messages(m)) => {
            messages.extend(m.into_iter().map(|h| ChatMessage::new(h.role, h.content)));
        }
        Some(HistoryField::Text(t)) if !t.trim().is_empty() => text_history = Some(t),
        _ => {}
    }
    messages.push(ChatMessage::user(req.prompt));
    let mut client = client_context(headers, caller)?;
    client.priority = req.priority.or(client.priority);
    let input = TurnInput {
        messages,
        model: req.model,
        // The seed's request never asks for a stream, which is what the router reads…
        response: ResponseMode::Whole,
        body_chat_id: req.thread_id,
        remember: req.remember.unwrap_or(true) && client.remember,
        client,
        ..Default::default()
    };
    let cfg = &state.config.history;
    let mut turn = build_turn(input, cfg)?;
    // …but its task is watched as it runs (`GET /tasks/{id}/events`), so it streams.
    turn.response = ResponseMode::Streamed;
    if let Some(t) = text_history
        && cfg.enabled
    {
        let kept = keep_tail(&t, cfg.max_chars.unwrap_or(usize::MAX));
        turn.history_dropped += usize::from(kept.len() < t.len());
        turn.history = History::Text(kept);
    }
    turn.remember &= thread_allows_memory(&turn.thread_id);
    Ok(turn)
}

/// The last `max_chars` characters of `text`.
fn keep_tail(text: &str, max_chars: usize) -> String {
    let n = text.chars().count();
    text.chars().skip(n.saturating_sub(max_chars)).collect()
}

pub async fn route(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<RouteRequest>,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    let turn = turn_from_route(&state, req, &headers, &caller)?;
    let lang = crate::lang::detect_language(&turn.prompt);
    let sub = state
        .submit(turn)
        .await
        .map_err(|e| ApiError::from(e).in_language(lang))?;
    let worker = sub
        .worker_hint
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let mut out = HeaderMap::new();
    out.extend(super::chat::decision_headers(
        sub.task_id,
        &sub.decision,
        &worker,
    ));
    Ok((
        out,
        Json(RouteResponse {
            task_id: sub.task_id.to_string(),
            worker_id: sub.worker_hint,
            model: sub.decision.model.to_string(),
            domain: sub.decision.domain.to_string(),
            queue: sub.decision.lane().to_string(),
            web_search: sub.decision.web_search(),
            internal_task: sub.decision.internal_task.map(|k| k.to_string()),
        }),
    ))
}

#[derive(Debug, Deserialize)]
pub struct PreviewQuery {
    pub prompt: String,
    #[serde(default)]
    pub model: Option<String>,
}

pub async fn preview_get(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    q: Result<Query<PreviewQuery>, QueryRejection>,
) -> Result<Json<RouteDecision>, ApiError> {
    let Query(q) = q?;
    let req = RouteRequest {
        prompt: q.prompt,
        thread_id: None,
        history: None,
        model: q.model,
        remember: None,
        priority: None,
    };
    let turn = turn_from_route(&state, req, &headers, &caller)?;
    Ok(Json(state.preview(&turn).await?))
}

/// Accepts the seed's `{"prompt": ...}` or a whole OpenAI chat request (headers included),
/// so the decision for an Open WebUI request can be checked without running it.
pub async fn preview_post(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Json<RouteDecision>, ApiError> {
    let probe: serde_json::Value = parse_body(&body)?;
    let turn = if probe.get("messages").is_some() {
        let req: ChatCompletionRequest = parse_body(&body)?;
        let parsed = req.into_turn_input(client_context(&headers, &caller)?)?;
        build_turn(parsed.input, &state.config.history)?
    } else {
        let req: RouteRequest = parse_body(&body)?;
        turn_from_route(&state, req, &headers, &caller)?
    };
    Ok(Json(state.preview(&turn).await?))
}
