//! The body of Ollama's `POST /api/generate`, for a turn asked as a text completion
//! (`SamplingParams::text`): the prompt, `system`, `suffix` (fill-in-the-middle), `raw`,
//! images and the same `options`, `format`, `keep_alive` and `think` as a chat. Its
//! records carry `response` / `thinking`, which [`super::NdjsonDecoder`] reads too.

use serde::Serialize;
use serde_json::Value;

use super::{Options, format};
use crate::backend::BackendRequest;
use crate::chat::{TextForm, Think};

#[derive(Serialize)]
pub(super) struct GenerateRequest<'a> {
    model: &'a str,
    prompt: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    suffix: Option<&'a str>,
    /// Ollama refuses `system` with `raw`.
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    images: &'a [String],
    stream: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    raw: bool,
    #[serde(skip_serializing_if = "Options::is_empty")]
    options: Options<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keep_alive: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    think: Option<&'a Think>,
}

impl<'a> GenerateRequest<'a> {
    pub(super) fn from_request(req: &'a BackendRequest, form: &'a TextForm, stream: bool) -> Self {
        let p = &req.params;
        let parts = req.text_parts();
        Self {
            model: req.model.as_str(),
            prompt: parts.prompt,
            suffix: form.suffix.as_deref(),
            system: parts.system.filter(|_| !form.raw),
            images: parts.images,
            stream,
            raw: form.raw,
            options: Options::from_params(p),
            format: format(p),
            keep_alive: p.keep_alive.as_ref(),
            think: p.think.as_ref(),
        }
    }
}
