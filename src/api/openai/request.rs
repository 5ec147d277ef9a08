//! `POST /v1/chat/completions` request body, as Open WebUI and the OpenAI SDKs send it,
//! and its conversion into a [`TurnInput`].
//!
//! Unknown fields are ignored. Shape errors name the field through [`super::parse_body`];
//! meaning errors found during conversion (an `image_url` that is not a data URI, an
//! unsupported content part) name it too.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::BodyError;
use crate::chat::{
    AnswerFormat, ChatMessage, ResponseMode, Role, SamplingParams, Think, ToolCall, ToolChoice,
    ToolSpec,
};
use crate::turn::{ClientContext, TurnInput};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatCompletionRequest {
    pub model: Option<String>,
    pub messages: Vec<RequestMessage>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub stop: Stop,
    pub seed: Option<i64>,
    pub tools: Option<Vec<RequestTool>>,
    /// `"none"` drops the tools; `"auto"`, `"required"` or a named function is forwarded.
    pub tool_choice: Option<Value>,
    /// `{"type": "text" | "json_object" | "json_schema", "json_schema": {...}}`.
    pub response_format: Option<Value>,
    /// `"low" | "medium" | "high"` for reasoning models.
    pub reasoning_effort: Option<String>,
    /// A string (OpenAI) or an object (Open WebUI Pipelines: `{name, id, email, role}`).
    pub user: Option<Value>,
    pub chat_id: Option<String>,
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Metadata {
    pub chat_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RequestMessage {
    pub role: WireRole,
    #[serde(default)]
    pub content: Content,
    pub name: Option<String>,
    pub tool_calls: Option<Vec<RequestToolCall>>,
    pub tool_call_id: Option<String>,
}

/// Message content: a string, an array of parts, or null.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Content {
    #[default]
    None,
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
    pub image_url: Option<ImageUrl>,
    pub refusal: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ImageUrl {
    pub url: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RequestToolCall {
    pub id: Option<String>,
    pub function: RequestFunctionCall,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RequestFunctionCall {
    pub name: String,
    /// A JSON text (OpenAI); an object is accepted as well.
    pub arguments: Option<Value>,
}

/// A tool offered to the model; the same shape in OpenAI and Ollama requests.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RequestTool {
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: Option<RequestFunctionSpec>,
}

fn function_type() -> String {
    "function".to_owned()
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RequestFunctionSpec {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
}

/// `stop`: a string, an array of strings, or null.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stop(pub Vec<String>);

/// `response_format`: `text` asks for nothing in particular; `json_object` for JSON;
/// `json_schema` for JSON matching `json_schema.schema`.
fn response_format(v: &Value) -> Result<Option<AnswerFormat>, BodyError> {
    let field = "response_format";
    let spec = match v.get("type").and_then(Value::as_str) {
        Some("json_schema") => Some(
            v.get("json_schema")
                .ok_or_else(|| BodyError::new(format!("{field}.json_schema"), "missing"))?,
        ),
        _ => None,
    };
    answer_format(v, spec, field, &format!("{field}.json_schema"))
}

/// A structured-output request: `format`'s `type` (`text`, `json_object`, `json_schema`)
/// at `field`, and for `json_schema` its `spec` (`name`, `schema`, `strict`) at
/// `spec_field`. Shared with the Responses API's `text.format`, where the spec is the
/// format itself.
pub(crate) fn answer_format(
    format: &Value,
    spec: Option<&Value>,
    field: &str,
    spec_field: &str,
) -> Result<Option<AnswerFormat>, BodyError> {
    match (format.get("type").and_then(Value::as_str), spec) {
        (Some("text"), _) => Ok(None),
        (Some("json_object"), _) => Ok(Some(AnswerFormat::Json)),
        (Some("json_schema"), Some(spec)) => {
            let schema = spec
                .get("schema")
                .filter(|s| s.is_object())
                .cloned()
                .ok_or_else(|| {
                    BodyError::new(
                        format!("{spec_field}.schema"),
                        "must be a JSON schema object",
                    )
                })?;
            Ok(Some(AnswerFormat::JsonSchema {
                name: spec.get("name").and_then(Value::as_str).map(str::to_owned),
                schema,
                strict: spec.get("strict").and_then(Value::as_bool),
            }))
        }
        _ => Err(BodyError::new(
            format!("{field}.type"),
            "must be \"text\", \"json_object\" or \"json_schema\"",
        )),
    }
}

/// A request ready for [`crate::turn::build_turn`], plus what only the encoder needs.
#[derive(Debug, Clone)]
pub struct ParsedChat {
    pub input: TurnInput,
    /// `stream_options.include_usage` on a streamed request: send the usage chunk.
    pub include_usage: bool,
}

impl ChatCompletionRequest {
    /// `stream` defaults to false.
    pub fn response_mode(&self) -> ResponseMode {
        ResponseMode::from_stream(self.stream.unwrap_or(false))
    }

    /// The `user` field as an identity: the string, or the object's `id`.
    pub fn user_id(&self) -> Option<String> {
        match self.user.as_ref()? {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::Object(o) => o.get("id")?.as_str().map(str::to_owned),
            _ => None,
        }
    }

    /// Converts into the shared turn input; the client's headers come from the handler.
    pub fn into_turn_input(self, mut client: ClientContext) -> Result<ParsedChat, BodyError> {
        let response = self.response_mode();
        let include_usage = response.is_streamed()
            && self.stream_options.as_ref().and_then(|o| o.include_usage) == Some(true);
        let user_id = self.user_id();
        let messages = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| convert_message(i, m))
            .collect::<Result<Vec<_>, _>>()?;
        let tools = if self.tool_choice.as_ref().and_then(Value::as_str) == Some("none") {
            Vec::new()
        } else {
            convert_tools(self.tools.unwrap_or_default(), "tools")?
        };
        let tool_choice = match &self.tool_choice {
            None | Some(Value::Null) => None,
            Some(choice) => tool_choice(choice, &tools)?,
        };
        let params = SamplingParams {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens: self.max_completion_tokens.or(self.max_tokens),
            stop: self.stop.0,
            seed: self.seed,
            format: self
                .response_format
                .as_ref()
                .map(response_format)
                .transpose()?
                .flatten(),
            keep_alive: None,
            think: match self.reasoning_effort {
                None => None,
                Some(level) => Some(Think::parse(&Value::String(level)).ok_or_else(|| {
                    BodyError::new(
                        "reasoning_effort",
                        "must be \"low\", \"medium\", \"high\" or \"max\"",
                    )
                })?),
            },
            tool_choice,
            num_ctx: None,
            text: None,
        };
        let body_chat_id = self
            .chat_id
            .or_else(|| self.metadata.and_then(|m| m.chat_id));
        client.client_identity = client.client_identity.or(user_id);
        let input = TurnInput {
            messages,
            model: self.model,
            response,
            params,
            tools,
            body_chat_id,
            remember: client.remember,
            client,
        };
        Ok(ParsedChat {
            input,
            include_usage,
        })
    }
}

fn convert_message(i: usize, m: RequestMessage) -> Result<ChatMessage, BodyError> {
    let role = match m.role {
        WireRole::System | WireRole::Developer => Role::System,
        WireRole::User => Role::User,
        WireRole::Assistant => Role::Assistant,
        WireRole::Tool | WireRole::Function => Role::Tool,
    };
    let mut msg = ChatMessage::new(role, "");
    match m.content {
        Content::None => {}
        Content::Text(t) => msg.content = t,
        Content::Parts(parts) => {
            let mut texts = Vec::new();
            for (j, part) in parts.into_iter().enumerate() {
                let at = format!("messages[{i}].content[{j}]");
                match part.kind.as_str() {
                    "text" | "input_text" => texts.push(
                        part.text
                            .ok_or_else(|| BodyError::new(format!("{at}.text"), "missing"))?,
                    ),
                    "refusal" => texts.extend(part.refusal),
                    "image_url" => {
                        let url = part
                            .image_url
                            .ok_or_else(|| BodyError::new(format!("{at}.image_url"), "missing"))?
                            .url;
                        msg.images.push(data_uri_payload(&url).ok_or_else(|| {
                            BodyError::new(
                                format!("{at}.image_url.url"),
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
            msg.content = texts.join("\n");
        }
    }
    for (j, call) in m.tool_calls.unwrap_or_default().into_iter().enumerate() {
        msg.tool_calls.push(ToolCall {
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{i}_{j}")),
            name: call.function.name,
            arguments: arguments_text(call.function.arguments),
        });
    }
    msg.tool_call_id = m.tool_call_id;
    if role == Role::Tool {
        msg.name = m.name;
    }
    Ok(msg)
}

/// Tool-call arguments as JSON text: a string as is, any other JSON serialised, none as `{}`.
pub(crate) fn arguments_text(arguments: Option<Value>) -> String {
    match arguments {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}

/// The base64 payload of a `data:<mime>;base64,<payload>` URI.
pub(crate) fn data_uri_payload(url: &str) -> Option<String> {
    let rest = url.strip_prefix("data:")?;
    let (meta, payload) = rest.split_once(',')?;
    meta.ends_with(";base64").then(|| payload.to_owned())
}

/// Reads `tool_choice` against the request's `tools`: `none` (the tools are dropped
/// instead), `auto`, `required`, or `{"type": "function", "function": {"name": …}}`
/// naming one of the tools. `auto` without tools says nothing; the others need tools.
pub(crate) fn tool_choice(
    choice: &Value,
    tools: &[ToolSpec],
) -> Result<Option<ToolChoice>, BodyError> {
    let refuse = |detail: String| Err(BodyError::new("tool_choice", detail));
    let parsed = match choice {
        Value::String(s) if s == "none" => return Ok(None),
        Value::String(s) if s == "auto" => ToolChoice::Auto,
        Value::String(s) if s == "required" => ToolChoice::Required,
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            match choice.pointer("/function/name").and_then(Value::as_str) {
                Some(name) => ToolChoice::Function {
                    name: name.to_owned(),
                },
                None => return refuse("a function choice needs function.name".to_owned()),
            }
        }
        _ => {
            return refuse(
                "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \
                 \"function\": {\"name\": …}}"
                    .to_owned(),
            );
        }
    };
    match &parsed {
        ToolChoice::Auto if tools.is_empty() => Ok(None),
        ToolChoice::Required if tools.is_empty() => {
            refuse("\"required\" needs at least one tool in tools".to_owned())
        }
        ToolChoice::Function { name } if !tools.iter().any(|t| &t.name == name) => {
            refuse(format!("names {name:?}, which is not one of tools"))
        }
        _ => Ok(Some(parsed)),
    }
}

/// Converts offered tools; `at` is the field name for errors.
pub(crate) fn convert_tools(tools: Vec<RequestTool>, at: &str) -> Result<Vec<ToolSpec>, BodyError> {
    tools
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            if t.kind != "function" {
                return Err(BodyError::new(
                    format!("{at}[{i}].type"),
                    format!("only \"function\" tools are supported, not {:?}", t.kind),
                ));
            }
            let f = t
                .function
                .ok_or_else(|| BodyError::new(format!("{at}[{i}].function"), "missing"))?;
            Ok(ToolSpec {
                name: f.name,
                description: f.description,
                parameters: f
                    .parameters
                    .unwrap_or_else(|| Value::Object(Default::default())),
            })
        })
        .collect()
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, an array of content parts, or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
                Ok(Content::None)
            }
            fn visit_none<E: de::Error>(self) -> Result<Content, E> {
                Ok(Content::None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut parts = Vec::new();
                while let Some(p) = seq.next_element()? {
                    parts.push(p);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Stop;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, an array of strings, or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Stop, E> {
                Ok(Stop(vec![v.to_owned()]))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Stop, E> {
                Ok(Stop::default())
            }
            fn visit_none<E: de::Error>(self) -> Result<Stop, E> {
                Ok(Stop::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Stop, A::Error> {
                let mut stops = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    stops.push(s);
                }
                Ok(Stop(stops))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
