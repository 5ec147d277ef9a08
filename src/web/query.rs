//! The search query: short (at most [`MAX_QUERY_CHARS`]), standalone, and made of the
//! user's content words. Rules first ([`rules_query`]); an optional [`QueryRewriter`]
//! (the application's utility-lane model) may improve on them, and the rules' query is
//! used whenever it is absent, fails, times out or answers nothing usable.

use std::time::Duration;

use serde::Serialize;

use super::clean::{clean_text, collapse};
use super::followup;
use super::rewrite::{QueryRewriter, sanitize_model_query};
use crate::chat::ChatMessage;
use crate::lang::{Lang, detect_language};

/// The longest query ever sent to SearXNG, in characters.
pub const MAX_QUERY_CHARS: usize = 200;

/// Request endings and politeness, stripped from the end repeatedly (longest first).
const JA_ENDINGS: [&str; 44] = [
    "について教えてください",
    "について教えて下さい",
    "についておしえて",
    "について教えて",
    "を教えてください",
    "を教えて下さい",
    "をおしえてください",
    "をおしえて",
    "を教えて",
    "が知りたいです",
    "を知りたいです",
    "が知りたい",
    "を知りたい",
    "知りたい",
    "を調べてください",
    "を調べて",
    "調べて",
    "を検索して",
    "検索して",
    "教えてください",
    "教えて下さい",
    "おしえてください",
    "教えて",
    "おしえて",
    "お願いします",
    "おねがいします",
    "ください",
    "下さい",
    "とは何ですか",
    "って何ですか",
    "ってなに",
    "って何",
    "は何ですか",
    "はなんですか",
    "は何",
    "はどこ",
    "はいつ",
    "ですか",
    "でしょうか",
    "ますか",
    "について",
    "とは",
    "は",
    "を",
];
/// Hiragana runs that only glue content words together; they become spaces.
const JA_PARTICLES: [&str; 28] = [
    "の",
    "は",
    "を",
    "が",
    "で",
    "に",
    "と",
    "も",
    "へ",
    "や",
    "から",
    "まで",
    "より",
    "での",
    "には",
    "とは",
    "では",
    "への",
    "との",
    "からの",
    "までの",
    "など",
    "って",
    "のは",
    "について",
    "この",
    "その",
    "あの",
];
/// English request phrases stripped from the start repeatedly.
const EN_LEADS: [&str; 18] = [
    "can you tell me about",
    "could you tell me about",
    "can you tell me",
    "could you tell me",
    "tell me about",
    "tell me",
    "i want to know",
    "i'd like to know",
    "search the web for",
    "search for",
    "look up",
    "what about",
    "how about",
    "please",
    "can you",
    "could you",
    "and",
    "so",
];

/// Where the query came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuerySource {
    Rules,
    Model,
}

/// The query a web job searches for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DerivedQuery {
    pub text: String,
    pub source: QuerySource,
    /// The history entity a follow-up was resolved to by the rules, if any.
    pub resolved: Option<String>,
}

/// The query by rules: the cleaned prompt, its follow-up reference replaced by the entity
/// from the history, request endings and particles dropped, capped.
pub fn rules_query(history: &[ChatMessage], prompt: &str) -> Option<DerivedQuery> {
    let cleaned = focus(&clean_text(prompt));
    if cleaned.is_empty() {
        return None;
    }
    let cleaned_for_ellipsis = cleaned.clone();
    let (text, mut resolved) = match followup::resolve(&cleaned, history) {
        Some((text, entity)) => (text, Some(entity)),
        None => (cleaned, None),
    };
    let mut text = match detect_language(&text) {
        Lang::Ja => japanese_keywords(&text),
        Lang::En => english_keywords(&text),
    };
    if resolved.is_none() && is_elliptical(&cleaned_for_ellipsis, &text) {
        if let Some(entity) = followup::any_recent_entity(history) {
            text = format!("{entity} {text}");
            resolved = Some(entity);
        }
    }
    let text = cap_chars(&collapse(&text), MAX_QUERY_CHARS);
    (!text.is_empty()).then_some(DerivedQuery {
        text,
        source: QuerySource::Rules,
        resolved,
    })
}

