//! Web-search detection on the user's own prompt (never on history or task templates).
//!
//! Order: strong positives (`天気`, `news`) fire alone; weak time words (`今日`, `today`)
//! fire only when the prose asks something; recency questions ("今年のノーベル賞は誰？",
//! "who is currently …") fire when enabled; then any negative (`実装`, `code`) suppresses the
//! hit. Only prose is read: code fences, log lines and inline code are skipped and the scan
//! is capped, so a pasted 5,000-line log saying "today" and "error" never searches the web.

use super::config::WebConfig;
use super::text::{KeywordSet, prose};

/// This many code / log lines around the prose mark a question about pasted material.
const PASTED_LINES: usize = 3;

/// Question cues: a weak time word counts only next to one of these.
#[rustfmt::skip]
const QUESTION_CUES: &[&str] = &[
    "?", "？", "教えて", "知りたい", "調べて", "何", "いつ", "誰", "どこ", "どう", "ですか", "ますか", "でしょう", "かな",
    "いくら", "what", "what's", "who", "when", "where", "which", "how", "tell me", "show me",
    "look up", "find out", "is there", "are there", "will it", "any news",
];

/// Recency anchors: time words that point at an event the model may not know.
#[rustfmt::skip]
const RECENCY_ANCHORS: &[&str] = &[
    "今年", "去年", "昨年", "今年度", "最近", "直近", "先週", "先月", "昨夜", "今朝", "今夜", "今シーズン", "this year",
    "last year", "last night", "last week", "this month", "recently", "currently", "so far",
    "as of now", "these days", "this season",
];

/// Event cues that, next to a recency anchor, make a question about the news.
#[rustfmt::skip]
const RECENCY_CUES: &[&str] = &[
    "誰", "いつ", "どこ", "結果", "優勝", "受賞", "発表", "発売", "どうなった", "いくら", "何位", "勝った", "who", "won",
    "winner", "result*", "released", "announced", "price", "how much", "score", "champion*",
    "elected",
];

/// Groups of the one keyword set the web rules scan with.
const POSITIVE: usize = 0;
const WEAK: usize = 1;
const NEGATIVE: usize = 2;
const QUESTION: usize = 3;
const ANCHOR: usize = 4;
const EVENT: usize = 5;

/// The compiled web rules: every list in one keyword set, scanned once per prompt.
#[derive(Debug, Clone)]
pub(crate) struct WebRules {
    enabled: bool,
    recency: bool,
    max_scan_chars: usize,
    words: KeywordSet,
}

/// The outcome, with the one reason line that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WebVerdict {
    pub web: bool,
    pub reason: String,
}

impl WebRules {
    pub fn new(cfg: &WebConfig) -> Self {
        let fixed = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
        let (questions, anchors, events) = (
            fixed(QUESTION_CUES),
            fixed(RECENCY_ANCHORS),
            fixed(RECENCY_CUES),
        );
        let groups: [&[String]; 6] = [
            &cfg.positive,
            &cfg.weak_positive,
            &cfg.negative,
            &questions,
            &anchors,
            &events,
        ];
        Self {
            enabled: cfg.enabled,
            recency: cfg.recency,
            max_scan_chars: cfg.max_scan_chars.max(1),
            words: KeywordSet::grouped(&groups),
        }
    }

    /// Decides whether `prompt` asks for information from the web. In a `code_context`
    /// (the domain rules saw code) only strong positives count: "the current date in bash"
    /// is about code, not about today.
    pub fn detect(&self, prompt: &str, code_context: bool) -> WebVerdict {
        if !self.enabled {
            return verdict(false, "web_search: disabled by config".to_owned());
        }
        let prose = prose(prompt, self.max_scan_chars);
        let text = prose.text.as_str();
        let first = self.words.first_per_group(text);
        let word = |g: usize| first.get(g).copied().flatten().map(|h| h.word);
        let Some((pos, strong)) = self.positive_hit(&word) else {
            return verdict(false, "web_search: no positive keyword".to_owned());
        };
        if code_context && !strong {
            return verdict(
                false,
                format!("web_search: weak pos={pos:?} ignored in a code question"),
            );
        }
        if let Some(neg) = word(NEGATIVE) {
            return verdict(
                false,
                format!("web_search: pos={pos:?} suppressed by neg={neg:?}"),
            );
        }
        if prose.machine_lines >= PASTED_LINES {
            return verdict(
                false,
                format!(
                    "web_search: pos={pos:?} suppressed by neg=\"<pasted code/log: {} lines>\"",
                    prose.machine_lines
                ),
            );
        }
        verdict(true, format!("web_search: pos={pos:?} -> web"))
    }

