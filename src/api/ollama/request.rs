//! `POST /api/chat` request body, as Open WebUI's Ollama connection and Ollama clients
//! send it, and its conversion into a [`TurnInput`].
//!
//! Ollama differs from OpenAI in ways that matter here: `stream` defaults to true, images
//! are a list of base64 strings, tool-call arguments are JSON objects and tool calls may
//! have no id (a tool result names its tool with `tool_name`), and sampling lives in
//! `options` (`num_predict` for the token limit).

use serde::Deserialize;
use serde_json::Value;

use crate::api::openai::BodyError;
use crate::api::openai::request::{
    RequestTool, Stop, arguments_text, convert_tools, data_uri_payload,
};
use crate::chat::{AnswerFormat, ChatMessage, ResponseMode, Role, SamplingParams, Think, ToolCall};
use crate::turn::{ClientContext, TurnInput};

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Defaults to true.
    pub stream: Option<bool>,
    pub options: Option<Options>,
    /// `"json"` or a JSON schema.
    pub format: Option<Value>,
    /// A duration string or seconds.
    pub keep_alive: Option<Value>,
    pub tools: Option<Vec<RequestTool>>,
    /// A bool or `"low" | "medium" | "high" | "max"`.
    pub think: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireRole {
    System,
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub role: WireRole,
    #[serde(default)]
    pub content: Option<String>,
    /// The model's earlier reasoning; not forwarded as history.
    pub thinking: Option<String>,
    pub images: Option<Vec<String>>,
    pub tool_calls: Option<Vec<WireToolCall>>,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WireToolCall {
    pub id: Option<String>,
    pub function: WireFunction,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WireFunction {
    pub name: String,
    /// A JSON object (Ollama); a JSON text is accepted as well.
    pub arguments: Option<Value>,
}

/// The `options` Coordinator understands; the others are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Options {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Tokens to generate; -1 (unlimited) and -2 (fill the context) mean no limit.
    pub num_predict: Option<i64>,
    #[serde(default)]
    pub stop: Stop,
    pub seed: Option<i64>,
    /// The context window the client asks for; capped by the model's window.
    pub num_ctx: Option<i64>,
}

/// `format`: `"json"` for any JSON, a schema object for JSON matching it; empty or
/// `null` for no constraint.
fn answer_format(v: Option<&Value>) -> Result<Option<AnswerFormat>, BodyError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s == "json" => Ok(Some(AnswerFormat::Json)),
        Some(schema @ Value::Object(_)) => Ok(Some(AnswerFormat::JsonSchema {
            name: None,
            schema: schema.clone(),
            strict: None,
        })),
        Some(_) => Err(BodyError::new(
            "format",
            "must be \"json\" or a JSON schema object",
        )),
    }
}

impl ChatRequest {
    /// `stream` defaults to true.
    pub fn response_mode(&self) -> ResponseMode {
        ResponseMode::from_stream(self.stream.unwrap_or(true))
    }

    /// Converts into the shared turn input; the client's headers come from the handler.
    pub fn into_turn_input(self, client: ClientContext) -> Result<TurnInput, BodyError> {
        let response = self.response_mode();
        let params = sampling_params(
            self.options,
            self.format.as_ref(),
            self.keep_alive,
            self.think.as_ref(),
        )?;
        let messages = convert_messages(self.messages)?;
        let tools = convert_tools(self.tools.unwrap_or_default(), "tools")?;
        Ok(TurnInput {
            messages,
            model: self.model,
            response,
            params,
            tools,
            remember: client.remember,
            client,
            ..Default::default()
        })
    }
}

