//! HTTP plumbing every front door shares: JSON bodies in and out (parsing that names the
//! bad field, our extractor that answers in our error format, writing into a reused
//! buffer), and what a request says besides its body (Open WebUI's headers, who the
//! client is, whether the turn may be remembered), gathered into one [`ClientContext`].

use axum::extract::{FromRequest, Request};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::domain::Priority;
use crate::people::Caller;
use crate::turn::ClientContext;

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
        let mut message = inner.to_string();
        if inner.is_syntax() || inner.is_eof() {
            // serde_json calls some shapes syntax errors too (an array where an enum or a
            // struct of fewer fields is due): only text that is no JSON at all is malformed.
            if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
                return BodyError::new("body", format!("malformed JSON: {message}"));
            }
            message = format!("unexpected value here ({message})");
        }
        let path = match (path.as_str(), field_named_by(&message)) {
            // A missing or repeated field is reported at its parent: name the field.
            ("." | "?" | "", Some(field)) => field.to_owned(),
            (_, Some(field)) => format!("{path}.{field}"),
            ("." | "?" | "", None) => "body".to_owned(),
            (_, None) => path,
        };
        BodyError::new(path, message)
    })?;
    de.end()
        .map_err(|e| BodyError::new("body", e.to_string()))?;
    Ok(value)
}

/// The field of serde's "missing field `x`" and "duplicate field `x`" errors.
fn field_named_by(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("missing field `")
        .or_else(|| message.strip_prefix("duplicate field `"))?;
    rest.split('`').next().filter(|f| !f.is_empty())
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

/// The largest request body read (a chat with a long history fits many times over).
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// A JSON request body, still as bytes. It must say `Content-Type: application/json`
/// (parameters such as `; charset=utf-8` allowed): a web page cannot send that to another
/// origin without the browser asking first, so a page cannot post prompts behind the
/// user's back. A body that is too large, too slow or cut off gets our error too.
#[derive(Debug, Clone)]
pub struct JsonBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        require_json(req.headers())?;
        Ok(Self(Bytes::from_request(req, state).await?))
    }
}

/// `Ok` when the request says its body is JSON.
fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Err(ApiError::UnsupportedMediaType(
            "the request has no Content-Type; send the JSON body with Content-Type: application/json"
                .to_owned(),
        ));
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    let essence = text.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    let shown: String = text.chars().take(100).collect();
    Err(ApiError::UnsupportedMediaType(format!(
        "Content-Type {shown:?} is not accepted; send the JSON body with Content-Type: application/json"
    )))
}

/// Like `axum::Json`, but errors are ours: 415 without the JSON content type, 413 for a
/// body over [`BODY_LIMIT`], 400 naming the bad field.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let JsonBody(bytes) = JsonBody::from_request(req, state).await?;
        Ok(ApiJson(parse_body(&bytes)?))
    }
}

/// A header's value, when it is present, readable and not blank.
pub fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .filter(|v| !v.trim().is_empty())
}

/// Who the client is, for the fallback thread id: the user header, else the API key's hash.
pub fn client_identity(headers: &HeaderMap) -> Option<String> {
    header(headers, "x-openwebui-user-id").or_else(|| {
        header(headers, "authorization")
            .or_else(|| header(headers, "x-api-key"))
            .map(|a| {
                use sha2::{Digest, Sha256};
                let d = Sha256::digest(a.as_bytes());
                crate::domain::hex(&d[..8])
            })
    })
}

/// Whether the request lets its turn be remembered: not when it says
/// `X-Coordinator-Remember: false` (or `0`, `no`, `off`).
fn allows_memory(headers: &HeaderMap) -> bool {
    !header(headers, "x-coordinator-remember").is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "false" | "0" | "no" | "off"
        )
    })
}

/// The header that sets a request's priority explicitly.
pub const PRIORITY_HEADER: &str = "X-Coordinator-Priority";

