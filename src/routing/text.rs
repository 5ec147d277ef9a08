//! Text helpers for the rules: a compiled keyword set (one Aho-Corasick pass, English
//! words on word boundaries) and the prose extractor that keeps pasted code and logs out
//! of web-search detection.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use memchr::memmem::Finder;

/// Keywords in one or more groups, matched in one overlapping pass, ASCII
/// case-insensitively (no lowercased copy of the text is made: Unicode lowercasing costs
/// more than the whole match on a 5 KB Japanese prompt). Grouping lets a caller ask for
/// several lists (positive, negative, ...) with one scan. `_` counts as a word character
/// for the boundary checks.
#[derive(Debug, Clone)]
pub(crate) struct KeywordSet {
    ac: Option<AhoCorasick>,
    words: Vec<Keyword>,
    groups: usize,
}

#[derive(Debug, Clone)]
struct Keyword {
    text: String,
    group: usize,
    /// Check the byte before the match does not continue a word.
    left_edge: bool,
    /// Check the byte after the match does not continue a word.
    right_edge: bool,
}

/// One keyword found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit<'a> {
    pub word: &'a str,
    /// The keyword's index in the whole set (distinct per keyword).
    pub index: usize,
    pub group: usize,
    /// Byte offset in the text.
    pub at: usize,
}

impl KeywordSet {
    /// One group (see the config module doc for the syntax).
    pub fn new<S: AsRef<str>>(list: &[S]) -> Self {
        Self::grouped(&[list])
    }

    /// Several groups; hits carry their group's index. Blank entries are skipped
    /// (`validate` reports them).
    pub fn grouped<S: AsRef<str>>(groups: &[&[S]]) -> Self {
        let mut words = Vec::new();
        for (group, list) in groups.iter().enumerate() {
            for raw in *list {
                let raw = raw.as_ref().trim();
                let prefix = raw.ends_with('*');
                let text = raw.trim_end_matches('*').trim().to_lowercase();
                let first = text
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric());
                let last = text
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_ascii_alphanumeric());
                if !text.is_empty() {
                    words.push(Keyword {
                        text,
                        group,
                        left_edge: first,
                        right_edge: last && !prefix,
                    });
                }
            }
        }
        let ac = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(words.iter().map(|w| w.text.as_str()))
            .ok();
        Self {
            ac,
            words,
            groups: groups.len(),
        }
    }

    /// Every keyword occurrence in `text` (overlapping), ordered by where it starts.
    pub fn hits<'s>(&'s self, text: &str) -> Vec<Hit<'s>> {
        let Some(ac) = &self.ac else {
            return Vec::new();
        };
        let bytes = text.as_bytes();
        let mut out: Vec<Hit<'s>> = ac
            .find_overlapping_iter(text)
            .filter_map(|m| {
                let index = m.pattern().as_usize();
                let w = self.words.get(index)?;
                let before = m.start().checked_sub(1).and_then(|i| bytes.get(i));
                let after = bytes.get(m.end());
                let broken = (w.left_edge && before.is_some_and(is_word_byte))
                    || (w.right_edge && after.is_some_and(is_word_byte));
                (!broken).then_some(Hit {
                    word: &w.text,
                    index,
                    group: w.group,
                    at: m.start(),
                })
            })
            .collect();
        out.sort_by_key(|h| h.at);
        out
    }

    /// The first keyword in text order.
    pub fn first<'s>(&'s self, text: &str) -> Option<Hit<'s>> {
        self.hits(text).into_iter().next()
    }

    /// The first keyword of each group, from one scan.
    pub fn first_per_group<'s>(&'s self, text: &str) -> Vec<Option<Hit<'s>>> {
        let mut firsts = vec![None; self.groups];
        for hit in self.hits(text) {
            if let Some(slot @ None) = firsts.get_mut(hit.group) {
                *slot = Some(hit);
            }
        }
        firsts
    }
}

/// ASCII letters, digits and `_` continue a word (`current_dir` is not `current`).
fn is_word_byte(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || *b == b'_'
}

