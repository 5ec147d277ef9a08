//! Our JSON extractor: a bad body gets our error format and names the bad field.

use axum::extract::{FromRequest, Request};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Like `axum::Json`, but errors are [`ApiError::BadRequest`] naming the field.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("could not read the request body: {e}")))?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Parses JSON, naming the path of the first bad field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; expected JSON",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() || path.is_empty() || path == "." {
            ApiError::bad_request(format!("malformed JSON body: {inner}"))
        } else {
            ApiError::BadRequest {
                message: format!("invalid field `{path}`: {inner}"),
                param: Some(path),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Body {
        prompt: String,
        nested: Option<Nested>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Nested {
        n: u32,
    }

    #[test]
    fn names_the_bad_field() {
        let err = parse_json::<Body>(br#"{"prompt":"x","nested":{"n":"no"}}"#).unwrap_err();
        assert!(err.to_string().contains("nested.n"), "{err}");
        let err = parse_json::<Body>(br#"{"prompt":3}"#).unwrap_err();
        assert!(err.to_string().contains("prompt"), "{err}");
        let err = parse_json::<Body>(b"{not json").unwrap_err();
        assert!(err.to_string().contains("malformed JSON"), "{err}");
        assert!(parse_json::<Body>(b"  ").is_err());
    }
}
