//! Property tests of the chat bodies both front doors read (`POST /v1/chat/completions`,
//! `POST /api/chat`), through the same steps the handler takes: [`parse_body`], the wire's
//! conversion into a turn input, [`build_turn`]. Any bytes and any JSON give a turn or a
//! 400 whose message starts with the field it is about; a broken field is the one named;
//! a valid body arrives as it was sent.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::chat::ChatWire;
use super::error::ApiError;
use super::http::parse_body;
use super::ollama::handlers::OllamaChat;
use super::openai::handlers::OpenAiChat;
use crate::chat::{ResponseMode, Role};
use crate::config::HistoryConfig;
use crate::turn::{ClientContext, Turn, TurnInput, build_turn};

/// What the front door makes of a body: a turn, nothing to do (Ollama's load request),
/// or the error it answers with.
fn front_door<W: ChatWire>(body: &[u8]) -> Result<Option<Turn>, ApiError> {
    let req: W::Request = parse_body(body)?;
    if W::answer_at_once(&req).is_some() {
        return Ok(None);
    }
    let (input, _) = W::into_turn_input(req, ClientContext::default())?;
    Ok(Some(build_turn(input, &HistoryConfig::default())?))
}

fn input_of<W: ChatWire>(body: &[u8]) -> TurnInput {
    let req: W::Request = parse_body(body).unwrap();
    W::into_turn_input(req, ClientContext::default()).unwrap().0
}

/// The field a 400 is about: its message starts with a path (`messages[2].content`,
/// `body` for the body as a whole) and a colon, and OpenAI's `param` is that path.
fn field_of(e: &ApiError) -> String {
    assert_eq!(e.status(), 400, "{e:?}");
    let body = e.openai_body();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    let (path, rest) = message.split_once(": ").unwrap_or(("", ""));
    let is_path = !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '-'));
    assert!(
        is_path && !rest.trim().is_empty(),
        "names no field: {message:?}"
    );
    if let Some(param) = body["error"]["param"].as_str() {
        assert_eq!(param, path, "{body}");
    }
    path.to_owned()
}

/// The top-level field of a path (`messages` of `messages[0].role`).
fn top(path: &str) -> &str {
    path.split(['.', '[']).next().unwrap_or(path)
}

const OPENAI_FIELDS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "tools",
    "tool_choice",
    "response_format",
    "reasoning_effort",
    "user",
    "chat_id",
    "metadata",
];

const OLLAMA_FIELDS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "options",
    "format",
    "keep_alive",
    "tools",
    "think",
];

const MESSAGE_FIELDS: &[&str] = &[
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "images",
    "thinking",
];

fn json_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        prop_oneof![
            Just("user".to_owned()),
            Just("auto".to_owned()),
            Just("function".to_owned()),
            Just("json".to_owned()),
            Just("data:image/png;base64,aGk=".to_owned()),
            Just("qwen2.5:7b".to_owned()),
            Just("x".repeat(300)),
            Just("bell\u{7}".to_owned()),
            "\\PC{0,16}",
        ]
        .prop_map(Value::String),
    ]
}

/// Any JSON, with keys the parsers know more often than chance would give.
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        prop::sample::select(OPENAI_FIELDS).prop_map(str::to_owned),
        prop::sample::select(OLLAMA_FIELDS).prop_map(str::to_owned),
        prop::sample::select(MESSAGE_FIELDS).prop_map(str::to_owned),
        prop::sample::select(
            &[
                "type",
                "text",
                "function",
                "name",
                "arguments",
                "json_schema"
            ][..]
        )
        .prop_map(str::to_owned),
        "[a-z_]{1,10}",
    ];
    json_scalar().prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn valid_openai() -> Value {
    json!({
        "model": "qwen2.5:7b",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
            {"role": "assistant", "content": "hi", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "user", "content": "and now?"}
        ],
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0.5,
        "max_tokens": 64,
        "stop": ["\n\n"],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "response_format": {"type": "text"},
        "user": "u-1",
        "chat_id": "c-1"
    })
}

fn valid_ollama() -> Value {
    json!({
        "model": "qwen2.5:7b",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "look", "images": ["aGk="]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "f", "arguments": {"x": 1}}}]},
            {"role": "tool", "tool_name": "f", "content": "42"},
            {"role": "user", "content": "and now?"}
        ],
        "stream": false,
        "options": {"temperature": 0.5, "num_predict": 64, "stop": ["x"], "seed": 1},
        "format": "json",
        "keep_alive": "5m",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "think": true
    })
}