/// The largest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub(crate) fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// At most `max` characters of `s`.
pub(crate) fn clip_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The most bytes of input the prose extractor reads: a 1 MB paste costs the same as 32 KB.
pub(crate) const MAX_SCAN_BYTES: usize = 32 * 1024;

/// The prose of a prompt and how much pasted material was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Prose {
    /// The prose, at most the asked number of characters.
    pub text: String,
    /// Lines skipped as code, logs, stack frames or shell sessions.
    pub machine_lines: usize,
}

/// The prose of `text`: lines outside code fences that do not look like logs,
/// stack frames, shell sessions or code, with inline `code` removed; at most `max_chars`.
pub(crate) fn prose(text: &str, max_chars: usize) -> Prose {
    let mut out = String::new();
    let mut chars = 0usize;
    let mut in_fence = false;
    let mut machine_lines = 0usize;
    for line in clip(text, MAX_SCAN_BYTES).lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            machine_lines += 1;
            continue;
        }
        if in_fence || is_machine_line(line) {
            machine_lines += 1;
            continue;
        }
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                chars += part.chars().count();
                out.push_str(part);
            } else {
                out.push(' ');
            }
        }
        out.push('\n');
        if chars >= max_chars {
            let cut = clip_chars(&out, max_chars).len();
            out.truncate(cut);
            break;
        }
    }
    Prose {
        text: out,
        machine_lines,
    }
}

