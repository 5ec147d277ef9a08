//! OpenAI-compatible routes: `GET /v1/models`, and `POST /v1/chat/completions` as a
//! [`ChatWire`] for the shared chat handler.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{
    ChatCompletionRequest, CompletionMeta, ModelEntry, ModelList, SseEncoder, encode_completion,
    write_json,
};
use crate::api::chat::ChatWire;
use crate::api::chat::{ChatReply, Piece};
use crate::api::error::ApiError;
use crate::service::AppState;
use crate::turn::{Answer, ClientContext, TurnInput};

/// `auto`, every model, every `model@worker`, and `rag` with `rag:<collection>`.
pub async fn list_models(State(state): State<AppState>) -> Response {
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
    for name in crate::docs::lane::model_names(state.rag.as_deref()).await {
        data.push(ModelEntry::new(name, created, "coordinator"));
    }
    let mut out = Vec::with_capacity(256);
    write_json(&mut out, &ModelList::new(data));
    json_response(StatusCode::OK, out)
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `POST /v1/chat/completions`, served by [`crate::api::chat::chat`].
pub struct OpenAiChat;

/// One completion's encoder: its id, time and model, and the state of its stream.
pub struct CompletionEncoder {
    meta: CompletionMeta,
    stream: SseEncoder,
}

impl ChatWire for OpenAiChat {
    type Request = ChatCompletionRequest;
    /// `stream_options.include_usage` on a streamed request: send the usage chunk.
    type Options = bool;
    type Encoder = CompletionEncoder;
    type Error = ApiError;

    const STREAM_CONTENT_TYPE: &'static str = "text/event-stream";

    fn into_turn_input(
        req: ChatCompletionRequest,
        client: ClientContext,
    ) -> Result<(TurnInput, bool), ApiError> {
        let parsed = req.into_turn_input(client)?;
        Ok((parsed.input, parsed.include_usage))
    }

    /// `created` is the moment the first chunk is in (or the head of a queued stream goes out).
    fn encoder(include_usage: bool, reply: &ChatReply) -> CompletionEncoder {
        let meta = CompletionMeta::new(
            reply.task_id,
            chrono::Utc::now().timestamp(),
            reply.decision.model.to_string(),
        );
        CompletionEncoder {
            stream: SseEncoder::new(meta.clone(), include_usage),
            meta,
        }
    }

    fn encode_whole(encoder: CompletionEncoder, answer: &Answer, out: &mut Vec<u8>) {
        encode_completion(out, &encoder.meta, answer);
    }

    fn encode_piece(encoder: &mut CompletionEncoder, piece: Piece, out: &mut Vec<u8>) {
        super::encode_piece(&mut encoder.stream, piece, out);
    }

    fn stream_headers(headers: &mut HeaderMap) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
}
