//! Context windows: how many tokens a composed request holds, how large a window it gets
//! on a machine, and what is trimmed when even the largest window allowed cannot hold it.
//!
//! The service sizes the request before it is recorded ([`budget::trim`], called from
//! [`crate::service`]): history oldest first, then memory lowest score first, and the row
//! says what went. The worker then picks the `num_ctx` it sends to Ollama with
//! [`choose_num_ctx`], from what its registry knows of the machine
//! ([`crate::backend::registry::WorkerStatus`]): stable sizes, the resident model's own
//! window when that already fits, never above the model's window or the backend's
//! `max_num_ctx`. Nothing is left for a backend to cut silently.

pub mod budget;

use serde::{Deserialize, Serialize};

use crate::chat::ChatMessage;
use crate::domain::ModelName;
use crate::lang::Lang;

/// Ollama's window when a request does not set `num_ctx` (older releases; the machines
/// of the household benchmark).
pub const OLLAMA_DEFAULT_NUM_CTX: u32 = 4096;

/// The largest `num_ctx` sent to an Ollama backend without `max_num_ctx`: it bounds the
/// key-value cache a model's window costs in (V)RAM.
pub const DEFAULT_MAX_NUM_CTX: u32 = 16_384;

/// Tokens kept free for the answer when the request does not say how long it may be.
pub const DEFAULT_ANSWER_RESERVE: u32 = 1024;

/// Template tokens a chat format adds around each message (role markers).
const MESSAGE_OVERHEAD: u32 = 4;

/// A token estimate of `text`: about four characters per token for alphabetic scripts,
/// one per CJK character (kana, kanji, hangul, full-width forms).
///
/// Every composed request is counted several times on its way (fitting, placement, the
/// worker's slot), so runs of ASCII are counted eight bytes at a time and only the other
/// characters are decoded.
pub fn estimate_text_tokens(text: &str) -> u32 {
    let (mut narrow, mut wide) = (0usize, 0usize);
    let mut rest = text;
    loop {
        let ascii = ascii_prefix_len(rest.as_bytes());
        narrow += ascii;
        rest = &rest[ascii..];
        let Some(c) = rest.chars().next() else {
            break;
        };
        match is_wide(c) {
            true => wide += 1,
            false => narrow += 1,
        }
        rest = &rest[c.len_utf8()..];
    }
    saturate(wide).saturating_add(saturate(narrow).div_ceil(4))
}

/// How many bytes at the start of `bytes` are ASCII.
fn ascii_prefix_len(bytes: &[u8]) -> usize {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let mut n = 0;
    for chunk in bytes.chunks_exact(8) {
        let word = u64::from_ne_bytes(chunk.try_into().unwrap_or([0x80; 8]));
        if word & HIGH_BITS != 0 {
            break;
        }
        n += 8;
    }
    n + bytes[n..].iter().take_while(|b| b.is_ascii()).count()
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn is_wide(c: char) -> bool {
    matches!(u32::from(c), 0x3000..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF00..=0xFFEF)
}

/// One message's tokens: its text, its tool calls' names and arguments, and the template
/// around it. Images are not counted.
pub fn message_tokens(m: &ChatMessage) -> u32 {
    let calls: u32 = m
        .tool_calls
        .iter()
        .map(|c| estimate_text_tokens(&c.name) + estimate_text_tokens(&c.arguments))
        .sum();
    estimate_text_tokens(&m.content) + calls + MESSAGE_OVERHEAD
}

/// The prompt tokens of a whole request.
pub fn request_tokens(messages: &[ChatMessage]) -> u32 {
    messages.iter().map(message_tokens).sum()
}

/// Room kept for the answer: the request's own limit (`max_tokens`, `num_predict`), else
/// [`DEFAULT_ANSWER_RESERVE`].
pub fn answer_reserve(max_tokens: Option<u32>) -> u32 {
    max_tokens.unwrap_or(DEFAULT_ANSWER_RESERVE)
}

/// What a machine can give one model: its own window (`/api/show`, or config) and the
/// backend's cap. Either may be unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// The model's maximum window.
    pub context_length: Option<u32>,
    /// `[[backends]] max_num_ctx` (Ollama: [`DEFAULT_MAX_NUM_CTX`] when not set).
    pub max_num_ctx: Option<u32>,
}

impl Window {
    /// The most tokens a request may fill here, prompt and answer together; `None` when
    /// nothing is known (an OpenAI-compatible server without config).
    pub fn limit(self) -> Option<u32> {
        match (self.context_length, self.max_num_ctx) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The `num_ctx` to send to Ollama for a request that needs `need` tokens (prompt and
/// answer): the client's own `num_ctx` when it set one (capped by `limit`); else the
/// resident model's window when that already holds it (no reload); else Ollama's default
/// when the request needs at most half of it, and beyond that the whole `limit` at once.
/// Every other size reloads the model (seconds, and the prompt cache with it): a chat that
/// grows past the default reloads once, not at every step, and `limit` (the model's window
/// within `max_num_ctx`) is what bounds the memory it costs. A chat that needs more than
/// half the default when its model is loaded (a pasted log, long notes) outgrows it within
/// a turn or two, each adding a prompt and an answer, so it is loaded wide at once rather
/// than loaded and reloaded. So is a model that has needed more than the default on this
/// machine before (`wide`): the household's long chats cost it one load.
pub fn choose_num_ctx(
    need: u32,
    user: Option<u32>,
    resident: Option<u32>,
    limit: u32,
    wide: bool,
) -> u32 {
    if let Some(own) = user {
        return own.min(limit);
    }
    match resident {
        Some(r) if r >= need && r <= limit => r,
        _ if need <= OLLAMA_DEFAULT_NUM_CTX / 2 && !wide => OLLAMA_DEFAULT_NUM_CTX.min(limit),
        _ => limit,
    }
}

/// The window of one model on one backend, as `GET /workers` shows it and heartbeats carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelWindow {
    pub model: ModelName,
    /// The model's maximum window: `[[backends]] model_context_length` or
    /// `context_length`, else what `/api/show` reported.
    pub context_length: Option<u32>,
    /// The window the resident model was loaded with (`/api/ps` `context_length`, or the
    /// last `num_ctx` sent), while it is resident.
    pub loaded_num_ctx: Option<u32>,
    /// Whether it has been loaded here with more than Ollama's default window: its next
    /// load gets the whole limit (see [`choose_num_ctx`]).
    #[serde(default)]
    pub wide: bool,
}

/// A request whose prompt alone does not fit the largest window allowed. Refused before
/// anything is recorded: sending it would have its start cut by the backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", too_long_message(*.tokens, *.room, *.lang))]
pub struct PromptTooLong {
    /// The estimated tokens of what cannot be trimmed (system messages, the prompt).
    pub tokens: u32,
    /// Tokens the window leaves for the prompt once the answer has its room.
    pub room: u32,
    pub lang: Lang,
}

fn too_long_message(tokens: u32, room: u32, lang: Lang) -> String {
    match lang {
        Lang::Ja => format!(
            "メッセージが長すぎます（推定 {tokens} トークン。このモデルに送れるのは約 {room} トークンまでです）。短くするか、より大きなコンテキストのモデルを選んでください。"
        ),
        Lang::En => format!(
            "the message is too long: about {tokens} tokens, and this model takes about {room}; shorten it or choose a model with a larger context window"
        ),
    }
}

#[cfg(test)]
mod tests;
