//! `POST /v1/responses` request body, as the OpenAI SDKs and Open WebUI's Responses
//! connections send it, and its conversion into a [`TurnInput`].
//!
//! Unknown fields are ignored (Open WebUI keeps some chat-completions fields, such as
//! `seed` and `reasoning_effort`, which are read too). Shape errors name the field through
//! [`crate::api::http::parse_body`]; meaning errors found during conversion name it too.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use crate::api::http::BodyError;
use crate::api::openai::request::{
    RequestFunctionSpec, RequestTool, answer_format, arguments_text, convert_tools,
    data_uri_payload, tool_choice as openai_tool_choice,
};
use crate::api::text_or::TextOr;
use crate::chat::{
    AnswerFormat, ChatMessage, ResponseMode, Role, SamplingParams, Think, ToolCall, ToolChoice,
};
use crate::domain::ThreadId;
use crate::turn::{ClientContext, TurnInput};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponsesRequest {
    pub model: Option<String>,
    pub input: Option<TextOr<InputItem>>,
    pub instructions: Option<String>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub stream: Option<bool>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub previous_response_id: Option<String>,
    /// False: the turn's conversation is not kept, so no later request can continue it.
    pub store: Option<bool>,
    pub text: Option<TextConfig>,
    pub reasoning: Option<Reasoning>,
    /// The chat-completions spelling, as Open WebUI keeps it.
    pub reasoning_effort: Option<String>,
    pub seed: Option<i64>,
    /// A string, or (Open WebUI Pipelines) an object with an `id`.
    pub user: Option<Value>,
    /// The earlier response `previous_response_id` names, once read from the store.
    #[serde(skip)]
    pub previous: Option<Previous>,
}

/// What `previous_response_id` continues: the conversation up to and including that
/// response's answer, and its thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Previous {
    pub messages: Vec<ChatMessage>,
    pub thread_id: ThreadId,
}