/// The query for a web job: the rewriter's answer when it gives a usable one within
/// `timeout`, the rules' query otherwise.
pub async fn derive_query(
    history: &[ChatMessage],
    prompt: &str,
    rewriter: Option<&dyn QueryRewriter>,
    timeout: Duration,
) -> Option<DerivedQuery> {
    let rules = rules_query(history, prompt);
    let Some(rewriter) = rewriter else {
        return rules;
    };
    let rules_text = rules.as_ref().map(|q| q.text.as_str());
    let attempt =
        tokio::time::timeout(timeout, rewriter.rewrite(history, prompt, rules_text)).await;
    let why = match attempt {
        Ok(Ok(answer)) => match sanitize_model_query(&answer) {
            Some(text) => {
                return Some(DerivedQuery {
                    text,
                    source: QuerySource::Model,
                    resolved: None,
                });
            }
            None => "the model's answer held no usable query".to_owned(),
        },
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no rewrite within {} ms", timeout.as_millis()),
    };
    tracing::info!(reason = %why, rules_query = ?rules_text, "query rewrite not used; rules query kept");
    rules
}

/// Over-long prompts: the last question sentence, or else the first sentence.
fn focus(text: &str) -> String {
    if text.chars().count() <= MAX_QUERY_CHARS {
        return text.to_owned();
    }
    let sentences: Vec<&str> = text
        .split_inclusive(['。', '？', '！', '?', '!', '\n'])
        .flat_map(|s| s.split_inclusive(". "))
        .map(str::trim)
        .filter(|s| s.chars().count() >= 4)
        .collect();
    let question = sentences.iter().rev().find(|s| s.ends_with(['?', '？']));
    question
        .or(sentences.first())
        .map_or_else(|| text.to_owned(), |s| (*s).to_owned())
}

fn japanese_keywords(text: &str) -> String {
    let mut text = text.trim().to_owned();
    loop {
        let trimmed =
            text.trim_end_matches(|c: char| c.is_whitespace() || "？?！!。.、,〜～".contains(c));
        let stripped = JA_ENDINGS.iter().find_map(|e| trimmed.strip_suffix(e));
        let next = stripped.unwrap_or(trimmed).to_owned();
        if next == text {
            break;
        }
        text = next;
    }
    split_particles(&text)
}

/// Hiragana runs that are particles become spaces; other runs stay (美味しい店).
fn split_particles(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if JA_PARTICLES.contains(&run.as_str()) {
            out.push(' ');
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if matches!(c, '\u{3041}'..='\u{309F}') {
            run.push(c);
            continue;
        }
        flush(&mut run, &mut out);
        if "、。？！?!,「」『』（）()・".contains(c) {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

fn english_keywords(text: &str) -> String {
    let mut text = text
        .trim()
        .trim_end_matches(['?', '!', '.', ' '])
        .to_owned();
    loop {
        let lower = text.to_lowercase();
        let lead = EN_LEADS.iter().find(|l| {
            lower.starts_with(*l)
                && lower[l.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric())
        });
        let Some(lead) = lead.filter(|_| lower.len() == text.len()) else {
            break;
        };
        text = text[lead.len()..].trim_start_matches([' ', ',']).to_owned();
    }
    let text = text.trim_end_matches(['?', '!', '.', ' ']);
    text.strip_suffix(" please").unwrap_or(text).to_owned()
}

/// A fragment that leans on the previous turn: "人口は？", "じゃあ明日は？", "What about
/// the population?", "And the weather?" — marked as such and too short to stand alone.
fn is_elliptical(original: &str, keywords: &str) -> bool {
    if followup::has_entity(keywords) {
        return false;
    }
    let original = original.trim();
    match detect_language(original) {
        Lang::Ja => {
            let marked = ["は？", "は?", "は"].iter().any(|e| original.ends_with(e))
                || ["じゃあ", "では", "それで", "あと"]
                    .iter()
                    .any(|s| original.starts_with(s));
            marked && keywords.chars().filter(|c| !c.is_whitespace()).count() <= 8
        }
        Lang::En => {
            let lower = original.to_lowercase();
            let marked = ["what about ", "how about ", "and ", "what of "]
                .iter()
                .any(|s| lower.starts_with(s));
            marked && keywords.split_whitespace().count() <= 4
        }
    }
}

/// At most `max` characters, cut at a space when one is near the end.
pub fn cap_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(i) if cut[..i].chars().count() > max * 2 / 3 => cut[..i].trim_end().to_owned(),
        _ => cut,
    }
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
