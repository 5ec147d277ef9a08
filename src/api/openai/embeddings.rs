//! `POST /v1/embeddings`: `input` a string or a list of strings, `encoding_format`
//! `float` (the default) or `base64` (each vector's little-endian `f32` bytes), and
//! `dimensions` passed on to the backend; the answer is OpenAI's `list` of `embedding`
//! objects. The work is [`AppState::embed`].

use axum::Extension;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::ser::{Serialize, SerializeSeq, Serializer};

use super::{BodyError, parse_body, write_json};
use crate::api::embeddings::{Input, dimensions, headers, texts};
use crate::api::error::ApiError;
use crate::api::http::JsonBody;
use crate::people::Caller;
use crate::service::AppState;
use crate::service::embed::{EmbedAsk, Embeddings};

#[derive(Debug, Deserialize)]
pub struct EmbeddingsRequest {
    pub model: Option<String>,
    pub input: Option<Input>,
    pub encoding_format: Option<String>,
    pub dimensions: Option<i64>,
    pub user: Option<serde_json::Value>,
}

/// How the vectors are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Float,
    Base64,
}

impl Encoding {
    fn parse(s: Option<&str>) -> Result<Self, BodyError> {
        match s {
            None | Some("float") => Ok(Self::Float),
            Some("base64") => Ok(Self::Base64),
            Some(_) => Err(BodyError::new(
                "encoding_format",
                "must be \"float\" or \"base64\"",
            )),
        }
    }
}

/// `POST /v1/embeddings`.
pub async fn embeddings(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<JsonBody, ApiError>,
) -> Result<Response, ApiError> {
    let JsonBody(body) = body?;
    let req: EmbeddingsRequest = parse_body(&body)?;
    let encoding = Encoding::parse(req.encoding_format.as_deref())?;
    let ask = EmbedAsk {
        inputs: texts(req.input, "input")?,
        dimensions: dimensions(req.dimensions, "dimensions")?,
        model: req.model,
        person: caller.person,
    };
    let done = state.embed(ask).await?;
    let mut out = Vec::with_capacity(4096);
    encode_embeddings(&mut out, &done, encoding);
    let mut res = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        out,
    )
        .into_response();
    res.headers_mut().extend(headers(&done));
    Ok(res)
}

/// Appends the `list` body for `done` to `out`.
pub fn encode_embeddings(out: &mut Vec<u8>, done: &Embeddings, encoding: Encoding) {
    #[derive(serde::Serialize)]
    struct Usage {
        prompt_tokens: u32,
        total_tokens: u32,
    }
    #[derive(serde::Serialize)]
    struct List<'a> {
        object: &'static str,
        data: Data<'a>,
        model: &'a str,
        usage: Usage,
    }
    write_json(
        out,
        &List {
            object: "list",
            data: Data {
                vectors: &done.vectors,
                encoding,
            },
            model: done.model.as_str(),
            usage: Usage {
                prompt_tokens: done.prompt_tokens,
                total_tokens: done.prompt_tokens,
            },
        },
    );
}

struct Data<'a> {
    vectors: &'a [Vec<f32>],
    encoding: Encoding,
}

impl Serialize for Data<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct Item<T> {
            object: &'static str,
            index: usize,
            embedding: T,
        }
        let mut seq = s.serialize_seq(Some(self.vectors.len()))?;
        for (index, v) in self.vectors.iter().enumerate() {
            match self.encoding {
                Encoding::Float => seq.serialize_element(&Item {
                    object: "embedding",
                    index,
                    embedding: v,
                })?,
                Encoding::Base64 => seq.serialize_element(&Item {
                    object: "embedding",
                    index,
                    embedding: base64_f32(v),
                })?,
            }
        }
        seq.end()
    }
}

/// A vector's little-endian `f32` bytes in standard base64 (with padding), as OpenAI's
/// `encoding_format: "base64"` writes it.
pub fn base64_f32(v: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ModelName, TaskId, WorkerName};

    fn done(vectors: Vec<Vec<f32>>) -> Embeddings {
        Embeddings {
            task_id: TaskId::new(),
            model: ModelName::parse("nomic-embed-text").unwrap(),
            worker: WorkerName::parse("moon").unwrap(),
            vectors,
            prompt_tokens: 3,
            total_ms: 5,
        }
    }

    #[test]
    fn base64_is_the_little_endian_f32_bytes() {
        assert_eq!(base64_f32(&[]), "");
        // 1.0 = 00 00 80 3f; -2.0 = 00 00 00 c0.
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.0]), "AACAPwAAAMA=");
        assert_eq!(base64_f32(&[0.5, 0.25, 1.0]), "AAAAPwAAgD4AAIA/");
    }

    #[test]
    fn list_bodies_are_pinned_in_floats_and_base64() {
        let d = done(vec![vec![0.5, -0.25], vec![1.0, 0.0]]);
        let mut out = Vec::new();
        encode_embeddings(&mut out, &d, Encoding::Float);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]},{"object":"embedding","index":1,"embedding":[1.0,0.0]}],"model":"nomic-embed-text","usage":{"prompt_tokens":3,"total_tokens":3}}"#
        );
        let mut out = Vec::new();
        encode_embeddings(&mut out, &d, Encoding::Base64);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAAPwAAgL4="},{"object":"embedding","index":1,"embedding":"AACAPwAAAAA="}],"model":"nomic-embed-text","usage":{"prompt_tokens":3,"total_tokens":3}}"#
        );
    }

    #[test]
    fn encoding_format_is_float_or_base64() {
        assert_eq!(Encoding::parse(None).unwrap(), Encoding::Float);
        assert_eq!(Encoding::parse(Some("base64")).unwrap(), Encoding::Base64);
        assert_eq!(
            Encoding::parse(Some("hex")).unwrap_err().path,
            "encoding_format"
        );
    }
}
