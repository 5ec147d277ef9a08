//! What the fake answers: the deterministic reply rules (echo or model-like prose, script,
//! tool call, tool result, length limit), tokenisation, synthetic timings and hashed
//! embeddings. Shared by the Ollama and OpenAI routes, which only differ in how they put it
//! on the wire.

use std::time::Duration;

use serde_json::Value;

use super::{Answers, Model, Script, splitmix};
use crate::lang::{Lang, detect_language};

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
    answers: Answers,
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
            reply.content = if is_template(text) {
                template_answer(text)
            } else {
                let n =
                    fixed.unwrap_or_else(|| min + (fnv(text) as usize) % (max - min + 1).max(1));
                prose_answer(text, n)
            };
        }
        (None, Last::User(text)) if answers == Answers::Realistic => {
            reply.content = if is_template(text) {
                template_answer(text)
            } else if let Some(n) = fixed {
                prose_answer(text, n)
            } else {
                realistic_answer(text)
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

/// Sentences of a Japanese model's typical answer, in the order the slow realistic mode
/// cycles through them: acknowledgements, general advice, closing offers.
const JA_PROSE: [&str; 15] = [
    JA_OPENERS[0],
    JA_OPENERS[1],
    JA_ADVICE[0],
    JA_ADVICE[1],
    JA_ADVICE[2],
    JA_OPENERS[2],
    JA_ADVICE[3],
    JA_ADVICE[4],
    JA_CLOSERS[0],
    JA_OPENERS[3],
    JA_ADVICE[5],
    JA_ADVICE[6],
    JA_ADVICE[7],
    JA_CLOSERS[1],
    JA_CLOSERS[2],
];

/// An answer of exactly `n` tokens of prose, chosen deterministically from `seed`, in the
/// language of `seed`: words in English; in Japanese, characters written as models write
/// them, without spaces (see [`tokens`]), so that the answer sent back as history is about
/// as many prompt tokens as it was generated tokens, as with a real model.
fn prose_answer(seed: &str, n: usize) -> String {
    let mut out = String::with_capacity(n * 6);
    match detect_language(seed) {
        Lang::En => {
            let start = (fnv(seed) as usize) % PROSE.len();
            let words = PROSE
                .iter()
                .cycle()
                .skip(start)
                .flat_map(|s| s.split_whitespace());
            for word in words.take(n) {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(word);
            }
        }
        Lang::Ja => {
            let start = (fnv(seed) as usize) % JA_PROSE.len();
            let sentences = JA_PROSE.iter().cycle().skip(start);
            for sentence in sentences {
                if n == 0 || tokens(&out).count() >= n {
                    break;
                }
                out.push_str(sentence);
            }
            let cut = tokens(&out).nth(n).map(|(at, _)| at);
            if let Some(cut) = cut {
                out.truncate(cut);
            }
        }
    }
    out
}

/// The sentence pools of [`realistic_answer`] for one language.
struct Pools {
    /// An acknowledgement: the first sentence.
    openers: &'static [&'static str],
    /// General advice: the middle sentences (at least one, each at most once).
    advice: &'static [&'static str],
    /// A closing offer: the last sentence.
    closers: &'static [&'static str],
    /// What goes between sentences.
    separator: &'static str,
}

const EN_POOLS: Pools = Pools {
    openers: &[
        "That is a good question, and there are a few things worth checking first.",
        "Thanks for asking; here is how I would think about it.",
        "Good point, let me walk you through the main options.",
        "I see what you mean, and it is a fairly common situation.",
    ],
    advice: &[
        "In most home setups the simplest approach is also the most reliable one.",
        "Start with the defaults, measure what you actually see, and change one thing at a time.",
        "If the problem persists, the logs usually point to the part that misbehaves.",
        "Keep in mind that hardware differences matter more than small configuration tweaks.",
        "A backup before any larger change saves a lot of trouble later.",
        "Many people find it useful to write down what they changed and why.",
        "It often helps to try a change on a small scale before relying on it.",
        "Small, reversible steps make it easier to see what made the difference.",
    ],
    closers: &[
        "Let me know if you want a step-by-step version of any of these.",
        "I hope this helps you decide what to try next.",
        "Feel free to ask again if anything is unclear.",
    ],
    separator: " ",
};

