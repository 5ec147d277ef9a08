//! Our JSON extractor: a bad body gets our error format and names the bad field.

use axum::extract::{FromRequest, Request};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::json::parse_body;

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
        Ok(ApiJson(parse_body(&bytes)?))
    }
}
