//! The body of the legacy `POST completions`, for a turn asked as a text completion that a
//! chat cannot say (`SamplingParams::text` with a suffix or a raw prompt): `prompt`,
//! `suffix` for fill-in-the-middle, and the sampling a chat has. Its `text_completion`
//! answers carry `choices[].text`, which [`super::SseDecoder`] reads too.

use serde::Serialize;

use super::StreamOptions;
use crate::backend::BackendRequest;
use crate::chat::TextForm;

#[derive(Serialize)]
pub(super) struct CompletionRequest<'a> {
    model: &'a str,
    prompt: String,
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
    /// The prompt as written; a system text (not raw) goes before it, as the completion
    /// endpoint has no place of its own for one.
    pub(super) fn from_request(req: &'a BackendRequest, form: &'a TextForm) -> Self {
        let p = &req.params;
        let parts = req.text_parts();
        let prompt = match parts.system {
            Some(system) if !form.raw => format!("{system}\n\n{}", parts.prompt),
            _ => parts.prompt.to_owned(),
        };
        Self {
            model: req.model.as_str(),
            prompt,
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
