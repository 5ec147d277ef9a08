//! `POST /api/generate`: a prompt (with `system`, `suffix`, `images`, `raw`) answered as a
//! text completion, a [`ChatWire`] for the shared chat handler. The prompt becomes the
//! turn's user message and `system` its system message, so routing, internal-task
//! detection, memory, recording and cancellation are a chat's; the turn's
//! [`TextForm`] tells the backend to answer it as a completion (see `src/backend/`).

use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use serde_json::Value;

use super::generate_stream::{GenerateEncoder, encode_generate_response};
use super::request::{Options, sampling_params};
use super::stream::Timings;
use super::timestamp;
use crate::api::chat::{ChatReply, ChatWire, Piece};
use crate::api::error::{ApiError, OllamaError};
use crate::api::http::write_json;
use crate::api::openai::BodyError;
use crate::api::openai::request::data_uri_payload;
use crate::chat::{ChatMessage, Chunk, ResponseMode, TextForm};
use crate::turn::{Answer, ClientContext, TurnInput};

/// The body of `POST /api/generate`. `template` and `context` are not supported: the
/// model's own template applies, and a conversation goes through `/api/chat`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GenerateRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    /// Text after the prompt, for fill-in-the-middle.
    pub suffix: Option<String>,
    pub system: Option<String>,
    #[serde(default)]
    pub images: Vec<String>,
    /// Defaults to true.
    pub stream: Option<bool>,
    /// The prompt as written, with no template.
    #[serde(default)]
    pub raw: bool,
    pub options: Option<Options>,
    pub format: Option<Value>,
    pub keep_alive: Option<Value>,
    pub think: Option<Value>,
}

impl GenerateRequest {
    /// An empty prompt only loads (or, with `keep_alive: 0`, unloads) the model.
    fn loads_only(&self) -> bool {
        self.prompt.as_deref().is_none_or(str::is_empty) && self.images.is_empty()
    }

    /// Converts into the shared turn input: `system`, then the prompt as the user message.
    pub fn into_turn_input(self, client: ClientContext) -> Result<TurnInput, BodyError> {
        let system = self.system.filter(|s| !s.trim().is_empty());
        if self.raw && system.is_some() {
            return Err(BodyError::new(
                "raw",
                "raw mode does not take a system prompt",
            ));
        }
        let response = ResponseMode::from_stream(self.stream.unwrap_or(true));
        let mut params = sampling_params(
            self.options,
            self.format.as_ref(),
            self.keep_alive,
            self.think.as_ref(),
        )?;
        params.text = Some(TextForm {
            suffix: self.suffix.filter(|s| !s.is_empty()),
            raw: self.raw,
        });
        let mut user = ChatMessage::user(self.prompt.unwrap_or_default());
        for (i, image) in self.images.into_iter().enumerate() {
            let image = match image.starts_with("data:") {
                true => data_uri_payload(&image).ok_or_else(|| {
                    BodyError::new(format!("images[{i}]"), "a data: URI must be base64")
                })?,
                false => image,
            };
            user.images.push(image);
        }
        let messages = system.map(ChatMessage::system).into_iter().chain([user]);
        Ok(TurnInput {
            messages: messages.collect(),
            model: self.model,
            response,
            params,
            remember: client.remember,
            client,
            ..Default::default()
        })
    }
}

/// `POST /api/generate`, served by [`crate::api::chat::chat`].
pub struct OllamaGenerate;

/// One answer's encoder: the model it names, and the state of its stream.
pub struct GenerateWire {
    model: String,
    stream: GenerateEncoder,
}

impl ChatWire for OllamaGenerate {
    type Request = GenerateRequest;
    type Options = ();
    type Encoder = GenerateWire;
    type Error = OllamaError;

    const STREAM_CONTENT_TYPE: &'static str = "application/x-ndjson";

    /// Ollama loads the model and answers at once for an empty prompt (`unload` with
    /// `keep_alive: 0`); models live on the machines, so nothing is loaded here.
    fn answer_at_once(req: &GenerateRequest) -> Option<Response> {
        if !req.loads_only() {
            return None;
        }
        use crate::backend::keep_alive::KeepAlive;
        let unload = req.keep_alive.as_ref().and_then(KeepAlive::parse) == Some(KeepAlive::Unload);
        let line = serde_json::json!({
            "model": req.model.clone().unwrap_or_default(),
            "created_at": timestamp(Utc::now()),
            "response": "",
            "done": true,
            "done_reason": if unload { "unload" } else { "load" },
        });
        let mut out = Vec::new();
        write_json(&mut out, &line);
        Some(super::handlers::json_response(StatusCode::OK, out))
    }

    fn into_turn_input(
        req: GenerateRequest,
        client: ClientContext,
    ) -> Result<(TurnInput, ()), ApiError> {
        Ok((req.into_turn_input(client)?, ()))
    }

    fn encoder((): (), reply: &ChatReply) -> GenerateWire {
        let model = reply.decision.model.to_string();
        GenerateWire {
            stream: GenerateEncoder::new(model.clone()),
            model,
        }
    }

    fn encode_whole(encoder: GenerateWire, answer: &Answer, out: &mut Vec<u8>) {
        let timings = Timings::from_usage(&answer.usage);
        encode_generate_response(out, &encoder.model, &timestamp(Utc::now()), answer, timings);
    }

    fn encode_piece(encoder: &mut GenerateWire, piece: Piece, out: &mut Vec<u8>) {
        let now = timestamp(Utc::now());
        match piece {
            Piece::Chunk(
                c @ (Chunk::Content { .. } | Chunk::Reasoning { .. } | Chunk::Done { .. }),
            ) => {
                encoder.stream.push(&c, &now, out);
            }
            Piece::Chunk(Chunk::ToolCalls { .. }) => {}
            Piece::Failed(message) => encoder.stream.push_error(&message, out),
            Piece::Waiting(_) => encoder.stream.push_waiting(&now, out),
            Piece::Error(error) => encoder.stream.push_error(&error.to_string(), out),
        }
    }
}

#[cfg(test)]
#[path = "generate_tests.rs"]
mod tests;
