//! The terms of the full-text index, the same for SQLite FTS5 and PostgreSQL: text is
//! normalised like memory's embedder (NFKC, lowercase), words are kept whole, and
//! Japanese (which has no spaces) becomes overlapping character bigrams plus single kanji
//! and katakana, so "バックアップ" and "NASの設定" are found by their parts.
//!
//! The indexed column holds the terms joined by spaces; a query is its distinct terms
//! (stop words and lone hiragana dropped), each quoted, joined by OR.

use crate::memory::embed::{STOP_WORDS, normalize};

/// The most terms a query sends to the index.
const MAX_QUERY_TERMS: usize = 48;

fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30ff}' // hiragana, katakana
        | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{f900}'..='\u{faff}' // kanji
        | '\u{ff66}'..='\u{ff9f}' // half-width katakana (NFKC folds them, kept for safety)
        | '\u{ac00}'..='\u{d7af}' // hangul
    )
}

fn is_hiragana(c: char) -> bool {
    ('\u{3040}'..='\u{309f}').contains(&c)
}

/// Every term of `text`, in order, with repeats (for the index).
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for segment in normalize(text).split(' ').filter(|s| !s.is_empty()) {
        let mut run = String::new();
        let mut run_cjk = false;
        for c in segment.chars() {
            let cjk = is_cjk(c);
            if !run.is_empty() && cjk != run_cjk {
                push_run(&run, run_cjk, &mut out);
                run.clear();
            }
            run_cjk = cjk;
            run.push(c);
        }
        if !run.is_empty() {
            push_run(&run, run_cjk, &mut out);
        }
    }
    out
}

fn push_run(run: &str, cjk: bool, out: &mut Vec<String>) {
    if !cjk {
        out.push(run.to_owned());
        return;
    }
    let chars: Vec<char> = run.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if !is_hiragana(*c) || chars.len() == 1 {
            out.push(c.to_string());
        }
        if let Some(next) = chars.get(i + 1) {
            out.push([*c, *next].iter().collect());
        }
    }
}

/// The text stored in the full-text column.
pub fn index_text(text: &str) -> String {
    terms(text).join(" ")
}

/// The distinct terms of a query worth searching for, at most [`MAX_QUERY_TERMS`].
pub fn query_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in terms(text) {
        // A lone hiragana is a particle (の, は); a pair may be a word (びん, ごみ),
        // which the index's IDF weighs against the common endings (ます, です).
        let particle = t.chars().count() == 1 && t.chars().all(is_hiragana);
        if particle || STOP_WORDS.contains(&t.as_str()) || out.contains(&t) {
            continue;
        }
        out.push(t);
        if out.len() == MAX_QUERY_TERMS {
            break;
        }
    }
    out
}

/// Whether a term is a word (letters and digits of a spaced script), not a Japanese
/// character or bigram.
pub fn is_word(term: &str) -> bool {
    !term.chars().any(is_cjk)
}

/// An FTS5 `MATCH` expression for a query: its terms quoted and OR-ed. Terms hold only
/// letters and digits, so quoting cannot be escaped. `None` when nothing is left.
pub fn fts5_query(text: &str) -> Option<String> {
    let terms = query_terms(text);
    (!terms.is_empty()).then(|| {
        terms
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_japanese_bigrams() {
        assert_eq!(terms("The NAS-backup, v2!"), ["the", "nas", "backup", "v2"]);
        assert_eq!(terms("NASの設定"), ["nas", "の設", "設", "設定", "定"]);
        // Hiragana alone are not terms inside a run, only in bigrams.
        assert_eq!(terms("ねこ"), ["ねこ"]);
        assert_eq!(terms("猫"), ["猫"]);
        // Full-width letters fold to ASCII.
        assert_eq!(terms("ＮＡＳ"), ["nas"]);
        let words: Vec<String> = terms("食洗機でE15エラー")
            .into_iter()
            .filter(|t| is_word(t))
            .collect();
        assert_eq!(words, ["e15"]);
    }

    #[test]
    fn a_query_and_its_document_share_terms() {
        let doc: Vec<String> = terms("毎晩二時にバックアップが外付けディスクへ走ります");
        for q in query_terms("バックアップ、へ") {
            assert!(doc.contains(&q), "{q}");
        }
        assert!(query_terms("what is the").is_empty());
        assert!(
            query_terms("の は").is_empty(),
            "lone particles are not searched"
        );
        assert_eq!(fts5_query("what is the"), None);
    }

    #[test]
    fn fts5_queries_quote_every_term() {
        assert_eq!(
            fts5_query("NAS \"backup\" OR schedule*").unwrap(),
            "\"nas\" OR \"backup\" OR \"schedule\""
        );
        assert_eq!(query_terms(&"word ".repeat(100)).len(), 1);
    }
}
