//! `[routing]` configuration: default model, domains, web-search keywords and the optional
//! LLM classifier. Every list has a compiled-in default for Japanese and English, so an
//! empty config routes well; setting a list in the file replaces that default.
//!
//! ```toml
//! [routing]
//! default_model = "qwen2.5:7b"
//!
//! [routing.domains.code]
//! model = "qwen2.5-coder:7b"
//! keywords = ["terraform", "ansible"]   # added to the built-in code rules
//!
//! [routing.web]
//! enabled = true
//! positive = ["天気", "weather", ...]        # fire on their own
//! weak_positive = ["今日", "today", ...]     # fire only in a question
//! negative = ["コード", "implement*", ...]   # suppress any positive hit
//! recency = true                             # "今年のノーベル賞は誰？" → web
//! max_scan_chars = 2000                      # prose characters looked at
//!
//! [routing.rag]                             # off until a rule is written
//! negative = ["implement*"]                  # keep such prompts out of the documents
//! [[routing.rag.rules]]
//! collection = "notes"                       # unset = every collection (model `rag`)
//! keywords = ["my notes", "メモ", "NAS backup"]
//!
//! [routing.classifier]
//! model = "qwen2.5:1.5b"   # unset = no LLM classifier
//! deadline_ms = 1500
//! cache_size = 1024
//! ```
//!
//! Keyword syntax: matching is case-insensitive. A keyword made of ASCII letters or digits
//! at an edge matches only on a word boundary at that edge (`news` does not match
//! `newsletter`); a trailing `*` lets the last word run on (`implement*` matches
//! `implementation`). Japanese keywords match as plain substrings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::ModelName;

/// `[routing]` in the config.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RoutingConfig {
    /// The model for `auto` requests when no domain names one; the first discovered model
    /// when absent.
    pub default_model: Option<String>,
    /// `[routing.domains.<name>] model = "...", keywords = [...]`.
    pub domains: BTreeMap<String, DomainConfig>,
    /// `[routing.web]`: automatic web-search detection.
    pub web: WebConfig,
    /// `[routing.rag]`: `auto` prompts sent to the documents by keyword.
    pub rag: RagRoutingConfig,
    /// `[routing.classifier]`: the optional LLM domain classifier.
    pub classifier: ClassifierConfig,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainConfig {
    pub model: Option<String>,
    /// Words that point at this domain. For `code` they add to the built-in rules.
    pub keywords: Vec<String>,
}

/// `[routing.web]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct WebConfig {
    pub enabled: bool,
    /// Words that ask for fresh information on their own (`天気`, `news`).
    pub positive: Vec<String>,
    /// Time words that ask for fresh information only in a question (`今日`, `today`).
    pub weak_positive: Vec<String>,
    /// Words that mark a coding / learning / explanation request and suppress a hit.
    pub negative: Vec<String>,
    /// Recency questions ("今年の…は誰？", "who won … yesterday") count as positive.
    pub recency: bool,
    /// How many characters of prose (outside code fences and log lines) are scanned.
    pub max_scan_chars: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            positive: strings(DEFAULT_WEB_POSITIVE),
            weak_positive: strings(DEFAULT_WEB_WEAK_POSITIVE),
            negative: strings(DEFAULT_WEB_NEGATIVE),
            recency: true,
            max_scan_chars: 2000,
        }
    }
}

/// `[routing.rag]`: rules that send an `auto` prompt to a document collection (the RAG
/// lane, as if the client had named `rag:<collection>`). No rules, no effect.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RagRoutingConfig {
    /// In order: the first rule with a keyword in the prompt decides the collection.
    pub rules: Vec<RagRuleConfig>,
    /// Words that keep a prompt out of the documents whichever rule matched.
    pub negative: Vec<String>,
}

/// One `[[routing.rag.rules]]` entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RagRuleConfig {
    /// The collection asked; every collection when unset.
    pub collection: Option<String>,
    /// Words that point at it (the keyword syntax of the module doc).
    pub keywords: Vec<String>,
}

/// `[routing.classifier]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ClassifierConfig {
    /// The model asked when the rules are unsure; no classifier when unset.
    pub model: Option<String>,
    /// Hard deadline for one classification, waiting for the slot included.
    pub deadline_ms: u64,
    /// How many prompt hashes keep their answer.
    pub cache_size: usize,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        Self {
            model: None,
            deadline_ms: 1500,
            cache_size: 1024,
        }
    }
}

/// Compiled-in web keywords that fire alone.
#[rustfmt::skip]
pub const DEFAULT_WEB_POSITIVE: &[&str] = &[
    "最新", "天気", "ニュース", "速報", "株価", "為替", "予報", "気温", "降水", "台風", "地震情報", "相場", "運行状況", "遅延情報",
    "開催日", "試合結果", "選挙結果", "トレンド", "weather", "forecast", "latest", "news", "headline*",
    "breaking", "stock price*", "exchange rate*", "share price*", "score of",
    "election result*", "temperature in", "up to date", "up-to-date",
];

/// Compiled-in time words that fire only when the prompt asks something.
#[rustfmt::skip]
pub const DEFAULT_WEB_WEAK_POSITIVE: &[&str] = &[
    "今日", "本日", "現在", "いま話題", "今週", "今月", "昨日", "明日", "今夜", "今朝", "today", "tonight",
    "tomorrow", "yesterday", "current", "right now", "this week", "recent",
];