/// `X-Coordinator-Priority: interactive|background|batch`, when the request sets it; a
/// value that is none of them (or not text) is an error naming the header.
pub fn asked_priority(headers: &HeaderMap) -> Result<Option<Priority>, BodyError> {
    let Some(value) = headers.get(PRIORITY_HEADER) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| BodyError::new(PRIORITY_HEADER, "it is not readable text"))?;
    Priority::parse(text)
        .map(Some)
        .map_err(|e| BodyError::new(PRIORITY_HEADER, e.reason))
}

/// The client's identity, its Open WebUI headers, its say on memory and the priority it
/// asks for, for `caller`. A bad `X-Coordinator-Priority` is an error naming the header.
pub fn client_context(headers: &HeaderMap, caller: &Caller) -> Result<ClientContext, BodyError> {
    Ok(ClientContext {
        chat_id_header: header(headers, "x-openwebui-chat-id"),
        task_header: header(headers, "x-openwebui-task"),
        client_identity: client_identity(headers),
        remember: allows_memory(headers),
        person: caller.person.clone(),
        priority: asked_priority(headers)?,
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

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
        let e = parse_body::<Outer>(br#"{"extra":true}"#).unwrap_err();
        assert_eq!(e.path, "items");
        let e = parse_body::<Outer>(br#"{"items":[{}]}"#).unwrap_err();
        assert_eq!(e.path, "items[0].n");
        let e = parse_body::<Outer>(br#"{"items":[],"items":[]}"#).unwrap_err();
        assert_eq!(e.path, "items");
    }

    #[test]
    fn write_json_appends() {
        let mut out = b"data: ".to_vec();
        write_json(&mut out, &serde_json::json!({"a": 1}));
        assert_eq!(out, br#"data: {"a":1}"#);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn client_context_of(h: &HeaderMap) -> ClientContext {
        client_context(h, &Caller::household()).unwrap()
    }

    #[test]
    fn the_priority_header_sets_the_priority_and_a_bad_one_is_named() {
        assert_eq!(client_context_of(&headers(&[])).priority, None);
        for p in Priority::ALL {
            let h = headers(&[("x-coordinator-priority", p.as_str())]);
            assert_eq!(client_context_of(&h).priority, Some(p));
        }
        let h = headers(&[("x-coordinator-priority", "urgent")]);
        let e = client_context(&h, &Caller::household()).unwrap_err();
        assert_eq!(e.path, PRIORITY_HEADER);
        assert!(e.message.contains("urgent"), "{e}");
        let mut h = HeaderMap::new();
        h.insert(
            "x-coordinator-priority",
            HeaderValue::from_bytes(b"\xff").unwrap(),
        );
        assert_eq!(
            client_context(&h, &Caller::household()).unwrap_err().path,
            PRIORITY_HEADER
        );
    }

    #[test]
    fn the_remember_header_opts_out_with_any_no_word() {
        for no in ["false", "0", "no", "off", " OFF "] {
            let c = client_context_of(&headers(&[("x-coordinator-remember", no)]));
            assert!(!c.remember, "{no:?}");
        }
        for yes in ["true", "1", "yes", "", "maybe"] {
            let c = client_context_of(&headers(&[("x-coordinator-remember", yes)]));
            assert!(c.remember, "{yes:?}");
        }
        assert!(client_context_of(&HeaderMap::new()).remember);
    }

    #[test]
    fn blank_headers_are_absent_and_the_user_header_comes_before_the_key() {
        let c = client_context_of(&headers(&[
            ("x-openwebui-chat-id", "  "),
            ("x-openwebui-task", "title_generation"),
            ("x-openwebui-user-id", "u-1"),
            ("authorization", "Bearer k"),
        ]));
        assert_eq!(c.chat_id_header, None);
        assert_eq!(c.task_header.as_deref(), Some("title_generation"));
        assert_eq!(c.client_identity.as_deref(), Some("u-1"));
        let by_key = client_context_of(&headers(&[("authorization", "Bearer k")]));
        assert_eq!(by_key.client_identity.map(|k| k.len()), Some(16));
    }
}
