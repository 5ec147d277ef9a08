//! OpenAI-compatible routes: `GET /v1/models`, `POST /v1/chat/completions`.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{
    ChatCompletionRequest, CompletionMeta, ErrorBody, ModelEntry, ModelList, SseEncoder,
    encode_completion, parse_body, write_json,
};
use crate::api::chat::{self, Piece, body_frames};
use crate::api::client::client_context;
use crate::api::error::ApiError;
use crate::chat::ResponseMode;
use crate::memory::thread_allows_memory;
use crate::service::Coordinator;
use crate::turn::build_turn;

/// `auto`, every model, and every `model@worker`.
pub async fn list_models(State(state): State<Coordinator>) -> Response {
    let created = state.started_at.timestamp();
    let catalog = state.directory.catalog();
    let mut data = vec![ModelEntry::new("auto", created, "coordinator")];
    for name in catalog.model_names() {
        data.push(ModelEntry::new(name, created, "coordinator"));
    }
    for e in &catalog.entries {
        data.push(ModelEntry::new(
            format!("{}@{}", e.model, e.worker),
            created,
            e.worker.to_string(),
        ));
    }
    let mut out = Vec::with_capacity(256);
    write_json(&mut out, &ModelList::new(data));
    json_response(StatusCode::OK, out)
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub async fn chat_completions(
    State(state): State<Coordinator>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: ChatCompletionRequest = parse_body(&body)?;
    let mode = req.response_mode();
    let parsed = req.into_turn_input(client_context(&headers))?;
    let mut turn = build_turn(parsed.input, &state.config.history)?;
    turn.remember &= thread_allows_memory(&turn.thread_id);
    let started = chat::start(&state, turn).await?;
    let meta = CompletionMeta::new(
        started.task_id,
        chrono::Utc::now().timestamp(),
        started.decision.model.to_string(),
    );
    if mode == ResponseMode::Whole {
        let (answer, extra) = started.into_answer().await?;
        let mut out = Vec::with_capacity(answer.content.len() + 256);
        encode_completion(&mut out, &meta, &answer);
        let mut res = json_response(StatusCode::OK, out);
        res.headers_mut().extend(extra);
        return Ok(res);
    }
    let extra = started.headers();
    let mut encoder = SseEncoder::new(meta, parsed.include_usage);
    let body = body_frames(started.into_pieces(), move |piece, buf| match piece {
        Piece::Chunk(c) => encoder.push(&c, buf),
        Piece::Failed(message) => encoder.push_error(
            &ErrorBody::new(message, "server_error", Some("backend_error")),
            buf,
        ),
    });
    let mut res = Response::new(Body::from_stream(body));
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.extend(extra);
    Ok(res)
}
