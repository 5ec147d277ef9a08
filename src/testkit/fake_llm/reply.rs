//! What the fake answers: the deterministic reply rules (echo, script, tool call, tool
//! result, length limit), tokenisation, synthetic timings and hashed embeddings. Shared by
//! the Ollama and OpenAI routes, which only differ in how they put it on the wire.

use std::time::Duration;

use serde_json::Value;

use super::{Model, Script};

/// The marker in the last user message that makes a tool-capable model call a tool.
pub(crate) const TOOL_MARKER: &str = "call tool ";
/// Dimension of the fake embedding vectors.
pub(crate) const EMBED_DIM: usize = 64;

/// The last message of the conversation, as far as the reply rules care.
pub(crate) enum Last {
    User(String),
    ToolResult { name: String, content: String },
    Other,
}

/// A request reduced to what decides the reply.
pub(crate) struct Prompt {
    pub last: Last,
    pub prompt_tokens: u32,
    /// Names of the offered tools.
    pub tools: Vec<String>,
    pub max_tokens: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    Stop,
    Length,
    ToolCalls,
}

pub(crate) struct FakeToolCall {
    pub name: String,
    pub arguments: Value,
}

/// The planned answer.
pub(crate) struct Reply {
    pub reasoning: String,
    pub content: String,
    pub tool_call: Option<FakeToolCall>,
    pub finish: Finish,
    pub prompt_tokens: u32,
}

impl Reply {
    /// No output at all (Ollama's model-load answer).
    pub fn empty() -> Self {
        Self {
            reasoning: String::new(),
            content: String::new(),
            tool_call: None,
            finish: Finish::Stop,
            prompt_tokens: 0,
        }
    }