/// One input item: a message (`type` absent or `message`), a `function_call` the model
/// made, a `function_call_output`, or a `reasoning` item (not passed on).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InputItem {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub role: Option<String>,
    pub content: Option<TextOr<ContentPart>>,
    pub call_id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<Value>,
    pub output: Option<TextOr<ContentPart>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
    pub refusal: Option<String>,
    /// A data: URI (`input_image`).
    pub image_url: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TextConfig {
    pub format: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Reasoning {
    pub effort: Option<String>,
}

/// A request ready for [`crate::turn::build_turn`].
impl ResponsesRequest {
    pub fn response_mode(&self) -> ResponseMode {
        ResponseMode::from_stream(self.stream.unwrap_or(false))
    }

    /// Whether the turn's conversation is kept for `previous_response_id` (OpenAI's
    /// default: yes).
    pub fn stores(&self) -> bool {
        self.store != Some(false)
    }

    /// Converts into the shared turn input; the client's headers come from the handler.
    pub fn into_turn_input(mut self, mut client: ClientContext) -> Result<TurnInput, BodyError> {
        let response = self.response_mode();
        let body_chat_id = self.previous.as_ref().map(|p| p.thread_id.to_string());
        let messages = self.conversation()?;
        let tools = match self.tool_choice.as_ref().and_then(Value::as_str) {
            Some("none") => Vec::new(),
            _ => convert_tools(
                function_tools(self.tools.take().unwrap_or_default())?,
                "tools",
            )?,
        };
        let tool_choice = match &self.tool_choice {
            None | Some(Value::Null) => None,
            Some(choice) => tool_choice(choice, &tools)?,
        };
        let params = SamplingParams {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: self.max_output_tokens,
            seed: self.seed,
            format: self
                .text
                .take()
                .and_then(|t| t.format)
                .as_ref()
                .map(text_format)
                .transpose()?
                .flatten(),
            think: self.think()?,
            tool_choice,
            ..SamplingParams::default()
        };
        let user_id = match self.user {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
            Some(Value::Object(o)) => o.get("id").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        };
        client.client_identity = client.client_identity.or(user_id);
        Ok(TurnInput {
            messages,
            model: self.model,
            response,
            params,
            tools,
            body_chat_id,
            remember: client.remember,
            client,
        })
    }

    /// `instructions` as the system message, then the earlier response's conversation,
    /// then `input`; taken out of the request.
    fn conversation(&mut self) -> Result<Vec<ChatMessage>, BodyError> {
        let mut messages = Vec::new();
        if let Some(text) = self.instructions.take().filter(|t| !t.trim().is_empty()) {
            messages.push(ChatMessage::system(text));
        }
        if let Some(previous) = self.previous.take() {
            messages.extend(previous.messages);
        }
        match self.input.take() {
            None => return Err(BodyError::new("input", "missing")),
            Some(TextOr::Text(t)) => messages.push(ChatMessage::user(t)),
            Some(TextOr::Items(items)) => convert_items(items, &mut messages)?,
        }
        if !messages.iter().any(|m| m.role == Role::User) {
            return Err(BodyError::new("input", "there is no user message"));
        }
        Ok(messages)
    }

    /// `reasoning.effort`, or the chat-completions `reasoning_effort`.
    fn think(&mut self) -> Result<Option<Think>, BodyError> {
        let effort = self
            .reasoning
            .take()
            .and_then(|r| r.effort)
            .map(|e| ("reasoning.effort", e))
            .or(self
                .reasoning_effort
                .take()
                .map(|e| ("reasoning_effort", e)));
        let Some((field, level)) = effort else {
            return Ok(None);
        };
        Think::parse(&Value::String(level))
            .map(Some)
            .ok_or_else(|| {
                BodyError::new(field, "must be \"low\", \"medium\", \"high\" or \"max\"")
            })
    }
}

/// Input items as chat messages: consecutive function calls join the assistant message
/// before them; a call's output is a tool message named after its call.
fn convert_items(items: Vec<InputItem>, out: &mut Vec<ChatMessage>) -> Result<(), BodyError> {
    let mut names: HashMap<String, String> = out
        .iter()
        .flat_map(|m| &m.tool_calls)
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect();
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("input[{i}]");
        match item.kind.as_deref().unwrap_or("message") {
            "message" => out.push(message(item, &at)?),
            "function_call" => {
                let call = function_call(item, &at)?;
                names.insert(call.id.clone(), call.name.clone());
                match out.last_mut() {
                    Some(m) if m.role == Role::Assistant => m.tool_calls.push(call),
                    _ => {
                        let mut m = ChatMessage::assistant("");
                        m.tool_calls.push(call);
                        out.push(m);
                    }
                }
            }
            "function_call_output" => {
                let id = item
                    .call_id
                    .ok_or_else(|| BodyError::new(format!("{at}.call_id"), "missing"))?;
                let (text, _) =
                    parts_text(item.output.unwrap_or_default(), &format!("{at}.output"))?;
                let mut m = ChatMessage::new(Role::Tool, text);
                m.name = names.get(&id).cloned();
                m.tool_call_id = Some(id);
                out.push(m);
            }
            "reasoning" => {}
            other => {
                return Err(BodyError::new(
                    format!("{at}.type"),
                    format!(
                        "input items of type {other:?} are not supported (message, function_call, \
                         function_call_output and reasoning are)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn function_call(item: InputItem, at: &str) -> Result<ToolCall, BodyError> {
    let missing = |field: &str| BodyError::new(format!("{at}.{field}"), "missing");
    Ok(ToolCall {
        id: item.call_id.ok_or_else(|| missing("call_id"))?,
        name: item.name.ok_or_else(|| missing("name"))?,
        arguments: arguments_text(item.arguments),
    })
}

fn message(item: InputItem, at: &str) -> Result<ChatMessage, BodyError> {
    let role = match item.role.as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system" | "developer") => Role::System,
        Some(other) => {
            return Err(BodyError::new(
                format!("{at}.role"),
                format!(
                    "must be \"user\", \"assistant\", \"system\" or \"developer\", not {other:?}"
                ),
            ));
        }
        None => return Err(BodyError::new(format!("{at}.role"), "missing")),
    };
    let (text, images) = parts_text(item.content.unwrap_or_default(), &format!("{at}.content"))?;
    let mut m = ChatMessage::new(role, text);
    m.images = images;
    Ok(m)
}

/// Content as text and base64 images: text parts joined by newlines.
fn parts_text(content: TextOr<ContentPart>, at: &str) -> Result<(String, Vec<String>), BodyError> {
    let parts = match content {
        TextOr::Text(t) => return Ok((t, Vec::new())),
        TextOr::Items(parts) => parts,
    };
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for (j, part) in parts.into_iter().enumerate() {
        let at = format!("{at}[{j}]");
        match part.kind.as_str() {
            "input_text" | "output_text" | "text" => texts.push(
                part.text
                    .ok_or_else(|| BodyError::new(format!("{at}.text"), "missing"))?,
            ),
            "refusal" => texts.extend(part.refusal),
            "input_image" => {
                let url = part
                    .image_url
                    .ok_or_else(|| BodyError::new(format!("{at}.image_url"), "missing"))?;
                images.push(data_uri_payload(&url).ok_or_else(|| {
                    BodyError::new(
                        format!("{at}.image_url"),
                        "only base64 data: URIs are supported",
                    )
                })?);
            }
            other => {
                return Err(BodyError::new(
                    format!("{at}.type"),
                    format!("content parts of type {other:?} are not supported"),
                ));
            }
        }
    }
    Ok((texts.join("\n"), images))
}

/// Responses tools (`{"type": "function", "name", "description", "parameters"}`) in
/// the chat-completions shape the OpenAI door checks; built-in tools are refused.
fn function_tools(tools: Vec<Value>) -> Result<Vec<RequestTool>, BodyError> {
    tools
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let kind = t.get("type").and_then(Value::as_str).unwrap_or("function");
            if kind != "function" {
                return Err(BodyError::new(
                    format!("tools[{i}].type"),
                    format!("only \"function\" tools are supported, not {kind:?}"),
                ));
            }
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| BodyError::new(format!("tools[{i}].name"), "missing"))?;
            Ok(RequestTool {
                kind: "function".to_owned(),
                function: Some(RequestFunctionSpec {
                    name: name.to_owned(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    parameters: t.get("parameters").filter(|p| !p.is_null()).cloned(),
                }),
            })
        })
        .collect()
}

/// `tool_choice` in the chat-completions shape the OpenAI door checks: a function
/// choice is `{"type": "function", "name": …}` here.
fn tool_choice(
    choice: &Value,
    tools: &[crate::chat::ToolSpec],
) -> Result<Option<ToolChoice>, BodyError> {
    let chat_shape = match choice.get("name") {
        Some(name) if choice.get("type").and_then(Value::as_str) == Some("function") => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
        _ => choice.clone(),
    };
    openai_tool_choice(&chat_shape, tools)
}

/// `text.format`: `text` asks for nothing in particular; `json_object` for JSON;
/// `json_schema` for JSON matching its `schema`.
fn text_format(v: &Value) -> Result<Option<AnswerFormat>, BodyError> {
    answer_format(v, Some(v), "text.format", "text.format")
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
