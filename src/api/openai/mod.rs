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

#[cfg(test)]
pub(crate) mod snapshot_tests;
