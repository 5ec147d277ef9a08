//! Rule-based domain classification: `code` when the prompt carries code fences, stack
//! traces, shell sessions, error messages, language or tool names; a configured domain
//! when its keywords win; otherwise `general`.
//!
//! Strong evidence (a fence, a stack trace, a shell prompt line) scores 3, each distinct
//! keyword scores 1. A top score of 2 or more that beats every other domain is *sure*; a
//! score of 1 or a tie is *unsure*, which is when the optional LLM classifier is asked.
//! A prompt with no evidence is `general`, sure.

use std::collections::BTreeMap;

use super::config::DomainConfig;
use super::text::{KeywordSet, clip, is_machine_line};

pub(crate) const CODE: &str = "code";
pub(crate) const GENERAL: &str = "general";

/// How many bytes of the prompt the domain rules read.
const MAX_DOMAIN_SCAN_BYTES: usize = 8 * 1024;

/// Markers that alone make a prompt about code.
#[rustfmt::skip]
const STRONG_CODE: &[&str] = &[
    "```", "traceback (most recent call last)", "panicked at", "exception in thread", "error[e",
    "segmentation fault", "core dumped", "command not found", "コマンドが見つかりません",
    "no such file or directory", "permission denied", "npm err!", "syntaxerror", "typeerror",
    "nullpointerexception", "undefined reference", "cannot find module", "modulenotfounderror",
    "stack trace", "スタックトレース", "#include", "fn main", "console.log", "public static void",
];

/// Words that point at code; each distinct one scores 1.
#[rustfmt::skip]
const CODE_WORDS: &[&str] = &[
    "python", "rust", "javascript", "typescript", "java", "golang", "kotlin", "swift", "c++",
    "c#", "ruby", "php", "sql", "bash", "shell", "powershell", "html", "css", "react", "vue",
    "django", "flask", "node.js", "nodejs", "docker", "kubernetes", "k8s", "git", "github",
    "linux", "ubuntu", "debian", "windows 11", "macos", "nginx", "api", "json", "yaml", "regex",
    "compiler", "cli", "terminal", "ssh", "vim", "vscode", "pip", "npm", "cargo", "apt", "brew",
    "systemd", "journalctl", "cron", "ping", "curl", "grep", "sed", "awk", "function*",
    "variable*", "class", "method*", "compil*", "debug*", "bug", "bugs", "error*", "exception*",
    "implement*", "refactor*", "algorithm*", "database*", "script*", "programming",
    "programmer", "code", "coding", "library", "framework", "deploy*", "segfault", "unit test*",
    "install*", "server", "sudo", "wsl", "ollama", "loop", "array*", "tuple*", "integer*",
    "boolean", "iterator*", "recursion", "recursive", "hashing", "bcrypt", "argon2", "async",
    "null", "utf-8", "unicode", "csv", "excel", "vba", "llama.cpp", "gpu", "cuda", "コード", "実装",
    "関数", "変数", "クラス", "メソッド", "コンパイル", "デバッグ", "バグ", "エラー", "例外", "プログラム", "プログラミング", "スクリプト",
    "ライブラリ", "フレームワーク", "コマンド", "ターミナル", "インストール", "サーバー", "データベース", "コミット", "リポジトリ", "正規表現",
    "リファクタ", "アルゴリズム", "ビルド", "デプロイ", "環境変数",
];

/// How sure the rules are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confidence {
    Sure,
    Unsure,
}

/// The rule result: a domain, how sure, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DomainVerdict {
    pub domain: String,
    pub confidence: Confidence,
    pub reason: String,
}

/// The compiled domain rules: one keyword set, group 0 the strong code markers, then one
/// group per scored domain (`code` first, then each configured domain with keywords).
#[derive(Debug, Clone)]
pub(crate) struct DomainRules {
    words: KeywordSet,
    /// The domain of group `i + 1`.
    scored: Vec<String>,
    names: Vec<String>,
}

impl DomainRules {
    pub fn new(domains: &BTreeMap<String, DomainConfig>) -> Self {
        let mut code_words: Vec<String> = CODE_WORDS.iter().map(|s| (*s).to_owned()).collect();
        if let Some(c) = domains.get(CODE) {
            code_words.extend(c.keywords.iter().cloned());
        }
        let strong: Vec<String> = STRONG_CODE.iter().map(|s| (*s).to_owned()).collect();
        let mut groups: Vec<&[String]> = vec![&strong, &code_words];
        let mut scored = vec![CODE.to_owned()];
        for (name, d) in domains {
            if name != CODE && name != GENERAL && !d.keywords.is_empty() {
                groups.push(&d.keywords);
                scored.push(name.clone());
            }
        }
        let words = KeywordSet::grouped(&groups);
        let mut names = vec![CODE.to_owned(), GENERAL.to_owned()];
        for name in domains.keys() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        Self {
            words,
            scored,
            names,
        }
    }

