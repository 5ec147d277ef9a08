//! The OpenAI Responses front door: `POST /v1/responses` as a
//! [`crate::api::chat::ChatWire`], with string or item input, `instructions`, function
//! tools and their outputs, the whole `response` object or its event stream, and
//! `previous_response_id` answered from the task store. Errors take OpenAI's shape.

pub mod handlers;
pub mod request;
pub mod response;
pub mod stream;

#[cfg(test)]
mod snapshot_tests;

pub use request::ResponsesRequest;
pub use response::{Echo, ResponseMeta, encode_response, response_id, task_of_response};
pub use stream::ResponsesSseEncoder;
