//! JSON bodies in and out: parsing that names the bad field, and writing serde values
//! into a reused buffer. Shared by the OpenAI and Ollama front doors.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A request body that could not be understood; `path` names the field (`messages[2].content`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct BodyError {
    pub path: String,
    pub message: String,
}

impl BodyError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Parses a JSON body; unknown fields are ignored, trailing garbage is an error.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(BodyError::new(
            "body",
            "the request body is empty; expected JSON",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return BodyError::new("body", format!("malformed JSON: {inner}"));
        }
        let path = if matches!(path.as_str(), "." | "?" | "") {
            "body".to_owned()
        } else {
            path
        };
        BodyError::new(path, inner.to_string())
    })?;
    de.end()
        .map_err(|e| BodyError::new("body", e.to_string()))?;
    Ok(value)
}

/// Appends `value` as JSON to `out`. Our wire structs cannot fail to serialise; if one
/// ever did, `out` is left as it was and the failure is logged.
pub fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let len = out.len();
    if let Err(error) = serde_json::to_writer(&mut *out, value) {
        out.truncate(len);
        tracing::error!(%error, "a response frame could not be serialised");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_body::<Outer>(br#"{"items":[{"n":1},{"n":"x"}]}"#).unwrap_err();
        assert_eq!(e.path, "items[1].n");
        let e = parse_body::<Outer>(b"{").unwrap_err();
        assert_eq!(e.path, "body");
        let e = parse_body::<Outer>(br#"{"items":[]} x"#).unwrap_err();
        assert_eq!(e.path, "body");
        assert!(parse_body::<Outer>(br#"{"items":[],"extra":true}"#).is_ok());
    }

    #[test]
    fn write_json_appends() {
        let mut out = b"data: ".to_vec();
        write_json(&mut out, &serde_json::json!({"a": 1}));
        assert_eq!(out, br#"data: {"a":1}"#);
    }
}
