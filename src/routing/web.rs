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
const QUESTION_CUES: &[&str] = &[
    "?",
    "？",
    "教えて",
    "知りたい",
    "調べて",
    "何",
    "いつ",
    "誰",
    "どこ",
    "どう",
    "ですか",
    "ますか",
    "でしょう",
    "かな",
    "いくら",
    "what",
    "what's",
    "who",
    "when",
    "where",
    "which",
    "how",
    "tell me",
    "show me",
    "look up",
    "find out",
    "is there",
    "are there",
    "will it",
    "any news",
];

/// Recency anchors: time words that point at an event the model may not know.
const RECENCY_ANCHORS: &[&str] = &[
    "今年",
    "去年",
    "昨年",
    "今年度",
    "最近",
    "直近",
    "先週",
    "先月",
    "昨夜",
    "今朝",
    "今夜",
    "今シーズン",
    "this year",
    "last year",
    "last night",
    "last week",
    "this month",
    "recently",
    "currently",
    "so far",
    "as of now",
    "these days",
    "this season",
];

/// Event cues that, next to a recency anchor, make a question about the news.
const RECENCY_CUES: &[&str] = &[
    "誰",
    "いつ",
    "どこ",
    "結果",
    "優勝",
    "受賞",
    "発表",
    "発売",
    "どうなった",
    "いくら",
    "何位",
    "勝った",
    "who",
    "won",
    "winner",
    "result*",
    "released",
    "announced",
    "price",
    "how much",
    "score",
    "champion*",
    "elected",
];

/// The compiled web rules.
#[derive(Debug, Clone)]
pub(crate) struct WebRules {
    enabled: bool,
    recency: bool,
    max_scan_chars: usize,
    positive: KeywordSet,
    weak: KeywordSet,
    negative: KeywordSet,
    questions: KeywordSet,
    anchors: KeywordSet,
    events: KeywordSet,
}

/// The outcome, with the one reason line that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WebVerdict {
    pub web: bool,
    pub reason: String,
}

impl WebRules {
    pub fn new(cfg: &WebConfig) -> Self {
        Self {
            enabled: cfg.enabled,
            recency: cfg.recency,
            max_scan_chars: cfg.max_scan_chars.max(1),
            positive: KeywordSet::new(&cfg.positive),
            weak: KeywordSet::new(&cfg.weak_positive),
            negative: KeywordSet::new(&cfg.negative),
            questions: KeywordSet::new(QUESTION_CUES),
            anchors: KeywordSet::new(RECENCY_ANCHORS),
            events: KeywordSet::new(RECENCY_CUES),
        }
    }

    /// Decides whether `prompt` asks for information from the web.
    pub fn detect(&self, prompt: &str) -> WebVerdict {
        if !self.enabled {
            return verdict(false, "web_search: disabled by config".to_owned());
        }
        let prose = prose(prompt, self.max_scan_chars);
        let text = prose.text.as_str();
        let Some(pos) = self.positive_hit(text) else {
            return verdict(false, "web_search: no positive keyword".to_owned());
        };
        if let Some(neg) = self.negative.first(text) {
            return verdict(
                false,
                format!("web_search: pos={pos:?} suppressed by neg={:?}", neg.word),
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

    fn positive_hit(&self, text: &str) -> Option<String> {
        if let Some(hit) = self.positive.first(text) {
            return Some(hit.word.to_owned());
        }
        if let Some(hit) = self.weak.first(text)
            && let Some(q) = self.questions.first(text)
        {
            return Some(format!("{}+{}", hit.word, q.word));
        }
        if self.recency
            && let Some(anchor) = self.anchors.first(text)
            && let Some(cue) = self.events.first(text)
        {
            return Some(format!("recency:{}+{}", anchor.word, cue.word));
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
        rules().detect(p).web
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
            let v = r.detect(prompt);
            assert_eq!(v.web, *expected, "{prompt}: {}", v.reason);
        }
    }

    #[test]
    fn reasons_name_the_keywords() {
        let r = rules();
        assert_eq!(
            r.detect("今日の天気のAPIを実装したい").reason,
            r#"web_search: pos="天気" suppressed by neg="実装""#
        );
        assert_eq!(
            r.detect("最新ニュースを教えて").reason,
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
        let v = rules().detect("```\na\nb\n```\nWhat is the weather today?");
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
    fn config_lists_and_switches_apply() {
        let mut cfg = WebConfig {
            positive: vec!["花粉".into()],
            ..WebConfig::default()
        };
        assert!(WebRules::new(&cfg).detect("花粉の飛散").web);
        assert!(!WebRules::new(&cfg).detect("天気は？").web);
        cfg.recency = false;
        assert!(!WebRules::new(&cfg).detect("今年のノーベル賞は誰？").web);
        cfg.enabled = false;
        assert!(!WebRules::new(&cfg).detect("花粉の飛散").web);
    }
}
