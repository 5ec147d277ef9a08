//! The lexical half of recall: terms of a text for an inverted index, with a tokenizer
//! that works for Japanese as well as English.
//!
//! Japanese has no spaces, so words are found by script: after NFKC and lowercasing, a
//! run of kanji is a word (its character bigrams are its terms, a single kanji is one
//! term), a run of katakana is one term (ミケ, プリウス), hiragana are particles and
//! endings and separate words (の, は, です). ASCII words are stemmed, without stop words.
//! Interrogatives (何, 誰) are never terms: a question's "what" says nothing about what
//! it is about. The household concepts a text mentions (see `concepts`) are terms too, so
//! that "my boy" meets "my son". Terms are hashed to `u64` and de-duplicated.

use super::embed::{STOP_WORDS, normalize, stem};

/// Words that place a question in time or ask again, beyond the embedder's stop words:
/// "where do I live now?" asks what "where do I live?" asks.
const FILLERS: &[&str] = &[
    "now",
    "currently",
    "these",
    "days",
    "still",
    "usual",
    "usually",
    "again",
    "ever",
    "kind",
    "sort",
    "type",
    "lately",
    "anymore",
    "moment",
    "got",
    "like",
    "know",
    "think",
    "thing",
];

/// Kanji that only ask.
const QUESTION_KANJI: &[char] = &['何', '誰'];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    Kanji,
    Katakana,
    Hiragana,
    Other,
}

fn script(c: char) -> Script {
    match c {
        '\u{3041}'..='\u{309F}' => Script::Hiragana,
        '\u{30A0}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}' => Script::Katakana,
        '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '々' => {
            Script::Kanji
        }
        _ => Script::Other,
    }
}

/// A text as recall sees it: its lexical terms and the concepts it mentions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// The words' terms.
    pub terms: Vec<u64>,
    /// The concepts, and their terms (kept apart: a shared concept weighs more than a
    /// shared word).
    pub concepts: Vec<usize>,
    pub concept_terms: Vec<u64>,
}

/// [`terms`] and [`super::concepts::mentioned`] of `text`.
pub fn analyze(text: &str) -> Analysis {
    let concepts = super::concepts::mentioned(text);
    let concept_terms = concepts.iter().map(|&c| concept_term(c)).collect();
    Analysis {
        terms: terms(text),
        concepts,
        concept_terms,
    }
}

/// A concept as a lexical term.
pub fn concept_term(concept: usize) -> u64 {
    hash('c', super::concepts::name(concept).chars())
}

/// The words of `text` as terms (no concepts), sorted and de-duplicated.
pub fn terms(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for segment in normalize(text).split(' ').filter(|s| !s.is_empty()) {
        if segment.is_ascii() {
            word(&mut out, segment);
            continue;
        }
        let chars: Vec<char> = segment.chars().collect();
        let mut start = 0;
        while start < chars.len() {
            let kind = script(chars[start]);
            let end = chars[start..]
                .iter()
                .position(|&c| script(c) != kind)
                .map_or(chars.len(), |n| start + n);
            let run = &chars[start..end];
            match kind {
                Script::Hiragana => {}
                Script::Katakana => out.push(hash('k', run.iter().copied())),
                Script::Kanji => kanji(&mut out, run),
                Script::Other => {
                    let s: String = run.iter().collect();
                    for w in s.split(|c: char| !c.is_alphanumeric()) {
                        word(&mut out, w);
                    }
                }
            }
            start = end;
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn kanji(out: &mut Vec<u64>, run: &[char]) {
    let run: Vec<char> = run
        .iter()
        .copied()
        .filter(|c| !QUESTION_KANJI.contains(c))
        .collect();
    match run.len() {
        0 => {}
        1 => out.push(hash('j', run.iter().copied())),
        _ => out.extend(run.windows(2).map(|w| hash('j', w.iter().copied()))),
    }
}

fn word(out: &mut Vec<u64>, w: &str) {
    if w.is_empty()
        || STOP_WORDS.contains(&w)
        || FILLERS.contains(&w)
        || (w.len() == 1 && !w.as_bytes()[0].is_ascii_digit())
    {
        return;
    }
    out.push(hash('w', stem(w).chars()));
}

/// FNV-1a over a salt and the characters.
fn hash(salt: char, chars: impl Iterator<Item = char>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for c in std::iter::once(salt).chain(chars) {
        for b in u32::from(c).to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(a: &str, b: &str) -> usize {
        let (a, b) = (terms(a), terms(b));
        a.iter().filter(|t| b.binary_search(t).is_ok()).count()
    }

    #[test]
    fn japanese_words_are_found_by_script() {
        // 私, 猫, 名前 and ミケ; the particles and です are not terms.
        assert_eq!(terms("私の猫の名前はミケです").len(), 4);
        // The question shares 私, 猫 and 名前; 何 and でしたっけ are not terms.
        assert_eq!(terms("私の猫の名前は何でしたっけ？").len(), 3);
        assert_eq!(
            shared("私の猫の名前はミケです", "私の猫の名前は何でしたっけ？"),
            3
        );
        assert_eq!(shared("うちの犬はポチです", "私の猫の名前は何？"), 0);
        // Full-width forms fold (NFKC): ＤＳ９２０ is ds920.
        assert_eq!(shared("NASはＤＳ９２０です", "ds920のNAS"), 2);
    }

    #[test]
    fn english_words_are_stemmed_without_stop_words() {
        assert_eq!(
            shared("My cats are called Tama and Mike", "what is my cat called?"),
            2
        );
        assert!(terms("what did I say?").is_empty());
        assert!(terms("what is my").is_empty());
        assert_eq!(shared("I was born on 14 March", "born in March?"), 2);
    }
}
