//! `POST /v1/responses` as a [`ChatWire`] for the shared chat handler, and
//! `previous_response_id` answered from the task store: the named turn's row keeps its
//! conversation, and its answer is its `response`, so a stateless backend gets the whole
//! conversation.

use axum::http::{HeaderMap, HeaderValue, header};
use serde_json::json;

use super::request::{Previous, ResponsesRequest};
use super::response::{Echo, ResponseMeta, encode_response, task_of_response};
use super::stream::ResponsesSseEncoder;
use crate::api::chat::{ChatReply, ChatWire, Piece};
use crate::api::error::ApiError;
use crate::chat::{ChatMessage, Role};
use crate::domain::TaskStatus;
use crate::people::Caller;
use crate::service::AppState;
use crate::store::recorded_answer;
use crate::turn::{Answer, ClientContext, TurnInput};

/// `POST /v1/responses`, served by [`crate::api::chat::chat`].
pub struct OpenAiResponses;

/// What the encoders need from the request: the settings the response repeats, and
/// whether the turn's conversation is kept.
pub struct ResponsesOptions {
    echo: Echo,
    keep: bool,
}

/// One response's encoder: its ids, time, model and echo, and the state of its stream.
pub struct ResponseEncoder {
    meta: ResponseMeta,
    stream: ResponsesSseEncoder,
}

impl ChatWire for OpenAiResponses {
    type Request = ResponsesRequest;
    type Options = ResponsesOptions;
    type Encoder = ResponseEncoder;
    type Error = ApiError;

    const STREAM_CONTENT_TYPE: &'static str = "text/event-stream";

    async fn resolve(
        mut req: ResponsesRequest,
        state: &AppState,
        caller: &Caller,
    ) -> Result<ResponsesRequest, ApiError> {
        if let Some(id) = req
            .previous_response_id
            .as_deref()
            .filter(|id| !id.is_empty())
        {
            req.previous = Some(previous(state, caller, id).await?);
        }
        Ok(req)
    }

    fn keeps_conversation(options: &ResponsesOptions) -> bool {
        options.keep
    }

    fn into_turn_input(
        req: ResponsesRequest,
        client: ClientContext,
    ) -> Result<(TurnInput, ResponsesOptions), ApiError> {
        let echo = Echo {
            instructions: req.instructions.clone(),
            previous_response_id: req.previous_response_id.clone(),
            store: req.stores(),
            temperature: req.temperature,
            top_p: req.top_p,
            max_output_tokens: req.max_output_tokens,
            tools: req.tools.clone().unwrap_or_default(),
            tool_choice: req.tool_choice.clone().unwrap_or_else(|| json!("auto")),
        };
        let keep = req.stores();
        Ok((
            req.into_turn_input(client)?,
            ResponsesOptions { echo, keep },
        ))
    }

    /// `created_at` is the moment the first chunk is in (or the head of a queued stream goes out).
    fn encoder(options: ResponsesOptions, reply: &ChatReply) -> ResponseEncoder {
        let meta = ResponseMeta {
            task_id: reply.task_id,
            created_at: chrono::Utc::now().timestamp(),
            model: reply.decision.model.to_string(),
            echo: options.echo,
        };
        ResponseEncoder {
            stream: ResponsesSseEncoder::new(meta.clone()),
            meta,
        }
    }

    fn encode_whole(encoder: ResponseEncoder, answer: &Answer, out: &mut Vec<u8>) {
        encode_response(out, &encoder.meta, answer);
    }

    fn encode_piece(encoder: &mut ResponseEncoder, piece: Piece, out: &mut Vec<u8>) {
        match piece {
            Piece::Chunk(c) => encoder.stream.push(&c, out),
            Piece::Failed(message) => encoder.stream.push_failed("server_error", &message, out),
            Piece::Waiting(waiting) => encoder.stream.push_waiting(waiting, out),
            Piece::Error(error) => {
                let body = error.openai_body();
                let code = body["error"]["code"].as_str().unwrap_or("server_error");
                encoder.stream.push_failed(code, &error.to_string(), out);
            }
        }
    }

    fn stream_headers(headers: &mut HeaderMap) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
}

/// The turn `id` names, as the conversation to continue: only the caller's own, and only
/// one whose conversation was kept and that has its answer.
async fn previous(state: &AppState, caller: &Caller, id: &str) -> Result<Previous, ApiError> {
    let refuse = |message: String| ApiError::BadRequest {
        message: format!("previous_response_id: {message}"),
        param: Some("previous_response_id".to_owned()),
    };
    let shown: String = id.chars().take(80).collect();
    let unknown = || refuse(format!("there is no response {shown:?}"));
    let task_id = task_of_response(id).ok_or_else(unknown)?;
    let record = state
        .store
        .get(task_id)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .filter(|r| r.person == caller.person)
        .ok_or_else(unknown)?;
    let Some(conversation) = record.conversation.as_deref() else {
        return Err(refuse(format!(
            "response {shown} was not stored (it was made with store: false, or not by POST /v1/responses)"
        )));
    };
    let response = match (record.status, record.response.as_deref()) {
        (TaskStatus::Done | TaskStatus::Cancelled, Some(response)) => response,
        (TaskStatus::Queued | TaskStatus::Running, _) => {
            return Err(refuse(format!("response {shown} has not finished yet")));
        }
        _ => {
            return Err(refuse(format!(
                "response {shown} has no answer to continue from"
            )));
        }
    };
    let mut messages: Vec<ChatMessage> = serde_json::from_str(conversation).map_err(|e| {
        ApiError::Internal(format!(
            "task {task_id}: the kept conversation cannot be read: {e}"
        ))
    })?;
    let (content, tool_calls) = recorded_answer(response);
    let mut answer = ChatMessage::new(Role::Assistant, content);
    answer.tool_calls = tool_calls;
    messages.push(answer);
    Ok(Previous {
        messages,
        thread_id: record.thread_id,
    })
}