/// The sampling parameters of an Ollama request (`/api/chat`, `/api/generate`): its
/// `options`, `format`, `keep_alive` and `think`.
pub(crate) fn sampling_params(
    options: Option<Options>,
    format: Option<&Value>,
    keep_alive: Option<Value>,
    think: Option<&Value>,
) -> Result<SamplingParams, BodyError> {
    let options = options.unwrap_or_default();
    Ok(SamplingParams {
        temperature: options.temperature,
        top_p: options.top_p,
        max_tokens: options
            .num_predict
            .filter(|n| *n > 0)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        stop: options.stop.0,
        seed: options.seed,
        format: answer_format(format)?,
        keep_alive: match keep_alive {
            None | Some(Value::Null) => None,
            Some(v) if crate::backend::keep_alive::KeepAlive::parse(&v).is_some() => Some(v),
            Some(_) => {
                return Err(BodyError::new(
                    "keep_alive",
                    "must be a duration (\"5m\") or a number of seconds",
                ));
            }
        },
        think: match think {
            None | Some(Value::Null) => None,
            Some(v) => Some(Think::parse(v).ok_or_else(|| {
                BodyError::new(
                    "think",
                    "must be true, false, \"low\", \"medium\", \"high\" or \"max\"",
                )
            })?),
        },
        // Ollama's API has no tool choice.
        tool_choice: None,
        num_ctx: match options.num_ctx {
            None => None,
            Some(n) if n > 0 => Some(u32::try_from(n).unwrap_or(u32::MAX)),
            Some(_) => return Err(BodyError::new("options.num_ctx", "must be above 0")),
        },
        text: None,
    })
}

/// A tool call still waiting for its result, for giving id-less results an id.
struct Pending {
    id: String,
    name: String,
    answered: bool,
}

fn convert_messages(messages: Vec<Message>) -> Result<Vec<ChatMessage>, BodyError> {
    let mut out = Vec::with_capacity(messages.len());
    let mut pending: Vec<Pending> = Vec::new();
    for (i, m) in messages.into_iter().enumerate() {
        let role = match m.role {
            WireRole::System => Role::System,
            WireRole::User => Role::User,
            WireRole::Assistant => Role::Assistant,
            WireRole::Tool => Role::Tool,
        };
        let mut msg = ChatMessage::new(role, m.content.unwrap_or_default());
        for (j, image) in m.images.unwrap_or_default().into_iter().enumerate() {
            let image = if image.starts_with("data:") {
                data_uri_payload(&image).ok_or_else(|| {
                    BodyError::new(
                        format!("messages[{i}].images[{j}]"),
                        "a data: URI must be base64",
                    )
                })?
            } else {
                image
            };
            msg.images.push(image);
        }
        let calls = m.tool_calls.unwrap_or_default();
        if !calls.is_empty() {
            pending.clear();
        }
        for (j, call) in calls.into_iter().enumerate() {
            let id = call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{i}_{j}"));
            pending.push(Pending {
                id: id.clone(),
                name: call.function.name.clone(),
                answered: false,
            });
            msg.tool_calls.push(ToolCall {
                id,
                name: call.function.name,
                arguments: arguments_text(call.function.arguments),
            });
        }
        if role == Role::Tool {
            msg.tool_call_id = match m.tool_call_id.filter(|id| !id.is_empty()) {
                Some(id) => {
                    if let Some(p) = pending.iter_mut().find(|p| p.id == id) {
                        p.answered = true;
                    }
                    Some(id)
                }
                None => answer_pending(&mut pending, m.tool_name.as_deref()),
            };
            msg.name = m.tool_name;
        }
        out.push(msg);
    }
    Ok(out)
}