#[rustfmt::skip]
const LOG_LEVELS: [&str; 8] = [
    "INFO", "ERROR", "WARN", "WARNING", "DEBUG", "TRACE", "FATAL", "CRITICAL",
];
/// [`LOG_LEVELS`]' searchers, built once: building one per level for every line of every
/// turn cost more than the searches.
static LOG_LEVEL_FINDERS: LazyLock<[Finder<'static>; 8]> =
    LazyLock::new(|| LOG_LEVELS.map(Finder::new));
#[rustfmt::skip]
const MACHINE_PREFIXES: [&str; 14] = [
    "File \"", "Traceback", "Caused by:", "$ ", ">>> ", "PS ", "C:\\", "/usr/", "/home/",
    "/var/", "#0 ", "thread '", "npm ERR", "E   ",
];
#[rustfmt::skip]
const MONTHS: [&str; 12] = [
    "Jan ", "Feb ", "Mar ", "Apr ", "May ", "Jun ", "Jul ", "Aug ", "Sep ", "Oct ", "Nov ",
    "Dec ",
];

/// True for a line a person did not write as prose: log records, stack frames, prompts,
/// indented code, or lines dense with code punctuation.
pub(crate) fn is_machine_line(line: &str) -> bool {
    if line.starts_with("    ") || line.starts_with('\t') {
        return true;
    }
    let t = line.trim();
    if t.is_empty() {
        return false;
    }
    let b = t.as_bytes();
    let stamp = b.strip_prefix(b"[").unwrap_or(b);
    if is_timestamp(stamp) {
        return true;
    }
    let indented_frame = line.starts_with(' ') && t.starts_with("at ");
    if indented_frame || MACHINE_PREFIXES.iter().any(|p| t.starts_with(p)) {
        return true;
    }
    if MONTHS.iter().any(|m| t.starts_with(m)) && b.get(4).is_some_and(u8::is_ascii_digit) {
        return true;
    }
    let head = clip(t, 48);
    if LOG_LEVEL_FINDERS
        .iter()
        .any(|lvl| has_upper_token(head, lvl))
    {
        return true;
    }
    // Code punctuation density, judged on the first 512 bytes of long lines.
    let t = clip(t, 512);
    let len = t.chars().count();
    let symbols = t
        .bytes()
        .filter(|b| {
            matches!(
                b,
                b'{' | b'}'
                    | b'['
                    | b']'
                    | b'('
                    | b')'
                    | b';'
                    | b'='
                    | b'<'
                    | b'>'
                    | b'|'
                    | b'\\'
                    | b'_'
                    | b'$'
                    | b'&'
                    | b'*'
            )
        })
        .count();
    len >= 8 && symbols * 6 >= len
}

/// `2024-05-01 12:00`, `2024-05-01T12:00`, `2024/05/01 12:00` or `12:00:01` at the start.
fn is_timestamp(b: &[u8]) -> bool {
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let date = digits(0..4)
        && matches!(b.get(4), Some(b'-' | b'/' | b'.'))
        && digits(5..7)
        && matches!(b.get(10), Some(b' ' | b'T'))
        && b.get(11).is_some_and(u8::is_ascii_digit);
    let clock = digits(0..2) && b.get(2) == Some(&b':') && digits(3..5) && b.get(5) == Some(&b':');
    date || clock
}

/// `word` (a searcher for an uppercase word) appears in `s` as a token of its own (not
/// inside a longer word).
fn has_upper_token(s: &str, word: &Finder<'_>) -> bool {
    word.find_iter(s.as_bytes()).any(|i| {
        let before = s[..i].chars().next_back();
        let after = s[i + word.needle().len()..].chars().next();
        before.is_none_or(|c| !c.is_alphanumeric()) && after.is_none_or(|c| !c.is_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_words_match_on_boundaries_and_stars_run_on() {
        let set = KeywordSet::new(&["news", "implement*", "c++", "天気"]);
        let words =
            |t: &str| -> Vec<String> { set.hits(t).iter().map(|h| h.word.to_owned()).collect() };
        assert_eq!(words("Latest NEWS, please"), ["news"]);
        assert!(words("subscribe to the newsletter").is_empty());
        assert!(words("renews").is_empty());
        assert_eq!(words("implementation details"), ["implement"]);
        assert!(words("reimplement").is_empty());
        assert!(words("news_feed").is_empty());
        let grouped = KeywordSet::grouped(&[&["stock price*"][..], &["price", "any news"][..]]);
        let firsts = grouped.first_per_group("any news on the stock price?");
        assert_eq!(firsts[0].map(|h| h.word), Some("stock price"));
        assert_eq!(firsts[1].map(|h| h.word), Some("any news"));
        assert_eq!(words("modern c++17"), ["c++"]);
        assert_eq!(words("今日の天気は"), ["天気"]);
        assert_eq!(words("ニュースnewsです"), ["news"]);
    }

    #[test]
    fn prose_skips_fences_logs_and_inline_code() {
        let text = concat!(
            "Why does this fail today?\n```\nlet today = latest();\n```\n",
            "2024-05-01 12:00:00 ERROR news feed down\n",
            "[12:00:01] weather service INFO started\n",
            "    indented latest code\n",
            "Use `current_dir` here."
        );
        let prose = prose(text, 2000);
        assert_eq!(prose.machine_lines, 6);
        let p = prose.text;
        assert!(p.contains("Why does this fail today?"));
        assert!(!p.contains("latest"), "{p}");
        assert!(!p.contains("news"), "{p}");
        assert!(!p.contains("weather"), "{p}");
        assert!(!p.contains("current_dir"), "{p}");
        assert!(p.contains("Use"));
    }

    #[test]
    fn prose_is_capped_in_characters() {
        let long = "天気".repeat(5000);
        assert_eq!(prose(&long, 100).text.chars().count(), 100);
        assert!(prose(&"x".repeat(1_000_000), 10).text.chars().count() <= 10);
    }

    #[test]
    fn machine_lines() {
        for l in [
            "2025-01-02 03:04:05 INFO started",
            "Jan 12 10:00:01 host systemd[1]: Started",
            "  File \"app.py\", line 3, in <module>",
            "    at com.example.Main.run(Main.java:10)",
            "$ sudo apt install iputils-ping",
            "if (x == y) { return foo(bar[0]); }",
            "[2024-01-01T00:00:00Z] request served",
            "thread 'main' panicked at src/main.rs:2:5",
            "WARN: disk almost full",
        ] {
            assert!(is_machine_line(l), "{l}");
        }
        for l in [
            "What is the weather today?",
            "今日の柏市の天気は？",
            "# My question",
            "Error handling in Rust: how?",
            "2024-05-01に何があった？",
            "12:00に集合でいい？",
            "[1] footnote text",
        ] {
            assert!(!is_machine_line(l), "{l}");
        }
    }
}
