//! The body of the legacy `POST completions`, for a turn asked as a text completion that a
//! chat cannot say (`SamplingParams::text` with a suffix or a raw prompt): `prompt` as
//! written (no system text), `suffix` for fill-in-the-middle, and the sampling a chat has. Its `text_completion`
//! answers carry `choices[].text`, which [`super::SseDecoder`] reads too.

use serde::Serialize;

use super::StreamOptions;
use crate::backend::BackendRequest;
use crate::chat::TextForm;

#[derive(Serialize)]
pub(super) struct CompletionRequest<'a> {
    model: &'a str,
    prompt: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    suffix: Option<&'a str>,
    pub(super) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
}

impl<'a> CompletionRequest<'a> {
    /// The prompt exactly as written: the endpoint has no place for system text, and
    /// putting it before the prompt would change what is continued (or filled in).
    pub(super) fn from_request(req: &'a BackendRequest, form: &'a TextForm) -> Self {
        let p = &req.params;
        let parts = req.text_parts();
        if parts.system.is_some() {
            tracing::debug!(model = %req.model, "system text left out of a legacy completion");
        }
        Self {
            model: req.model.as_str(),
            prompt: parts.prompt,
            suffix: form.suffix.as_deref(),
            stream: true,
            stream_options: None,
            temperature: p.temperature,
            top_p: p.top_p,
            max_tokens: p.max_tokens,
            stop: &p.stop,
            seed: p.seed,
        }
    }
}
