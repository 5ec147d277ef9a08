//! Rule answers for Open WebUI's background tasks (`[internal_tasks] mode = "rules"`): the
//! exact JSON text Open WebUI parses, made in microseconds without any model.
//!
//! The chat a template embeds (`USER: ...` / `ASSISTANT: ...` lines, usually inside
//! `<chat_history>`) is the material: the title comes from the first user message, the
//! search query from the last one, tags from keywords. MoA and context compaction need a
//! real model and get no rule answer.

use std::sync::LazyLock;

use serde_json::json;

use crate::domain::InternalTask;
use crate::turn::Turn;

use super::text::{KeywordSet, clip, clip_chars};

/// The longest search query a rule answer returns, in characters.
pub(crate) const MAX_QUERY_CHARS: usize = 200;
const MAX_SCAN_BYTES: usize = 32 * 1024;

/// The rule answer for `task`, or `None` when the task needs a model.
pub(crate) fn rules_reply(task: InternalTask, turn: &Turn) -> Option<String> {
    let prompt = clip(&turn.prompt, MAX_SCAN_BYTES);
    let value = match task {
        InternalTask::TitleGeneration => json!({ "title": title(prompt) }),
        InternalTask::TagsGeneration => json!({ "tags": tags(prompt) }),
        InternalTask::FollowUpGeneration => json!({ "follow_ups": [] }),
        InternalTask::QueryGeneration => {
            let queries: Vec<String> = last_user(prompt).map(query).into_iter().collect();
            json!({ "queries": queries })
        }
        InternalTask::AutocompleteGeneration => json!({ "text": "" }),
        InternalTask::EmojiGeneration => return Some(emoji(prompt).to_owned()),
        InternalTask::ImagePromptGeneration => {
            let text = last_user(prompt).unwrap_or_default();
            json!({ "prompt": clip_chars(&collapse(&text), 400) })
        }
        InternalTask::FunctionCalling => json!({ "tool_calls": [] }),
        InternalTask::MemoryReview => json!({ "operations": [] }),
        InternalTask::MoaResponseGeneration | InternalTask::ContextCompaction => return None,
    };
    Some(value.to_string())
}

/// The messages a template embeds, as (is_user, text), in order.
fn embedded(prompt: &str) -> Vec<(bool, String)> {
    let body = match (
        prompt.find("<chat_history>"),
        prompt.rfind("</chat_history>"),
    ) {
        (Some(a), Some(b)) if a + "<chat_history>".len() <= b => {
            &prompt[a + "<chat_history>".len()..b]
        }
        _ => prompt,
    };
    let mut out: Vec<(bool, String)> = Vec::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("USER:") {
            out.push((true, rest.trim().to_owned()));
        } else if let Some(rest) = line.strip_prefix("ASSISTANT:") {
            out.push((false, rest.trim().to_owned()));
        } else if let Some(last) = out.last_mut() {
            last.1.push('\n');
            last.1.push_str(line);
        }
    }
    out
}

fn first_user(prompt: &str) -> Option<String> {
    embedded(prompt)
        .into_iter()
        .find(|(u, t)| *u && !t.trim().is_empty())
        .map(|(_, t)| t)
}

fn last_user(prompt: &str) -> Option<String> {
    embedded(prompt)
        .into_iter()
        .rev()
        .find(|(u, t)| *u && !t.trim().is_empty())
        .map(|(_, t)| t)
}

/// True when `s` holds kana or kanji.
pub(crate) fn is_japanese(s: &str) -> bool {
    s.chars()
        .any(|c| matches!(c, '\u{3040}'..='\u{30FF}' | '\u{4E00}'..='\u{9FFF}'))
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A short title in the chat's language: the first sentence of the first user message.
fn title(prompt: &str) -> String {
    let Some(first) = first_user(prompt) else {
        return "New Chat".to_owned();
    };
    let line = first
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("```"))
        .unwrap_or("");
    let end = line
        .char_indices()
        .find(|(i, c)| {
            matches!(c, '。' | '？' | '！' | '?' | '!')
                || (*c == '.' && line[i + 1..].starts_with(' '))
        })
        .map_or(line.len(), |(i, _)| i);
    let sentence = line[..end].trim_start_matches(['#', '-', '*', '>', ' ']);
    let trim = |s: &str| s.trim_end_matches(['、', ',', ':', '：', ' ']).to_owned();
    let t = if is_japanese(sentence) {
        let cut = clip_chars(sentence, 24);
        if cut.len() < sentence.len() {
            format!("{}…", trim(cut))
        } else {
            trim(cut)
        }
    } else {
        let words: Vec<&str> = sentence.split_whitespace().take(7).collect();
        trim(clip_chars(&words.join(" "), 60))
    };
    if t.is_empty() {
        "New Chat".to_owned()
    } else {
        t
    }
}