/// A valid body with one top-level field, or one field of one message, replaced by any
/// JSON: the error, if any, is about that field.
fn broken(
    base: fn() -> Value,
    fields: &'static [&'static str],
) -> impl Strategy<Value = (Value, &'static str)> {
    let top_level = (prop::sample::select(fields), any_json()).prop_map(move |(f, v)| {
        let mut body = base();
        body[f] = v;
        (body, f)
    });
    let in_message =
        (0usize..5, prop::sample::select(MESSAGE_FIELDS), any_json()).prop_map(move |(i, f, v)| {
            let mut body = base();
            body["messages"][i][f] = v;
            (body, "messages")
        });
    prop_oneof![top_level, in_message]
}

/// What a message of a generated body is: its role and text.
#[derive(Debug, Clone)]
struct Sent {
    role: Role,
    text: String,
    /// OpenAI: sent as an array of text parts (joined with newlines when read).
    parts: Option<Vec<String>>,
}

fn sent_message() -> impl Strategy<Value = Sent> {
    let role = prop::sample::select(&[Role::System, Role::User, Role::Assistant][..]);
    let text = "\\PC{0,40}|[\"\\\\\\n\\t\\x00-\\x1f]{0,8}";
    let parts = prop::option::of(prop::collection::vec("\\PC{0,20}", 1..4));
    (role, text, parts).prop_map(|(role, text, parts)| {
        let text = match &parts {
            Some(p) => p.join("\n"),
            None => text,
        };
        Sent { role, text, parts }
    })
}

/// A body's sampling settings as generated, to compare with what was read.
#[derive(Debug, Clone)]
struct Settings {
    model: Option<String>,
    stream: Option<bool>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u32>,
    stop: Vec<String>,
    seed: Option<i64>,
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        prop::option::of(prop_oneof![
            Just("auto".to_owned()),
            "[a-z0-9.]{1,12}(:[a-z0-9]{1,6})?(@[a-z]{1,6})?"
        ]),
        prop::option::of(any::<bool>()),
        prop::option::of(0.0f64..2.0),
        prop::option::of(0.0f64..=1.0),
        prop::option::of(1u32..100_000),
        prop::collection::vec("\\PC{1,6}", 0..3),
        prop::option::of(any::<i64>()),
    )
        .prop_map(
            |(model, stream, temperature, top_p, max_tokens, stop, seed)| Settings {
                model,
                stream,
                temperature,
                top_p,
                max_tokens,
                stop,
                seed,
            },
        )
}

fn role_name(role: Role) -> &'static str {
    role.as_str()
}

fn assert_same_messages(input: &TurnInput, sent: &[Sent]) -> Result<(), TestCaseError> {
    prop_assert_eq!(input.messages.len(), sent.len());
    for (got, want) in input.messages.iter().zip(sent) {
        prop_assert_eq!(got.role, want.role);
        prop_assert_eq!(&got.content, &want.text);
    }
    Ok(())
}

/// The same number, give or take the last bit: serde_json (without its `float_roundtrip`
/// feature) may read a decimal one ulp off, which no sampler can tell apart.
fn close(got: Option<f64>, sent: Option<f64>) -> bool {
    match (got, sent) {
        (Some(a), Some(b)) => (a - b).abs() <= f64::EPSILON * b.abs().max(1.0),
        (a, b) => a == b,
    }
}

fn assert_same_settings(
    input: &TurnInput,
    s: &Settings,
    default_stream: bool,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(&input.model, &s.model);
    prop_assert_eq!(
        input.response,
        ResponseMode::from_stream(s.stream.unwrap_or(default_stream))
    );
    prop_assert!(
        close(input.params.temperature, s.temperature),
        "{:?}",
        input.params.temperature
    );
    prop_assert!(
        close(input.params.top_p, s.top_p),
        "{:?}",
        input.params.top_p
    );
    prop_assert_eq!(input.params.max_tokens, s.max_tokens);
    prop_assert_eq!(&input.params.stop, &s.stop);
    prop_assert_eq!(input.params.seed, s.seed);
    Ok(())
}