const JA_OPENERS: [&str; 4] = [
    "なるほど、よくわかりました。",
    "ご質問ありがとうございます、いくつかのポイントに分けてお答えします。",
    "大切なポイントですね、順番に整理してみましょう。",
    "よくあるお悩みですので、どうぞ安心してください。",
];
const JA_ADVICE: [&str; 8] = [
    "状況によって最適な方法は少し変わります。",
    "まずは基本的な設定のまま試して、実際の様子を確かめるのがおすすめです。",
    "一度にたくさん変えずに、ひとつずつ変えていくと原因がわかりやすくなります。",
    "うまくいかない場合は、記録やログを見ると手がかりが見つかることが多いです。",
    "大きな変更をする前には、念のためバックアップを取っておくと安心です。",
    "何を変えたのかをメモしておくと、あとで振り返るときに役立ちます。",
    "無理をせず、できるところから少しずつ始めてみてください。",
    "時間に余裕があるときに、いくつかの方法を比べてみるのもよいと思います。",
];
const JA_CLOSERS: [&str; 3] = [
    "ほかにも気になることがあれば、いつでも聞いてくださいね。",
    "少しでも参考になれば、とてもうれしいです。",
    "もっと詳しい手順が必要でしたら、お気軽にお知らせください。",
];

/// Japanese is written as models write it: no spaces between sentences.
const JA_POOLS: Pools = Pools {
    openers: &JA_OPENERS,
    advice: &JA_ADVICE,
    closers: &JA_CLOSERS,
    separator: "",
};

/// Bounds of a realistic answer, in characters.
const ANSWER_CHARS: (usize, usize) = (80, 400);

/// [`Answers::Realistic`]: an acknowledgement, general advice and a closing offer (3 to 6
/// sentences, 80 to 400 characters) in the language of `text`, chosen deterministically
/// from it, none of it restating it.
fn realistic_answer(text: &str) -> String {
    let pools = match detect_language(text) {
        Lang::Ja => &JA_POOLS,
        Lang::En => &EN_POOLS,
    };
    let mut state = fnv(text);
    let mut draw = |n: usize| (splitmix(&mut state) % n as u64) as usize;
    let opener = pools.openers[draw(pools.openers.len())];
    let closer = pools.closers[draw(pools.closers.len())];
    // The advice in a drawn order (Fisher-Yates), of which the first 1 to 4 are used.
    let mut advice: Vec<&str> = pools.advice.to_vec();
    for i in (1..advice.len()).rev() {
        advice.swap(i, draw(i + 1));
    }
    let mut used = 1 + draw(4);
    let chars = |used: usize| {
        let sentences = [opener, closer]
            .into_iter()
            .chain(advice[..used].iter().copied());
        sentences.map(|s| s.chars().count()).sum::<usize>() + (used + 1) * pools.separator.len()
    };
    while used > 1 && chars(used) > ANSWER_CHARS.1 {
        used -= 1;
    }
    while used < advice.len().min(4) && chars(used) < ANSWER_CHARS.0 {
        used += 1;
    }
    let mut sentences = vec![opener];
    sentences.extend_from_slice(&advice[..used]);
    sentences.push(closer);
    sentences.join(pools.separator)
}

/// Whether the prompt is an Open WebUI task template (title, tags, follow-ups, ...).
fn is_template(text: &str) -> bool {
    text.trim_start().starts_with("### Task:")
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

/// Splits text into tokens as a model's tokenizer roughly does: a word with its leading
/// space in scripts that separate words, one character in Chinese and Japanese (whose
/// tokenizers give about one token per character), which is also what the simulation
/// counts them as when they come back in a prompt (`sim::estimate_tokens`). Yields each
/// token's byte offset and text.
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let rest = text.get(start..).filter(|r| !r.is_empty())?;
        let mut chars = rest.char_indices();
        let (_, first) = chars.next()?;
        let wide = super::sim::is_wide(first);
        let end = chars
            .find(|&(_, c)| wide || c == ' ' || super::sim::is_wide(c))
            .map_or(rest.len(), |(i, _)| i);
        let from = start;
        start += end;
        Some((from, &rest[..end]))
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

/// A vector cut to `dimensions` and normalised again, as models that can shorten their
/// vectors do; unchanged when not asked or not shorter.
pub(crate) fn shortened(mut v: Vec<f32>, dimensions: Option<usize>) -> Vec<f32> {
    let Some(n) = dimensions.filter(|n| *n > 0 && *n < v.len()) else {
        return v;
    };
    v.truncate(n);
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
