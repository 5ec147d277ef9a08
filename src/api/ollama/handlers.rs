//! Ollama-compatible routes: `GET /api/tags`, `GET /api/ps`, `GET /api/version`,
//! `POST /api/chat` (a [`ChatWire`] for the shared chat handler), so Open WebUI can add
//! Coordinator as an Ollama connection.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::{
    ChatRequest, ModelDetails, ModelTag, NdjsonEncoder, PsResponse, RunningModel, TagsResponse,
    Timings, VersionResponse, encode_chat_response, timestamp,
};
use crate::api::chat::ChatWire;
use crate::api::chat::{ChatReply, Piece};
use crate::api::error::{ApiError, OllamaError};
use crate::api::http::write_json;
use crate::chat::Chunk;
use crate::service::AppState;
use crate::turn::{Answer, ClientContext, TurnInput};

pub(super) fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn json<T: serde::Serialize>(value: &T) -> Response {
    let mut out = Vec::with_capacity(256);
    write_json(&mut out, value);
    json_response(StatusCode::OK, out)
}

/// `auto`, every model, every `model@worker`, and the RAG models, with both `name` and `model` set.
pub async fn tags(State(state): State<AppState>) -> Response {
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
    for name in crate::docs::lane::model_names(state.rag.as_deref()).await {
        models.push(ModelTag::new(name, modified.clone()));
    }
    json(&TagsResponse { models })
}

/// Models loaded right now on any worker, each with its expiry as the machine's `/api/ps`
/// said (five minutes from now, Ollama's default keep-alive, where it has not said).
pub async fn ps(State(state): State<AppState>) -> Response {
    let default = Utc::now() + chrono::Duration::minutes(5);
    let mut models = Vec::new();
    for w in state.directory.statuses() {
        for m in &w.loaded {
            let at = w
                .resident
                .iter()
                .find(|r| &r.model == m)
                .and_then(|r| r.expires_at)
                .unwrap_or(default);
            let expires = timestamp(at);
            let tag = ModelTag::new(m.to_string(), expires.clone());
            models.push(RunningModel {
                name: tag.name.clone(),
                model: tag.model.clone(),
                size: 0,
                digest: tag.digest.clone(),
                details: ModelDetails::default(),
                expires_at: expires,
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

/// `POST /api/chat`, served by [`crate::api::chat::chat`].
pub struct OllamaChat;

/// One answer's encoder: the model it names, and the state of its stream.
pub struct ChatEncoder {
    model: String,
    stream: NdjsonEncoder,
}

impl ChatWire for OllamaChat {
    type Request = ChatRequest;
    type Options = ();
    type Encoder = ChatEncoder;
    type Error = OllamaError;

    const STREAM_CONTENT_TYPE: &'static str = "application/x-ndjson";

    /// Ollama loads the model and answers at once for an empty conversation.
    fn answer_at_once(req: &ChatRequest) -> Option<Response> {
        if !req.messages.is_empty() {
            return None;
        }
        let line = serde_json::json!({
            "model": req.model.clone().unwrap_or_default(),
            "created_at": timestamp(Utc::now()),
            "message": {"role": "assistant", "content": ""},
            "done_reason": "load",
            "done": true,
        });
        let mut out = Vec::new();
        write_json(&mut out, &line);
        Some(json_response(StatusCode::OK, out))
    }

    fn into_turn_input(
        req: ChatRequest,
        client: ClientContext,
    ) -> Result<(TurnInput, ()), ApiError> {
        Ok((req.into_turn_input(client)?, ()))
    }

    fn encoder((): (), reply: &ChatReply) -> ChatEncoder {
        let model = reply.decision.model.to_string();
        ChatEncoder {
            stream: NdjsonEncoder::new(model.clone()),
            model,
        }
    }

    fn encode_whole(encoder: ChatEncoder, answer: &Answer, out: &mut Vec<u8>) {
        let timings = Timings::from_usage(&answer.usage);
        encode_chat_response(out, &encoder.model, &timestamp(Utc::now()), answer, timings);
    }

    fn encode_piece(encoder: &mut ChatEncoder, piece: Piece, out: &mut Vec<u8>) {
        let now = timestamp(Utc::now());
        match piece {
            Piece::Chunk(c) => {
                if let Chunk::Done { usage, .. } = &c {
                    encoder.stream.set_timings(Timings::from_usage(usage));
                }
                encoder.stream.push(&c, &now, out);
            }
            Piece::Failed(message) => encoder.stream.push_error(&message, out),
            Piece::Waiting(_) => encoder.stream.push_waiting(&now, out),
            Piece::Error(error) => encoder.stream.push_error(&error.to_string(), out),
        }
    }
}
