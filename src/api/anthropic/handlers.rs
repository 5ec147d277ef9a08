//! `POST /v1/messages` as a [`ChatWire`] for the shared chat handler.

use axum::http::{HeaderMap, HeaderValue, header};
use serde_json::json;

use super::{AnthropicError, MessageMeta, MessagesRequest, MessagesSseEncoder, encode_message};
use crate::api::chat::{ChatReply, ChatWire, Piece};
use crate::api::error::ApiError;
use crate::turn::{Answer, ClientContext, TurnInput};

/// `POST /v1/messages`, served by [`crate::api::chat::chat`].
pub struct AnthropicMessages;

/// One answer's encoder: its id and model, and the state of its stream.
pub struct MessagesEncoder {
    meta: MessageMeta,
    stream: MessagesSseEncoder,
}

impl ChatWire for AnthropicMessages {
    type Request = MessagesRequest;
    type Options = ();
    type Encoder = MessagesEncoder;
    type Error = AnthropicError;

    const STREAM_CONTENT_TYPE: &'static str = "text/event-stream";

    fn into_turn_input(
        req: MessagesRequest,
        client: ClientContext,
    ) -> Result<(TurnInput, ()), ApiError> {
        Ok((req.into_turn_input(client)?, ()))
    }

    fn encoder((): (), reply: &ChatReply) -> MessagesEncoder {
        let meta = MessageMeta::new(reply.task_id, reply.decision.model.to_string());
        MessagesEncoder {
            stream: MessagesSseEncoder::new(meta.clone()),
            meta,
        }
    }

    fn encode_whole(encoder: MessagesEncoder, answer: &Answer, out: &mut Vec<u8>) {
        encode_message(out, &encoder.meta, answer);
    }

    fn encode_piece(encoder: &mut MessagesEncoder, piece: Piece, out: &mut Vec<u8>) {
        match piece {
            Piece::Chunk(c) => encoder.stream.push(&c, out),
            Piece::Failed(message) => encoder.stream.push_error(
                &json!({"type": "error", "error": {"type": "api_error", "message": message}}),
                out,
            ),
            Piece::Waiting(_) => encoder.stream.push_waiting(out),
            Piece::Error(error) => encoder.stream.push_error(&error.anthropic_body(), out),
        }
    }

    fn stream_headers(headers: &mut HeaderMap) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
}
