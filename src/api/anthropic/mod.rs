//! The Anthropic-compatible front door: `POST /v1/messages` (Claude-style clients and
//! coding tools) as a [`crate::api::chat::ChatWire`], its request ([`request`]), its whole
//! and streamed answers ([`response`]) and its error body
//! (`{"type":"error","error":{"type","message"}}`).

pub mod handlers;
pub mod request;
pub mod response;

#[cfg(test)]
mod snapshot_tests;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::{ApiError, ErrorShape};

pub use request::MessagesRequest;
pub use response::{MessageMeta, MessagesSseEncoder, encode_message};

impl ApiError {
    /// Anthropic's error type for this error, by its status (as Anthropic's API names them).
    fn anthropic_kind(&self) -> &'static str {
        match self.status() {
            StatusCode::BAD_REQUEST
            | StatusCode::METHOD_NOT_ALLOWED
            | StatusCode::UNSUPPORTED_MEDIA_TYPE
            | StatusCode::REQUEST_TIMEOUT => "invalid_request_error",
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN => "permission_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
            StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            StatusCode::SERVICE_UNAVAILABLE => "overloaded_error",
            StatusCode::GATEWAY_TIMEOUT => "timeout_error",
            _ => "api_error",
        }
    }

    /// Anthropic's error object: `{"type": "error", "error": {"type", "message"}}`.
    pub fn anthropic_body(&self) -> Value {
        json!({"type": "error", "error": {"type": self.anthropic_kind(), "message": self.to_string()}})
    }
}

/// The same error in Anthropic's shape, for `/v1/messages`.
#[derive(Debug)]
pub struct AnthropicError(pub ApiError);

impl From<ApiError> for AnthropicError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        self.0.into_shaped_response(ErrorShape::Anthropic)
    }
}