    /// The positive that fired, and whether it was a strong one.
    fn positive_hit<'a>(&self, word: &impl Fn(usize) -> Option<&'a str>) -> Option<(String, bool)> {
        if let Some(pos) = word(POSITIVE) {
            return Some((pos.to_owned(), true));
        }
        if let (Some(weak), Some(q)) = (word(WEAK), word(QUESTION)) {
            return Some((format!("{weak}+{q}"), false));
        }
        if self.recency
            && let (Some(anchor), Some(cue)) = (word(ANCHOR), word(EVENT))
        {
            return Some((format!("recency:{anchor}+{cue}"), false));
        }
        None
    }
}

fn verdict(web: bool, reason: String) -> WebVerdict {
    WebVerdict { web, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> WebRules {
        WebRules::new(&WebConfig::default())
    }

    fn web(p: &str) -> bool {
        rules().detect(p, false).web
    }

    /// The seed's boundary set, extended: (prompt, expected web search).
    const BOUNDARY: &[(&str, bool)] = &[
        ("今日の柏市の天気は？", true),
        ("今日学んだPythonコードの実装を復習したい", false),
        ("最新ニュースを教えて", true),
        (
            "Ubuntuでpingコマンドが見つかりません。何をインストールすればいいですか？",
            false,
        ),
        ("明日の東京の天気予報", true),
        ("最新のエラーメッセージの意味を説明して", false),
        ("現在のドル円の為替レートは？", true),
        ("トヨタの株価を教えて", true),
        ("今日は疲れた", false),
        ("今日は何の日？", true),
        ("天気という単語の英訳と例文", false),
        ("地震の速報はある？", true),
        ("最新版のReactで関数コンポーネントを実装する方法", false),
        ("こんにちは", false),
        ("今年のノーベル文学賞は誰？", true),
        ("What's the weather in Osaka today?", true),
        ("Give me the latest news about the Fed", true),
        ("Explain the latest C++ standard features with code", false),
        ("I feel great today", false),
        ("who won the election yesterday", true),
        ("Who is currently the prime minister of Japan?", true),
        ("How do I write a newsletter signup form?", false),
        ("I'm currently reading a novel", false),
        ("What's the current USD/JPY exchange rate?", true),
        ("Fix this error: current directory not found", false),
        ("Write a haiku about autumn", false),
    ];

    #[test]
    fn seed_boundary_cases() {
        let r = rules();
        for (prompt, expected) in BOUNDARY {
            let v = r.detect(prompt, false);
            assert_eq!(v.web, *expected, "{prompt}: {}", v.reason);
        }
    }

    #[test]
    fn reasons_name_the_keywords() {
        let r = rules();
        assert_eq!(
            r.detect("今日の天気のAPIを実装したい", false).reason,
            r#"web_search: pos="天気" suppressed by neg="実装""#
        );
        assert_eq!(
            r.detect("最新ニュースを教えて", false).reason,
            r#"web_search: pos="最新" -> web"#
        );
    }

    #[test]
    fn pasted_logs_and_code_never_search() {
        let log = "2025-06-01 10:00:00 ERROR today's latest news feed failed\n".repeat(200);
        assert!(!web(&format!("{log}\nこのログを見て")));
        let code =
            "```python\n# fetch today's weather news\nprint(latest())\n```\nWhat does this do?";
        assert!(!web(code));
        let journal = "Jun 01 10:00:00 host app[1]: weather sync current=ok\n".repeat(50);
        assert!(!web(&journal));
        let v = rules().detect("```\na\nb\n```\nWhat is the weather today?", false);
        assert!(!v.web);
        assert!(
            v.reason.contains("<pasted code/log: 4 lines>"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn keywords_beyond_the_scan_cap_are_ignored() {
        let long = format!("{}天気は？", "あ".repeat(5000));
        assert!(!web(&long));
        assert!(web(&format!("天気は？{}", "あ".repeat(5000))));
    }

    #[test]
    fn code_questions_only_take_strong_positives() {
        let r = rules();
        let v = r.detect("How do I print the current date in bash?", true);
        assert!(!v.web);
        assert_eq!(
            v.reason,
            r#"web_search: weak pos="current+how" ignored in a code question"#
        );
        assert!(
            r.detect("How do I print the current date in bash?", false)
                .web
        );
        assert!(r.detect("What's the latest version of Rust?", true).web);
    }

    #[test]
    fn config_lists_and_switches_apply() {
        let mut cfg = WebConfig {
            positive: vec!["花粉".into()],
            ..WebConfig::default()
        };
        assert!(WebRules::new(&cfg).detect("花粉の飛散", false).web);
        assert!(!WebRules::new(&cfg).detect("天気は？", false).web);
        cfg.recency = false;
        assert!(
            !WebRules::new(&cfg)
                .detect("今年のノーベル賞は誰？", false)
                .web
        );
        cfg.enabled = false;
        assert!(!WebRules::new(&cfg).detect("花粉の飛散", false).web);
    }
}