/// With a user message that is not blank last, the turn's prompt is exactly its text.
fn assert_prompt_is_last_user_text(
    turn: Result<Option<Turn>, ApiError>,
    sent: &[Sent],
) -> Result<(), TestCaseError> {
    let last_user = sent.iter().rposition(|m| m.role == Role::User);
    match last_user {
        Some(i) if !sent[i].text.trim().is_empty() => match turn {
            Ok(Some(turn)) => prop_assert_eq!(&turn.prompt, &sent[i].text),
            Ok(None) => prop_assert!(false, "no turn"),
            // Only a model name the router cannot take may still refuse it.
            Err(e) => prop_assert_eq!(field_of(&e), "model"),
        },
        _ => {
            if let Err(e) = turn {
                prop_assert_eq!(field_of(&e), "messages");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn any_bytes_give_a_turn_or_a_400_naming_a_field(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        for result in [front_door::<OpenAiChat>(&bytes), front_door::<OllamaChat>(&bytes)] {
            if let Err(e) = result {
                field_of(&e);
            }
        }
    }

    #[test]
    fn any_json_gives_a_turn_or_a_400_naming_a_field(v in any_json()) {
        let body = serde_json::to_vec(&v).unwrap();
        for result in [front_door::<OpenAiChat>(&body), front_door::<OllamaChat>(&body)] {
            if let Err(e) = result {
                let field = field_of(&e);
                // Only a body that is not an object at all is refused as a whole.
                prop_assert!(field != "body" || !v.is_object(), "{field} for {v}");
            }
        }
    }

    #[test]
    fn a_broken_openai_field_is_the_one_named((body, field) in broken(valid_openai, OPENAI_FIELDS)) {
        if let Err(e) = front_door::<OpenAiChat>(&serde_json::to_vec(&body).unwrap()) {
            let named = field_of(&e);
            prop_assert_eq!(top(&named), field, "{} for {}", named, body);
        }
    }

    #[test]
    fn a_broken_ollama_field_is_the_one_named((body, field) in broken(valid_ollama, OLLAMA_FIELDS)) {
        if let Err(e) = front_door::<OllamaChat>(&serde_json::to_vec(&body).unwrap()) {
            let named = field_of(&e);
            prop_assert_eq!(top(&named), field, "{} for {}", named, body);
        }
    }

}

proptest! {
    // A turn is built from each (hashing, history): fewer cases.
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_valid_openai_body_arrives_as_sent(
        sent in prop::collection::vec(sent_message(), 1..6),
        s in settings(),
    ) {
        let messages: Vec<Value> = sent
            .iter()
            .map(|m| match &m.parts {
                Some(parts) => {
                    let parts: Vec<Value> = parts.iter().map(|t| json!({"type": "text", "text": t})).collect();
                    json!({"role": role_name(m.role), "content": parts})
                }
                None => json!({"role": role_name(m.role), "content": m.text}),
            })
            .collect();
        let mut body = json!({"messages": messages, "stop": s.stop});
        for (k, v) in [
            ("model", s.model.clone().map(Value::from)),
            ("stream", s.stream.map(Value::from)),
            ("temperature", s.temperature.map(Value::from)),
            ("top_p", s.top_p.map(Value::from)),
            ("max_tokens", s.max_tokens.map(Value::from)),
            ("seed", s.seed.map(Value::from)),
        ] {
            if let Some(v) = v {
                body[k] = v;
            }
        }
        let bytes = serde_json::to_vec(&body).unwrap();
        let input = input_of::<OpenAiChat>(&bytes);
        assert_same_messages(&input, &sent)?;
        assert_same_settings(&input, &s, false)?;
        assert_prompt_is_last_user_text(front_door::<OpenAiChat>(&bytes), &sent)?;
    }

    #[test]
    fn a_valid_ollama_body_arrives_as_sent(
        sent in prop::collection::vec(sent_message(), 1..6),
        s in settings(),
    ) {
        let messages: Vec<Value> = sent
            .iter()
            .map(|m| json!({"role": role_name(m.role), "content": m.text}))
            .collect();
        let mut options = json!({"stop": s.stop});
        for (k, v) in [
            ("temperature", s.temperature.map(Value::from)),
            ("top_p", s.top_p.map(Value::from)),
            ("num_predict", s.max_tokens.map(Value::from)),
            ("seed", s.seed.map(Value::from)),
        ] {
            if let Some(v) = v {
                options[k] = v;
            }
        }
        let mut body = json!({"messages": messages, "options": options});
        if let Some(m) = &s.model {
            body["model"] = json!(m);
        }
        if let Some(stream) = s.stream {
            body["stream"] = json!(stream);
        }
        let bytes = serde_json::to_vec(&body).unwrap();
        let input = input_of::<OllamaChat>(&bytes);
        assert_same_messages(&input, &sent)?;
        assert_same_settings(&input, &s, true)?;
        assert_prompt_is_last_user_text(front_door::<OllamaChat>(&bytes), &sent)?;
    }
}

/// Found while writing the properties above: a `chat_id` the thread id cannot take was refused as
/// "thread id: …", a name that is no field of the body.
#[test]
fn a_chat_id_that_cannot_be_a_thread_names_its_field() {
    let mut body = valid_openai();
    for bad in [json!("x".repeat(300)), json!("bell\u{7}")] {
        body["chat_id"] = bad;
        let e = front_door::<OpenAiChat>(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert_eq!(field_of(&e), "chat_id");
    }
}