    /// Generated tokens, as reported in usage: content and reasoning tokens, 1 per call.
    pub fn completion_tokens(&self) -> u32 {
        let n = tokens(&self.reasoning).count()
            + tokens(&self.content).count()
            + usize::from(self.tool_call.is_some());
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

/// Applies the reply rules (see the module doc of `fake_llm`).
pub(crate) fn plan(
    model: &Model,
    prompt: Prompt,
    script: Option<&Script>,
    fixed: Option<usize>,
    prose: Option<(usize, usize)>,
) -> Reply {
    let mut reply = Reply {
        reasoning: String::new(),
        content: String::new(),
        tool_call: None,
        finish: Finish::Stop,
        prompt_tokens: prompt.prompt_tokens,
    };
    if model.spec.tools {
        if let Last::User(text) = &prompt.last {
            reply.tool_call = requested_call(text, &prompt.tools);
        }
    }
    if reply.tool_call.is_some() {
        reply.finish = Finish::ToolCalls;
        return reply;
    }
    match (script, &prompt.last) {
        (Some(script), _) => {
            reply.content.clone_from(&script.content);
            reply.reasoning = script.reasoning.clone().unwrap_or_default();
        }
        (None, Last::ToolResult { name, content }) => {
            reply.content = format!("Tool {name} returned: {content}");
        }
        (None, Last::User(text)) if prose.is_some() => {
            let (min, max) = prose.unwrap_or_default();
            reply.content = if text.trim_start().starts_with("### Task:") {
                template_answer(text)
            } else {
                let n =
                    fixed.unwrap_or_else(|| min + (fnv(text) as usize) % (max - min + 1).max(1));
                prose_answer(text, n)
            };
        }
        (None, last) => {
            let text = match last {
                Last::User(text) => text.as_str(),
                _ => "",
            };
            reply.content = format!("Echo from {}: {}", model.spec.name, text.trim());
            if let Some(n) = fixed {
                reply.content = cycle_tokens(&reply.content, n);
            }
        }
    }
    if let Some(max) = prompt.max_tokens {
        let cut = tokens(&reply.content).nth(max).map(|(at, _)| at);
        if let Some(cut) = cut {
            reply.content.truncate(cut);
            reply.finish = Finish::Length;
        }
    }
    reply
}

/// Sentences of a model's typical answer: helpful, mostly not restating the question.
const PROSE: [&str; 12] = [
    "That is a good question, and there are a few things worth checking first.",
    "In most home setups the simplest approach is also the most reliable one.",
    "Start with the defaults, measure what you actually see, and change one thing at a time.",
    "If the problem persists, the logs usually point to the part that misbehaves.",
    "Keep in mind that hardware differences matter more than small configuration tweaks.",
    "Here is a short overview of the options, with the trade-offs of each.",
    "The first option is quick to try and easy to undo if it does not help.",
    "The second takes a little longer but tends to hold up better over time.",
    "A backup before any larger change saves a lot of trouble later.",
    "Many people find it useful to write down what they changed and why.",
    "Let me know if you want a step-by-step version of any of these.",
    "I hope this helps you decide what to try next.",
];

/// An answer of exactly `n` tokens of prose, chosen deterministically from `seed`.
fn prose_answer(seed: &str, n: usize) -> String {
    let start = (fnv(seed) as usize) % PROSE.len();
    let words = PROSE
        .iter()
        .cycle()
        .skip(start)
        .flat_map(|s| s.split_whitespace());
    let mut out = String::with_capacity(n * 6);
    for word in words.take(n) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The short JSON an Open WebUI task template asks for, keyed as the template says.
fn template_answer(text: &str) -> String {
    let answers: [(&str, &str); 5] = [
        (
            "\"follow_ups\"",
            r#"{"follow_ups": ["Can you explain that step by step?", "What are the risks of each option?", "Which one would you pick for a small home setup?"]}"#,
        ),
        ("\"title\"", r#"{"title": "🏠 Home setup questions"}"#),
        ("\"tags\"", r#"{"tags": ["Technology", "Home", "How-to"]}"#),
        ("\"queries\"", r#"{"queries": ["home server setup guide"]}"#),
        ("\"emoji\"", r#"{"emoji": "🙂"}"#),
    ];
    answers
        .iter()
        .find(|(key, _)| text.contains(key))
        .map_or(r#"{"text": "Done."}"#, |(_, answer)| answer)
        .to_owned()
}

/// FNV-1a of a text: the deterministic "randomness" of the answers.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `call tool <name> [{json}]` naming an offered tool.
fn requested_call(text: &str, offered: &[String]) -> Option<FakeToolCall> {
    let at = text.find(TOOL_MARKER)?;
    let rest = text[at + TOOL_MARKER.len()..].trim_start();
    let name_end = rest
        .find(|c: char| c.is_whitespace() || c == '{')
        .unwrap_or(rest.len());
    let name = &rest[..name_end];
    if !offered.iter().any(|t| t == name) {
        return None;
    }
    let arguments = match serde_json::from_str::<Value>(rest[name_end..].trim()) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Default::default()),
    };
    Some(FakeToolCall {
        name: name.to_owned(),
        arguments,
    })
}

/// Splits text into word tokens: each token after the first starts at a space. Yields the
/// token's byte offset and text.
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let from = start;
        let first = text[from..].chars().next()?.len_utf8();
        let next = text[from + first..]
            .find(' ')
            .map_or(text.len(), |i| from + first + i);
        start = next;
        Some((from, &text[from..next]))
    })
}

/// Exactly `n` tokens: the words of `text`, repeated.
fn cycle_tokens(text: &str, n: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = String::with_capacity(n * 6);
    for word in words
        .iter()
        .cycle()
        .take(if words.is_empty() { 0 } else { n })
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Whitespace-separated words across messages: the fake's prompt token count.
pub(crate) fn count_words<'a>(texts: impl Iterator<Item = &'a str>) -> u32 {
    let n: usize = texts.map(|t| t.split_whitespace().count()).sum();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Ollama's metrics in nanoseconds: synthetic (derived from counts, so streams are
/// stable) in the instant mode, simulated in the realistic one.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timings {
    pub total: u64,
    pub load: u64,
    pub prompt_eval: u64,
    pub eval: u64,
}

pub(crate) fn timings(reply: &Reply, token_delay: Duration) -> Timings {
    let per_token = u64::try_from(token_delay.as_nanos())
        .unwrap_or(u64::MAX)
        .max(1_000_000);
    let load = 1_000_000;
    let prompt_eval = u64::from(reply.prompt_tokens) * 100_000;
    let eval = u64::from(reply.completion_tokens()).saturating_mul(per_token);
    Timings {
        total: load + prompt_eval + eval,
        load,
        prompt_eval,
        eval,
    }
}

/// A deterministic unit vector from hashed character trigrams.
pub(crate) fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; EMBED_DIM];
    let chars: Vec<char> = format!("  {} ", text.to_lowercase()).chars().collect();
    for gram in chars.windows(3) {
        let h = gram.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
            let mut h = h;
            for b in (*c as u32).to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
            h
        });
        let index = usize::try_from(h % EMBED_DIM as u64).unwrap_or(0);
        v[index] += if h >> 63 == 1 { 1.0 } else { -1.0 };
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Embedding inputs: a string or a list of strings.
pub(crate) fn inputs(input: &Value) -> Vec<&str> {
    match input {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Names of the offered tools (`[{"type":"function","function":{"name":...}}]`).
pub(crate) fn tool_names(tools: Option<&Vec<Value>>) -> Vec<String> {
    tools
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name")?.as_str().map(str::to_owned))
        .collect()
}
