//! The OpenAI-compatible wire format: `POST /v1/chat/completions` requests, `chat.completion`
//! and `chat.completion.chunk` (SSE) responses, the legacy `POST /v1/completions`
//! (`text_completion`), `POST /v1/embeddings`, `GET /v1/models`, and the error body.
//!
//! Pure types and encoders, no HTTP: the handlers parse a body with [`parse_body`], turn
//! it into a [`crate::turn::TurnInput`] with [`ChatCompletionRequest::into_turn_input`],
//! and encode the worker's [`crate::chat::Chunk`]s with [`SseEncoder`] or
//! [`encode_completion`].

pub mod completions;
pub mod completions_stream;
pub mod embeddings;
pub mod handlers;
pub mod request;
pub mod response;
pub mod stream;

pub use crate::api::http::{BodyError, parse_body, write_json};
pub use request::{ChatCompletionRequest, ParsedChat};
pub use response::{
    CompletionMeta, ErrorBody, ErrorDetail, ModelEntry, ModelList, encode_completion, encode_error,
};
pub use stream::SseEncoder;

use crate::api::chat::Piece;
use crate::api::wait::Waiting;
use crate::chat::Chunk;

/// An OpenAI SSE stream of either kind (chat chunks, text completions).
pub(crate) trait OpenAiSse {
    fn push(&mut self, chunk: &Chunk, out: &mut Vec<u8>);
    fn push_waiting(&self, waiting: Waiting, out: &mut Vec<u8>);
    fn push_error(&mut self, error: &impl serde::Serialize, out: &mut Vec<u8>);
}

/// One piece of an answer onto an OpenAI stream: a chunk, a keep-alive, or an error event
/// (a backend's failure after the stream began, or Coordinator's own).
pub(crate) fn encode_piece(stream: &mut impl OpenAiSse, piece: Piece, out: &mut Vec<u8>) {
    match piece {
        Piece::Chunk(c) => stream.push(&c, out),
        Piece::Failed(message) => stream.push_error(
            &ErrorBody::new(message, "server_error", Some("backend_error")),
            out,
        ),
        Piece::Waiting(waiting) => stream.push_waiting(waiting, out),
        Piece::Error(error) => stream.push_error(&error.openai_body(), out),
    }
}

#[cfg(test)]
pub(crate) mod snapshot_tests;
