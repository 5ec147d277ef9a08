//! `POST /v1/completions`, OpenAI's legacy text completions (what editors' code
//! completion speaks): `prompt`, `suffix` for fill-in-the-middle, sampling, `stream`,
//! as a [`ChatWire`] for the shared chat handler. The prompt becomes the turn's user
//! message, so routing, memory, recording and cancellation are a chat's; the turn's
//! [`TextForm`] has the backend continue the prompt as written (raw) or, with a suffix,
//! fill in between through the model's own template (see `src/backend/`).

use axum::http::{HeaderMap, HeaderValue, header};
use serde::Deserialize;
use serde_json::Value;

use super::completions_stream::{TextSseEncoder, encode_text_completion};
use super::request::{Stop, StreamOptions};
use super::{BodyError, CompletionMeta};
use crate::api::chat::{ChatReply, ChatWire, Piece};
use crate::api::error::ApiError;
use crate::chat::{ChatMessage, ResponseMode, SamplingParams, TextForm};
use crate::turn::{Answer, ClientContext, TurnInput};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    /// A string, or a list holding one string.
    pub prompt: Option<Value>,
    pub suffix: Option<String>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub stop: Stop,
    pub seed: Option<i64>,
    /// Only one choice is made.
    pub n: Option<u32>,
    /// Echoing the prompt back is not supported.
    pub echo: Option<bool>,
    pub user: Option<Value>,
}

impl CompletionRequest {
    fn prompt(&self) -> Result<String, BodyError> {
        match &self.prompt {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Array(list)) => match list.as_slice() {
                [Value::String(s)] => Ok(s.clone()),
                [] => Err(BodyError::new("prompt", "the list is empty")),
                [_] => Err(BodyError::new(
                    "prompt[0]",
                    "must be a string (token arrays are not supported)",
                )),
                _ => Err(BodyError::new(
                    "prompt",
                    "only one prompt per request is supported",
                )),
            },
            Some(_) => Err(BodyError::new("prompt", "must be a string")),
            None => Err(BodyError::new("prompt", "missing")),
        }
    }

    /// Converts into the shared turn input; `include_usage` rides along for the encoder.
    pub fn into_turn_input(
        self,
        mut client: ClientContext,
    ) -> Result<(TurnInput, bool), BodyError> {
        let prompt = self.prompt()?;
        if self.n.is_some_and(|n| n != 1) {
            return Err(BodyError::new(
                "n",
                "only one completion per request is supported",
            ));
        }
        if self.echo == Some(true) {
            return Err(BodyError::new(
                "echo",
                "echoing the prompt is not supported",
            ));
        }
        let response = ResponseMode::from_stream(self.stream.unwrap_or(false));
        let include_usage = response.is_streamed()
            && self.stream_options.as_ref().and_then(|o| o.include_usage) == Some(true);
        let suffix = self.suffix.filter(|s| !s.is_empty());
        let params = SamplingParams {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: self.max_tokens,
            stop: self.stop.0,
            seed: self.seed,
            // Continued as written; a suffix needs the model's fill-in-the-middle template.
            text: Some(TextForm {
                raw: suffix.is_none(),
                suffix,
            }),
            ..SamplingParams::default()
        };
        if let Some(Value::String(user)) = &self.user {
            client.client_identity = client.client_identity.or(Some(user.clone()));
        }
        let input = TurnInput {
            messages: vec![ChatMessage::user(prompt)],
            model: self.model,
            response,
            params,
            remember: client.remember,
            client,
            ..Default::default()
        };
        Ok((input, include_usage))
    }
}

/// `POST /v1/completions`, served by [`crate::api::chat::chat`].
pub struct OpenAiCompletions;

/// One completion's encoder: its id, time and model, and the state of its stream.
pub struct TextCompletionEncoder {
    meta: CompletionMeta,
    stream: TextSseEncoder,
}

impl ChatWire for OpenAiCompletions {
    type Request = CompletionRequest;
    /// `stream_options.include_usage` on a streamed request.
    type Options = bool;
    type Encoder = TextCompletionEncoder;
    type Error = ApiError;

    const STREAM_CONTENT_TYPE: &'static str = "text/event-stream";

    fn into_turn_input(
        req: CompletionRequest,
        client: ClientContext,
    ) -> Result<(TurnInput, bool), ApiError> {
        Ok(req.into_turn_input(client)?)
    }

    /// `id` is `cmpl-<task id>`; `created` the moment the first chunk is in.
    fn encoder(include_usage: bool, reply: &ChatReply) -> TextCompletionEncoder {
        let meta = CompletionMeta {
            id: format!("cmpl-{}", reply.task_id),
            created: chrono::Utc::now().timestamp(),
            model: reply.decision.model.to_string(),
        };
        TextCompletionEncoder {
            stream: TextSseEncoder::new(meta.clone(), include_usage),
            meta,
        }
    }

    fn encode_whole(encoder: TextCompletionEncoder, answer: &Answer, out: &mut Vec<u8>) {
        encode_text_completion(out, &encoder.meta, answer);
    }

    fn encode_piece(encoder: &mut TextCompletionEncoder, piece: Piece, out: &mut Vec<u8>) {
        super::encode_piece(&mut encoder.stream, piece, out);
    }

    fn stream_headers(headers: &mut HeaderMap) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
}

#[cfg(test)]
#[path = "completions_tests.rs"]
mod tests;
