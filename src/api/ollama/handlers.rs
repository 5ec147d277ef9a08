//! Ollama-compatible routes: `GET /api/tags`, `GET /api/ps`, `GET /api/version`,
//! `POST /api/chat`, so Open WebUI can add Coordinator as an Ollama connection.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::{
    ChatRequest, ModelDetails, ModelTag, NdjsonEncoder, PsResponse, RunningModel, TagsResponse,
    Timings, VersionResponse, encode_chat_response, timestamp,
};
use crate::api::chat::{self, Piece, body_frames};
use crate::api::client::client_context;
use crate::api::error::{ApiError, OllamaError};
use crate::api::json::{parse_body, write_json};
use crate::chat::ResponseMode;
use crate::memory::thread_allows_memory;
use crate::service::Coordinator;
use crate::turn::build_turn;

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn json<T: serde::Serialize>(value: &T) -> Response {
    let mut out = Vec::with_capacity(256);
    write_json(&mut out, value);
    json_response(StatusCode::OK, out)
}

/// `auto`, every model, and every `model@worker`, with both `name` and `model` set.
pub async fn tags(State(state): State<Coordinator>) -> Response {
    let modified = timestamp(state.started_at);
    let catalog = state.directory.catalog();
    let mut models = vec![ModelTag::new("auto", modified.clone())];
    for name in catalog.model_names() {
        models.push(ModelTag::new(name, modified.clone()));
    }
    for e in &catalog.entries {
        models.push(ModelTag::new(
            format!("{}@{}", e.model, e.worker),
            modified.clone(),
        ));
    }
    json(&TagsResponse { models })
}

/// Models loaded right now on any worker.
pub async fn ps(State(state): State<Coordinator>) -> Response {
    let expires = timestamp(Utc::now() + chrono::Duration::minutes(5));
    let mut models = Vec::new();
    for w in state.directory.statuses() {
        for m in w.loaded {
            let tag = ModelTag::new(m.to_string(), expires.clone());
            models.push(RunningModel {
                name: tag.name.clone(),
                model: tag.model.clone(),
                size: 0,
                digest: tag.digest.clone(),
                details: ModelDetails::default(),
                expires_at: expires.clone(),
                size_vram: 0,
            });
        }
    }
    json(&PsResponse { models })
}

pub async fn version() -> Response {
    json(&VersionResponse {
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

pub async fn chat(
    State(state): State<Coordinator>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OllamaError> {
    let req: ChatRequest = parse_body(&body).map_err(ApiError::from)?;
    let mode = req.response_mode();
    let requested = req.model.clone().unwrap_or_default();
    if req.messages.is_empty() {
        // Ollama loads the model and answers at once for an empty conversation.
        let line = serde_json::json!({
            "model": requested,
            "created_at": timestamp(Utc::now()),
            "message": {"role": "assistant", "content": ""},
            "done_reason": "load",
            "done": true,
        });
        let mut out = Vec::new();
        write_json(&mut out, &line);
        return Ok(json_response(StatusCode::OK, out));
    }
    let input = req
        .into_turn_input(client_context(&headers))
        .map_err(ApiError::from)?;
    let mut turn = build_turn(input, &state.config.history).map_err(ApiError::from)?;
    turn.remember &= thread_allows_memory(&turn.thread_id);
    let started = chat::start(&state, turn).await?;
    let model = started.decision.model.to_string();
    if mode == ResponseMode::Whole {
        let (answer, extra) = started.into_answer().await?;
        let mut out = Vec::with_capacity(answer.content.len() + 256);
        let timings = Timings::from_usage(&answer.usage);
        encode_chat_response(&mut out, &model, &timestamp(Utc::now()), &answer, timings);
        let mut res = json_response(StatusCode::OK, out);
        res.headers_mut().extend(extra);
        return Ok(res);
    }
    let extra = started.headers();
    let mut encoder = NdjsonEncoder::new(model);
    let body = body_frames(started.into_pieces(), move |piece, buf| {
        let now = timestamp(Utc::now());
        match piece {
            Piece::Chunk(c) => {
                if let crate::chat::Chunk::Done { usage, .. } = &c {
                    encoder.set_timings(Timings::from_usage(usage));
                }
                encoder.push(&c, &now, buf);
            }
            Piece::Failed(message) => encoder.push_error(&message, buf),
        }
    });
    let mut res = Response::new(Body::from_stream(body));
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    h.extend(extra);
    Ok(res)
}