/// Compiled-in words that suppress a positive hit.
#[rustfmt::skip]
pub const DEFAULT_WEB_NEGATIVE: &[&str] = &[
    "コード", "実装", "エラー", "学習", "説明", "解説", "関数", "変数", "バグ", "デバッグ", "プログラム", "スクリプト", "コンパイル",
    "翻訳", "要約", "復習", "勉強", "例文", "文法", "書き方", "リファクタ", "code", "coding", "implement*",
    "error*", "explain*", "function*", "debug*", "bug", "bugs", "compile*", "script*",
    "refactor*", "translat*", "summari*", "grammar", "exception*", "stack trace", "variable*",
    "regex", "syntax", "learn*", "tutorial*", "program*", "log", "logs", "ログ", "crash*", "fix",
    "直して", "直したい",
];

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

impl RoutingConfig {
    /// Every problem in `[routing]`, not just the first.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(m) = &self.default_model
            && let Err(e) = ModelName::parse(m)
        {
            problems.push(format!("routing.default_model: {e}"));
        }
        for (name, d) in &self.domains {
            if name.trim().is_empty() || name.chars().any(char::is_whitespace) {
                problems.push(format!(
                    "routing.domains: {name:?} is not a domain name (no spaces)"
                ));
            }
            if let Some(m) = &d.model
                && let Err(e) = ModelName::parse(m)
            {
                problems.push(format!("routing.domains.{name}.model: {e}"));
            }
            check_keywords(
                &format!("routing.domains.{name}.keywords"),
                &d.keywords,
                &mut problems,
            );
        }
        let w = &self.web;
        check_keywords("routing.web.positive", &w.positive, &mut problems);
        check_keywords("routing.web.weak_positive", &w.weak_positive, &mut problems);
        check_keywords("routing.web.negative", &w.negative, &mut problems);
        if w.max_scan_chars == 0 {
            problems.push("routing.web.max_scan_chars: must be at least 1".to_owned());
        }
        for (i, rule) in self.rag.rules.iter().enumerate() {
            let at = format!("routing.rag.rules[{i}]");
            if let Some(name) = &rule.collection
                && let Err(e) = crate::docs::Collection::parse(name)
            {
                problems.push(format!("{at}.collection: {e}"));
            }
            if rule.keywords.is_empty() {
                problems.push(format!("{at}.keywords: a rule needs at least one keyword"));
            }
            check_keywords(&format!("{at}.keywords"), &rule.keywords, &mut problems);
        }
        check_keywords("routing.rag.negative", &self.rag.negative, &mut problems);
        let c = &self.classifier;
        if let Some(m) = &c.model
            && let Err(e) = ModelName::parse(m)
        {
            problems.push(format!("routing.classifier.model: {e}"));
        }
        if c.deadline_ms == 0 || c.deadline_ms > 60_000 {
            problems.push(format!(
                "routing.classifier.deadline_ms: {} is outside 1..=60000",
                c.deadline_ms
            ));
        }
        problems
    }
}

fn check_keywords(at: &str, list: &[String], problems: &mut Vec<String>) {
    for k in list {
        let bare = k.trim().trim_end_matches('*');
        if bare.trim().is_empty() {
            problems.push(format!("{at}: {k:?} is an empty keyword"));
        } else if bare.chars().count() > 64 {
            problems.push(format!("{at}: {k:?} is longer than 64 characters"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_keep_the_seed_boundary() {
        let c = RoutingConfig::default();
        assert!(c.validate().is_empty(), "{:?}", c.validate());
        assert!(c.web.negative.iter().any(|k| k == "実装"));
        // 最新ニュースを教えて must stay a web search: 教えて is never negative.
        assert!(!c.web.negative.iter().any(|k| k.contains("教えて")));
        assert_eq!(c.classifier.deadline_ms, 1500);
    }

    #[test]
    fn validate_reports_every_problem() {
        let mut c = RoutingConfig {
            default_model: Some("bad model".into()),
            ..RoutingConfig::default()
        };
        c.web.positive.push("  ".into());
        c.web.negative.push("*".into());
        c.web.max_scan_chars = 0;
        c.classifier.deadline_ms = 0;
        c.classifier.model = Some(String::new());
        c.domains.insert(
            "my domain".into(),
            DomainConfig {
                model: Some("x y".into()),
                keywords: vec![String::new()],
            },
        );
        c.rag.rules = vec![
            RagRuleConfig {
                collection: Some("My Notes".into()),
                keywords: vec!["notes".into()],
            },
            RagRuleConfig {
                collection: None,
                keywords: vec![],
            },
            RagRuleConfig {
                collection: Some("manuals".into()),
                keywords: vec!["*".into()],
            },
        ];
        c.rag.negative.push(" ".into());
        let problems = c.validate();
        assert_eq!(problems.len(), 13, "{problems:#?}");
        for p in [
            "routing.rag.rules[0].collection: \"My Notes\" is not a collection name",
            "routing.rag.rules[1].keywords: a rule needs at least one keyword",
            "routing.rag.rules[2].keywords: \"*\" is an empty keyword",
            "routing.rag.negative: \" \" is an empty keyword",
        ] {
            assert!(
                problems.iter().any(|q| q.starts_with(p)),
                "{p}: {problems:#?}"
            );
        }
    }

    #[test]
    fn toml_lists_replace_defaults_and_missing_keys_keep_them() {
        let c: RoutingConfig = toml::from_str(
            "[web]\npositive = [\"foo\"]\n[classifier]\nmodel = \"m\"\n[domains.math]\nkeywords = [\"積分\"]\n",
        )
        .unwrap();
        assert_eq!(c.web.positive, vec!["foo".to_owned()]);
        assert_eq!(c.web.negative.len(), DEFAULT_WEB_NEGATIVE.len());
        assert_eq!(c.classifier.deadline_ms, 1500);
        assert_eq!(c.domains["math"].keywords, vec!["積分".to_owned()]);
    }
}