/// Tag table: (keywords, English tag, Japanese tag).
const TAGS: &[(&[&str], &str, &str)] = &[
    (
        &[
            "code",
            "python",
            "rust",
            "javascript",
            "error*",
            "bug",
            "api",
            "linux",
            "ubuntu",
            "docker",
            "コード",
            "実装",
            "エラー",
            "プログラム",
            "関数",
            "コマンド",
            "インストール",
            "サーバー",
        ],
        "Programming",
        "プログラミング",
    ),
    (
        &["weather", "forecast", "天気", "予報", "気温", "台風"],
        "Weather",
        "天気",
    ),
    (
        &["news", "election", "ニュース", "速報", "選挙"],
        "News",
        "ニュース",
    ),
    (
        &["stock*", "price", "market", "株価", "為替", "投資", "経済"],
        "Finance",
        "金融",
    ),
    (
        &["health", "doctor", "sleep", "健康", "病院", "睡眠", "運動"],
        "Health",
        "健康",
    ),
    (
        &["travel", "trip", "hotel", "旅行", "観光", "ホテル"],
        "Travel",
        "旅行",
    ),
    (
        &["recipe*", "cook*", "food", "レシピ", "料理", "食べ"],
        "Food",
        "料理",
    ),
    (
        &["learn*", "study", "exam", "学習", "勉強", "試験", "英語"],
        "Education",
        "教育",
    ),
    (
        &["math*", "physics", "science", "数学", "物理", "科学"],
        "Science",
        "科学",
    ),
    (
        &[
            "movie*",
            "music",
            "game*",
            "anime",
            "映画",
            "音楽",
            "ゲーム",
            "アニメ",
        ],
        "Entertainment",
        "エンタメ",
    ),
];

static TAG_SETS: LazyLock<Vec<KeywordSet>> = LazyLock::new(|| {
    TAGS.iter()
        .map(|(words, _, _)| KeywordSet::new(words))
        .collect()
});

/// Up to three tags by keywords of the conversation; "General" / "一般" when none fit.
fn tags(prompt: &str) -> Vec<String> {
    let chat: Vec<(bool, String)> = embedded(prompt);
    let text: String = chat
        .iter()
        .map(|(_, t)| t.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let japanese = chat
        .iter()
        .find(|(u, _)| *u)
        .is_some_and(|(_, t)| is_japanese(t));

    let mut out: Vec<String> = TAGS
        .iter()
        .zip(TAG_SETS.iter())
        .filter(|(_, set)| set.first(&text).is_some())
        .map(|((_, en, ja), _)| if japanese { *ja } else { *en }.to_owned())
        .take(3)
        .collect();
    if out.is_empty() {
        out.push(if japanese { "一般" } else { "General" }.to_owned());
    }
    out
}

/// A standalone search query from the last user message: one line, at most 200 characters.
fn query(last: String) -> String {
    clip_chars(&collapse(&last), MAX_QUERY_CHARS)
        .trim()
        .to_owned()
}

/// An emoji for the message in an emoji template.
fn emoji(prompt: &str) -> &'static str {
    let message = prompt
        .rsplit("Message:")
        .next()
        .unwrap_or(prompt)
        .to_ascii_lowercase();
    let table: &[(&[&str], &str)] = &[
        (
            &[
                "ありがとう",
                "thank",
                "嬉しい",
                "great",
                "love",
                "最高",
                "やった",
            ],
            "😊",
        ),
        (&["悲しい", "sad", "残念", "寂しい", "sorry"], "😢"),
        (&["怒", "angry", "ムカ", "最悪", "hate"], "😠"),
        (&["驚", "wow", "まさか", "びっくり", "!?", "！？"], "😮"),
        (&["笑", "lol", "haha", "面白"], "😂"),
        (&["眠", "tired", "疲れ", "sleepy"], "😴"),
    ];
    table
        .iter()
        .find(|(words, _)| words.iter().any(|w| message.contains(w)))
        .map_or("🙂", |(_, e)| e)
}
