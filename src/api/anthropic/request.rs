//! `POST /v1/messages` request body, as Anthropic's SDKs and Claude-style coding tools send
//! it, and its conversion into a [`TurnInput`].
//!
//! Unknown fields are ignored. Shape errors name the field through
//! [`crate::api::http::parse_body`]; meaning errors found during conversion (an image that
//! is not base64, a server-side tool) name it too.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use crate::api::http::BodyError;
use crate::api::text_or::TextOr;
use crate::chat::{
    ChatMessage, ResponseMode, Role, SamplingParams, Think, ToolCall, ToolChoice, ToolSpec,
};
use crate::turn::{ClientContext, TurnInput};

#[derive(Debug, Clone, Deserialize)]
pub struct MessagesRequest {
    pub model: Option<String>,
    /// Required, as Anthropic requires it.
    pub max_tokens: u32,
    pub messages: Vec<InputMessage>,
    pub system: Option<TextOr<TextBlock>>,
    #[serde(default)]
    pub stop_sequences: Vec<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stream: Option<bool>,
    pub tools: Option<Vec<Tool>>,
    pub tool_choice: Option<WireToolChoice>,
    pub metadata: Option<Metadata>,
    /// `{"type": "enabled", "budget_tokens": n}` or `{"type": "disabled"}`.
    pub thinking: Option<Thinking>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireRole {
    User,
    Assistant,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InputMessage {
    pub role: WireRole,
    pub content: TextOr<Block>,
}

/// A `{"type": "text", "text": …}` block (`system`, tool results).
#[derive(Debug, Clone, Deserialize)]
pub struct TextBlock {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

/// One content block of a message.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    Image {
        source: ImageSource,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<TextOr<ToolResultBlock>>,
        #[serde(default)]
        is_error: Option<bool>,
    },
    /// A model's earlier thinking, sent back by clients; not passed on.
    Thinking {},
    RedactedThinking {},
}

#[derive(Debug, Clone, Deserialize)]
pub struct ImageSource {
    #[serde(rename = "type")]
    pub kind: String,
    pub data: Option<String>,
}

/// A block inside a tool result: text or an image.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultBlock {
    Text { text: String },
    Image { source: ImageSource },
}

#[derive(Debug, Clone, Deserialize)]
pub struct Tool {
    /// Absent (or `custom`) for a client tool; server tools (`web_search_…`) are refused.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WireToolChoice {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Thinking {
    #[serde(rename = "type")]
    pub kind: String,
}

impl MessagesRequest {
    /// Converts into the shared turn input; the client's headers come from the handler.
    pub fn into_turn_input(self, mut client: ClientContext) -> Result<TurnInput, BodyError> {
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = self.system {
            let text = system_text(system)?;
            if !text.is_empty() {
                messages.push(ChatMessage::system(text));
            }
        }
        let mut tool_names = HashMap::new();
        for (i, m) in self.messages.into_iter().enumerate() {
            convert_message(i, m, &mut tool_names, &mut messages)?;
        }
        let (tools, tool_choice) = tools_and_choice(self.tools, self.tool_choice)?;
        let think = match self.thinking.map(|t| t.kind) {
            None => None,
            Some(kind) if kind == "enabled" => Some(Think::On(true)),
            Some(kind) if kind == "disabled" => Some(Think::On(false)),
            Some(_) => {
                return Err(BodyError::new(
                    "thinking.type",
                    "must be \"enabled\" or \"disabled\"",
                ));
            }
        };
        let params = SamplingParams {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: Some(self.max_tokens),
            stop: self.stop_sequences,
            think,
            tool_choice,
            ..SamplingParams::default()
        };
        let user_id = self.metadata.and_then(|m| m.user_id);
        client.client_identity = client.client_identity.or(user_id);
        Ok(TurnInput {
            messages,
            model: self.model,
            response: ResponseMode::from_stream(self.stream.unwrap_or(false)),
            params,
            tools,
            body_chat_id: None,
            remember: client.remember,
            client,
        })
    }
}

