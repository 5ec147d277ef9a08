//! One chat front door over several wire formats. A [`ChatWire`] says how its request body
//! becomes a turn and how an answer goes back; [`chat`] is the one handler that runs the
//! flow every chat endpoint shares: parse → turn → submit → first chunk → the whole answer
//! or a streamed body. OpenAI's `POST /v1/chat/completions` and Ollama's `POST /api/chat`
//! are its two formats.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::chat::{ChatReply, Piece, body_frames};
use super::client::client_context;
use super::error::ApiError;
use super::json::parse_body;
use crate::chat::ResponseMode;
use crate::memory::thread_allows_memory;
use crate::service::AppState;
use crate::turn::{Answer, ClientContext, TurnInput, build_turn};

/// A chat API's wire format. Whether the client streams is the [`TurnInput::response`] it
/// makes; its encoders stay pure, writing into the caller's buffer.
pub trait ChatWire: Send + 'static {
    /// The request body, read with our JSON extractor so errors name the bad field.
    type Request: DeserializeOwned;
    /// What the encoders need from the request besides the turn.
    type Options: Send + 'static;
    /// Encodes one answer, whole or piece by piece; made once its first chunk is in.
    type Encoder: Send + 'static;
    /// The error response: OpenAI's `{"error":{...}}` or Ollama's `{"error":"..."}`.
    type Error: From<ApiError> + IntoResponse;

    /// The content type of a streamed answer.
    const STREAM_CONTENT_TYPE: &'static str;

    /// The answer to a request that needs no turn, given at once.
    fn answer_at_once(_req: &Self::Request) -> Option<Response> {
        None
    }

    /// The request as the shared turn input, with the client's headers.
    fn into_turn_input(
        req: Self::Request,
        client: ClientContext,
    ) -> Result<(TurnInput, Self::Options), ApiError>;

    /// The encoder for `reply`, made as soon as its first chunk is in.
    fn encoder(options: Self::Options, reply: &ChatReply) -> Self::Encoder;

    /// The whole answer, as one JSON body.
    fn encode_whole(encoder: Self::Encoder, answer: &Answer, out: &mut Vec<u8>);

    /// One piece of a streamed answer: a chunk, or the failure that ends it.
    fn encode_piece(encoder: &mut Self::Encoder, piece: Piece, out: &mut Vec<u8>);

    /// Headers a streamed answer carries besides its content type and the decision.
    fn stream_headers(_headers: &mut HeaderMap) {}
}

/// A chat request in wire format `W`.
pub async fn chat<W: ChatWire>(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, W::Error> {
    reply::<W>(&state, &headers, &body)
        .await
        .map_err(W::Error::from)
}

async fn reply<W: ChatWire>(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let req: W::Request = parse_body(body)?;
    if let Some(res) = W::answer_at_once(&req) {
        return Ok(res);
    }
    let (input, options) = W::into_turn_input(req, client_context(headers))?;
    let mut turn = build_turn(input, &state.config.history)?;
    turn.remember &= thread_allows_memory(&turn.thread_id);
    let mode = turn.response;
    let reply = ChatReply::start(state, turn).await?;
    let mut encoder = W::encoder(options, &reply);
    match mode {
        ResponseMode::Whole => {
            let (answer, extra) = reply.into_answer().await?;
            let mut out = Vec::with_capacity(answer.content.len() + 256);
            W::encode_whole(encoder, &answer, &mut out);
            let mut res = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                out,
            )
                .into_response();
            res.headers_mut().extend(extra);
            Ok(res)
        }
        ResponseMode::Streamed => {
            let extra = reply.headers();
            let body = body_frames(reply.into_pieces(), move |piece, buf| {
                W::encode_piece(&mut encoder, piece, buf);
            });
            let mut res = Response::new(Body::from_stream(body));
            let h = res.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(W::STREAM_CONTENT_TYPE),
            );
            W::stream_headers(h);
            h.extend(extra);
            Ok(res)
        }
    }
}