/// The id of the first unanswered call with this tool name, else of the first unanswered call.
fn answer_pending(pending: &mut [Pending], name: Option<&str>) -> Option<String> {
    let idx = pending
        .iter()
        .position(|p| !p.answered && Some(p.name.as_str()) == name)
        .or_else(|| pending.iter().position(|p| !p.answered))?;
    pending[idx].answered = true;
    Some(pending[idx].id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::openai::parse_body;

    fn parse(json: &str) -> Result<TurnInput, BodyError> {
        parse_body::<ChatRequest>(json.as_bytes())?.into_turn_input(ClientContext::default())
    }

    #[test]
    fn ollama_body_converts() {
        let i = parse(
            r#"{"model":"qwen2.5:7b","messages":[
                {"role":"user","content":"look","images":["aGk=","data:image/png;base64,eW8="]},
                {"role":"assistant","content":"","tool_calls":[
                    {"function":{"name":"a","arguments":{"x":1}}},
                    {"function":{"name":"b","arguments":{}}}]},
                {"role":"tool","tool_name":"b","content":"rb"},
                {"role":"tool","content":"ra"},
                {"role":"user","content":"next"}],
              "options":{"temperature":0.2,"top_p":0.8,"num_predict":64,"stop":["x"],"seed":3,"num_ctx":4096},
              "format":"json","keep_alive":"5m","think":true,
              "tools":[{"type":"function","function":{"name":"a","parameters":{}}}]}"#,
        )
        .unwrap();
        assert_eq!(
            i.response,
            ResponseMode::Streamed,
            "Ollama streams by default"
        );
        assert_eq!(
            i.messages[0].images,
            vec!["aGk=".to_owned(), "eW8=".to_owned()]
        );
        let calls = &i.messages[1].tool_calls;
        assert_eq!(
            (calls[0].id.as_str(), calls[0].arguments.as_str()),
            ("call_1_0", r#"{"x":1}"#)
        );
        assert_eq!(i.messages[2].tool_call_id.as_deref(), Some("call_1_1"));
        assert_eq!(i.messages[2].name.as_deref(), Some("b"));
        assert_eq!(i.messages[3].tool_call_id.as_deref(), Some("call_1_0"));
        assert_eq!(i.params.max_tokens, Some(64));
        assert_eq!(i.params.stop, vec!["x".to_owned()]);
        assert_eq!(i.params.seed, Some(3));
        assert_eq!(i.params.num_ctx, Some(4096));
        assert_eq!(i.params.keep_alive, Some(serde_json::json!("5m")));
        assert_eq!(i.params.think, Some(Think::On(true)));
        assert_eq!(i.tools.len(), 1);
    }

    #[test]
    fn keep_alive_and_think_are_checked() {
        let body = |extra: &str| {
            format!(r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],{extra}}}"#)
        };
        let i = parse(&body(r#""keep_alive":-1,"think":"max""#)).unwrap();
        assert_eq!(i.params.keep_alive, Some(serde_json::json!(-1)));
        for good in [r#""1h30m""#, r#""300ms""#, r#""+5m""#, "0", r#""600""#] {
            let i = parse(&body(&format!(r#""keep_alive":{good}"#))).unwrap();
            assert!(i.params.keep_alive.is_some(), "{good}");
        }
        assert_eq!(i.params.think, Some(Think::Level("max".into())));
        for (bad, field) in [
            (r#""keep_alive":{"m":5}"#, "keep_alive"),
            // Strings Ollama's duration parser refuses: refused here, before a task is
            // recorded, rather than by the machine once it runs.
            (r#""keep_alive":"soon""#, "keep_alive"),
            (r#""keep_alive":"5 minutes""#, "keep_alive"),
            (r#""keep_alive":"inf""#, "keep_alive"),
            (r#""think":"hard""#, "think"),
            (r#""think":1"#, "think"),
        ] {
            let e = parse(&body(bad)).unwrap_err();
            assert!(e.to_string().contains(field), "{bad}: {e}");
        }
    }

    #[test]
    fn format_asks_for_json_or_a_schema() {
        let body = |format: &str| {
            format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"format":{format}}}"#
            )
        };
        assert_eq!(
            parse(&body(r#""json""#)).unwrap().params.format,
            Some(AnswerFormat::Json)
        );
        assert_eq!(
            parse(&body(r#"{"type":"object"}"#)).unwrap().params.format,
            Some(AnswerFormat::JsonSchema {
                name: None,
                schema: serde_json::json!({ "type": "object" }),
                strict: None,
            })
        );
        assert_eq!(parse(&body(r#""""#)).unwrap().params.format, None);
        assert_eq!(parse(&body("null")).unwrap().params.format, None);
        let e = parse(&body(r#""yaml""#)).unwrap_err();
        assert!(e.to_string().contains("format"), "{e}");
    }

    #[test]
    fn defaults_and_errors() {
        let i = parse(r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":-1}}"#)
            .unwrap();
        assert_eq!(i.response, ResponseMode::Whole);
        assert_eq!(i.params.max_tokens, None);
        let e = parse(r#"{"messages":[{"role":"user","content":"x","images":[1]}]}"#).unwrap_err();
        assert_eq!(e.path, "messages[0].images[0]");
        let e =
            parse(r#"{"messages":[{"role":"user","images":["data:image/png,raw"]}]}"#).unwrap_err();
        assert_eq!(e.path, "messages[0].images[0]");
        let e = parse(r#"{"messages":[],"options":{"temperature":"x"}}"#).unwrap_err();
        assert_eq!(e.path, "options.temperature");
        let e = parse(r#"{"messages":[{"role":"user","content":"hi"}],"options":{"num_ctx":0}}"#)
            .unwrap_err();
        assert_eq!(e.path, "options.num_ctx");
    }
}