fn system_text(system: TextOr<TextBlock>) -> Result<String, BodyError> {
    match system {
        TextOr::Text(t) => Ok(t),
        TextOr::Items(blocks) => blocks
            .into_iter()
            .enumerate()
            .map(|(i, b)| match (b.kind.as_str(), b.text) {
                ("text", Some(text)) => Ok(text),
                ("text", None) => Err(BodyError::new(format!("system[{i}].text"), "missing")),
                (other, _) => Err(BodyError::new(
                    format!("system[{i}].type"),
                    format!("only \"text\" blocks are supported, not {other:?}"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.join("\n")),
    }
}

/// One message as chat messages: tool results become tool messages (before the rest of
/// a user message), tool uses the assistant's tool calls.
fn convert_message(
    i: usize,
    m: InputMessage,
    tool_names: &mut HashMap<String, String>,
    out: &mut Vec<ChatMessage>,
) -> Result<(), BodyError> {
    let role = match m.role {
        WireRole::User => Role::User,
        WireRole::Assistant => Role::Assistant,
    };
    let mut msg = ChatMessage::new(role, "");
    let blocks = match m.content {
        TextOr::Text(t) => {
            msg.content = t;
            out.push(msg);
            return Ok(());
        }
        TextOr::Items(blocks) => blocks,
    };
    let mut texts = Vec::new();
    for (j, block) in blocks.into_iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        match block {
            Block::Text { text } => texts.push(text),
            Block::Image { source } => msg.images.push(image_data(source, &at)?),
            other => tool_block(other, role, &at, &mut msg, tool_names, out)?,
        }
    }
    msg.content = texts.join("\n");
    // A user message of tool results alone is those results; anything else is a message.
    let only_results = role == Role::User && msg.content.is_empty() && msg.images.is_empty();
    if !only_results || out.last().is_none_or(|m| m.role != Role::Tool) {
        out.push(msg);
    }
    Ok(())
}

/// A tool use (on the assistant's message) or a tool result (a tool message of its own);
/// thinking is not passed on.
fn tool_block(
    block: Block,
    role: Role,
    at: &str,
    msg: &mut ChatMessage,
    tool_names: &mut HashMap<String, String>,
    out: &mut Vec<ChatMessage>,
) -> Result<(), BodyError> {
    match block {
        Block::ToolUse { id, name, input } if role == Role::Assistant => {
            tool_names.insert(id.clone(), name.clone());
            msg.tool_calls.push(ToolCall {
                id,
                name,
                arguments: crate::api::openai::request::arguments_text(Some(input)),
            });
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } if role == Role::User => {
            let mut result = ChatMessage::new(Role::Tool, tool_result_text(content, at)?);
            if is_error == Some(true) {
                result.content = format!("Error: {}", result.content);
            }
            result.name = tool_names.get(&tool_use_id).cloned();
            result.tool_call_id = Some(tool_use_id);
            out.push(result);
        }
        Block::ToolUse { .. } | Block::ToolResult { .. } => {
            return Err(BodyError::new(
                format!("{at}.type"),
                "tool_use blocks belong to assistant messages, tool_result blocks to user messages",
            ));
        }
        Block::Text { .. }
        | Block::Image { .. }
        | Block::Thinking {}
        | Block::RedactedThinking {} => {}
    }
    Ok(())
}

fn image_data(source: ImageSource, at: &str) -> Result<String, BodyError> {
    match (source.kind.as_str(), source.data) {
        ("base64", Some(data)) => Ok(data),
        _ => Err(BodyError::new(
            format!("{at}.source"),
            "only base64 image sources are supported",
        )),
    }
}

fn tool_result_text(
    content: Option<TextOr<ToolResultBlock>>,
    at: &str,
) -> Result<String, BodyError> {
    match content {
        None => Ok(String::new()),
        Some(TextOr::Text(t)) => Ok(t),
        Some(TextOr::Items(blocks)) => {
            let mut texts = Vec::new();
            for (k, b) in blocks.into_iter().enumerate() {
                match b {
                    ToolResultBlock::Text { text } => texts.push(text),
                    ToolResultBlock::Image { .. } => {
                        return Err(BodyError::new(
                            format!("{at}.content[{k}].type"),
                            "images in tool results are not supported",
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
    }
}

/// `tools` and `tool_choice`: `none` drops the tools, `auto` lets the model choose, `any`
/// makes it call one, `tool` names the one it must call.
fn tools_and_choice(
    tools: Option<Vec<Tool>>,
    choice: Option<WireToolChoice>,
) -> Result<(Vec<ToolSpec>, Option<ToolChoice>), BodyError> {
    let tools = tools
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, t)| match t.kind.as_deref() {
            None | Some("custom") => Ok(ToolSpec {
                name: t.name,
                description: t.description,
                parameters: t
                    .input_schema
                    .unwrap_or_else(|| Value::Object(Default::default())),
            }),
            Some(other) => Err(BodyError::new(
                format!("tools[{i}].type"),
                format!("server tools ({other:?}) are not supported; describe the tool with input_schema"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some(choice) = choice else {
        return Ok((tools, None));
    };
    let refuse = |detail: &str| Err(BodyError::new("tool_choice", detail));
    let parsed = match (choice.kind.as_str(), choice.name) {
        ("none", _) => return Ok((Vec::new(), None)),
        ("auto", _) if tools.is_empty() => return Ok((tools, None)),
        ("auto", _) => ToolChoice::Auto,
        ("any", _) if tools.is_empty() => {
            return refuse("\"any\" needs at least one tool in tools");
        }
        ("any", _) => ToolChoice::Required,
        ("tool", Some(name)) if tools.iter().any(|t| t.name == name) => {
            ToolChoice::Function { name }
        }
        ("tool", Some(name)) => {
            return refuse(&format!("names {name:?}, which is not one of tools"));
        }
        ("tool", None) => return refuse("a \"tool\" choice needs name"),
        _ => return refuse("type must be \"auto\", \"any\", \"tool\" or \"none\""),
    };
    Ok((tools, Some(parsed)))
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