    /// Every domain a classifier may answer: `code`, `general`, then the configured ones.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn classify(&self, prompt: &str) -> DomainVerdict {
        let text = clip(prompt, MAX_DOMAIN_SCAN_BYTES);
        let mut scores: Vec<(usize, Vec<&str>)> = vec![(0, Vec::new()); self.scored.len()];
        let mut seen: Vec<usize> = Vec::new();
        let mut strong = None;
        for hit in self.words.hits(text) {
            if hit.group == 0 {
                strong = strong.or(Some(hit.word));
            } else if !seen.contains(&hit.index)
                && let Some((score, words)) = scores.get_mut(hit.group - 1)
            {
                seen.push(hit.index);
                *score += 1;
                words.push(hit.word);
            }
        }
        let strong = strong.or_else(|| shell_line(prompt));
        if let (Some(s), Some(code)) = (strong, scores.first_mut()) {
            code.0 += 3;
            code.1.insert(0, s);
        }
        let best = scores
            .iter()
            .enumerate()
            .max_by_key(|(i, (score, _))| (*score, usize::MAX - i))
            .map(|(i, (score, words))| (i, *score, words.clone()));
        let Some((best_i, top, words)) = best.filter(|(_, score, _)| *score > 0) else {
            return DomainVerdict {
                domain: GENERAL.to_owned(),
                confidence: Confidence::Sure,
                reason: "domain: general (no domain evidence)".to_owned(),
            };
        };
        let tie = scores
            .iter()
            .enumerate()
            .any(|(i, (score, _))| i != best_i && *score == top);
        let name = self.scored.get(best_i).map_or(CODE, String::as_str);
        let confidence = if top >= 2 && !tie {
            Confidence::Sure
        } else {
            Confidence::Unsure
        };
        let shown: Vec<&str> = words.iter().take(4).copied().collect();
        DomainVerdict {
            domain: name.to_owned(),
            confidence,
            reason: format!(
                "domain: {name} by rules (score {top}{}: {})",
                if confidence == Confidence::Sure {
                    ""
                } else {
                    ", unsure"
                },
                shown.join(", ")
            ),
        }
    }
}

/// A line that is a shell session or a log record counts as strong code evidence.
fn shell_line(prompt: &str) -> Option<&'static str> {
    clip(prompt, MAX_DOMAIN_SCAN_BYTES)
        .lines()
        .take(400)
        .find(|l| is_machine_line(l))
        .map(|_| "log/shell line")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(p: &str) -> DomainVerdict {
        DomainRules::new(&BTreeMap::new()).classify(p)
    }

    #[test]
    fn code_evidence_is_code() {
        for p in [
            "Ubuntuでpingコマンドが見つかりません。何をインストールすればいいですか？",
            "```rust\nfn main() {}\n```\nなぜ動かない？",
            "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'",
            "How do I reverse a list in Python without a loop?",
            "Rustのライフタイムエラーを直したい",
            "$ cargo build\nerror[E0382]: borrow of moved value",
        ] {
            let v = classify(p);
            assert_eq!(v.domain, CODE, "{p}: {}", v.reason);
            assert_eq!(v.confidence, Confidence::Sure, "{p}: {}", v.reason);
        }
    }

    #[test]
    fn everyday_chat_is_general_and_sure() {
        for p in [
            "今日の柏市の天気は？",
            "Write a haiku about autumn",
            "おすすめの映画は？",
        ] {
            let v = classify(p);
            assert_eq!(v.domain, GENERAL, "{p}: {}", v.reason);
            assert_eq!(v.confidence, Confidence::Sure);
        }
    }

    #[test]
    fn one_ambiguous_word_is_unsure() {
        let v = classify("Is a python dangerous to keep as a pet?");
        assert_eq!(v.domain, CODE);
        assert_eq!(v.confidence, Confidence::Unsure, "{}", v.reason);
        assert!(v.reason.contains("unsure"));
    }

    #[test]
    fn configured_domains_compete_and_ties_are_unsure() {
        let mut domains = BTreeMap::new();
        domains.insert(
            "math".to_owned(),
            DomainConfig {
                model: None,
                keywords: vec!["積分".into(), "微分".into(), "equation*".into()],
            },
        );
        let rules = DomainRules::new(&domains);
        let v = rules.classify("この積分と微分を解いて");
        assert_eq!(
            (v.domain.as_str(), v.confidence),
            ("math", Confidence::Sure)
        );
        let v = rules.classify("Solve this equation in python");
        assert_eq!(v.confidence, Confidence::Unsure, "{}", v.reason);
        assert_eq!(rules.names(), ["code", "general", "math"]);
    }
}
