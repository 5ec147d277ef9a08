//! Facts in the person's own words: from a remembered prompt, the statements the person
//! made about themselves, their household, their machines and their preferences, each a
//! memory item of its own. Questions, requests, thanks and small talk are not facts.
//!
//! Rules only (microseconds, no model): the prompt is split into sentences (and English
//! sentences into first-person clauses), each sentence is classified, and a fact about a
//! single-valued subject ("my router", "猫の名前", where I live) gets a subject key, so that
//! a later fact on the same subject supersedes it in recall (see `index`). With
//! `[memory] extract_model` a model may do the same job (`extract`), with these rules as
//! its fallback.

use unicode_normalization::UnicodeNormalization;

use crate::lang::{Lang, detect_language};

mod en;
mod ja;

use en::{en_statement, en_subject};
use ja::{JA_SMALL_TALK, ja_statement, ja_subject};

/// The longest sentence kept as a fact, in characters: longer ones are narratives, not
/// statements.
pub(crate) const MAX_FACT_CHARS: usize = 240;
/// How many facts one prompt gives at most.
pub const MAX_FACTS: usize = 8;

/// One statement the person made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// The statement as the person wrote it (whitespace flattened, trailing request cut).
    pub text: String,
    /// What it is about, when that can hold one value at a time (`home`, `router`,
    /// `猫の名前`): a later fact with the same subject supersedes this one.
    pub subject: Option<String>,
}

/// The facts a prompt states, in order, at most [`MAX_FACTS`]. Statements of one prompt
/// about the same subject are one fact ("エディタはずっとVS Code派です。Vimは挫折しました"),
/// and so is a Japanese statement that names nothing of its own with the one before it
/// ("HHKBを買いました。打鍵感が最高です").
pub fn extract(prompt: &str) -> Vec<Fact> {
    let mut out: Vec<Fact> = Vec::new();
    for sentence in sentences(prompt) {
        let lang = detect_language(sentence);
        for clause in clauses(sentence, lang) {
            let Some(text) = statement(&clause, lang) else {
                continue;
            };
            if out.iter().any(|f| f.text == text) {
                continue;
            }
            let concepts = super::concepts::mentioned(&text);
            let subject = subject(&text, lang, &concepts);
            let continues = out.last().is_some_and(|last| {
                (subject.is_some() && last.subject == subject)
                    || (lang == Lang::Ja && subject.is_none() && concepts.is_empty())
            });
            if let Some(last) = out.last_mut().filter(|l| {
                continues && l.text.chars().count() + text.chars().count() < MAX_FACT_CHARS
            }) {
                last.text.push_str(match lang {
                    Lang::Ja => "。",
                    Lang::En => ". ",
                });
                last.text.push_str(&text);
                continue;
            }
            out.push(Fact { text, subject });
            if out.len() == MAX_FACTS {
                return out;
            }
        }
    }
    out
}

/// Words that say a fact replaces an earlier one ("I ditched the Nighthawk", "dynabookを
/// VAIOに買い替えた"): such a fact without a subject of its own takes the subject of the
/// earlier fact it names.
const CHANGES: &[&str] = &[
    "replaced",
    "switched",
    "swapped",
    "traded",
    "ditched",
    "upgraded",
    "left",
    "quit",
    "moved",
    "sold",
    "got rid of",
    "no longer",
    "retired",
    "changed",
    "gave up",
    "instead",
    "買い替え",
    "乗り換え",
    "替え",
    "換え",
    "変え",
    "辞め",
    "やめ",
    "引っ越",
    "機種変",
    "手放",
    "換装",
    "移っ",
    "転職",
];

/// Whether a fact says it replaces an earlier one.
pub fn is_change(text: &str) -> bool {
    let lower = text.to_lowercase();
    CHANGES.iter().any(|c| {
        if c.is_ascii() {
            lower.match_indices(c).any(|(at, _)| {
                let before = lower[..at].chars().next_back();
                let after = lower[at + c.len()..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            })
        } else {
            lower.contains(c)
        }
    })
}

/// Words of reactions and greetings: a prompt made only of them asks for no memory.
const SMALL_TALK_WORDS: &[&str] = &[
    "lol", "haha", "hahaha", "nice", "ok", "okay", "thanks", "thank", "you", "thx", "ty", "great",
    "cool", "awesome", "hi", "hello", "hey", "bye", "good", "morning", "night", "evening",
    "cheers", "wow", "yes", "no", "yep", "nope", "sure", "got", "it", "perfect", "lmao", "omg",
    "welp", "oh", "ah", "hmm", "sounds", "that", "helped", "a", "lot", "so", "much", "very",
    "again", "see", "ya", "later", "np",
];

/// Whether a prompt is only a reaction or a greeting ("lol nice", "ありがとう、助かりました"):
/// such a turn gets no memory.
pub fn small_talk(prompt: &str) -> bool {
    let normal = super::embed::normalize(prompt);
    if normal.is_empty() {
        return true;
    }
    if normal.is_ascii() {
        return normal.split(' ').all(|w| SMALL_TALK_WORDS.contains(&w));
    }
    let mut rest = normal.replace(' ', "");
    for word in JA_SMALL_TALK.iter().chain(&[
        "ございます",
        "です",
        "ね",
        "よ",
        "本当に",
        "とても",
        "どうも",
        "ほんと",
    ]) {
        rest = rest.replace(word, "");
    }
    rest.chars().all(|c| ('\u{3041}'..='\u{309F}').contains(&c))
}

/// The text that decides whether two facts are the same: NFKC, lowercase, letters and
/// digits only.
pub fn fact_key(text: &str) -> String {
    text.nfkc()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// Sentences with their end marks: split after `。！？!?`, a newline, or a `.` that ends a
/// word (followed by whitespace or the end).
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            let mut end = rest.len();
            let mut chars = rest.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                let next = chars.peek().map(|&(_, n)| n);
                let ends = match c {
                    '。' | '！' | '？' | '!' | '?' | '\n' => true,
                    '.' => next.is_none_or(char::is_whitespace),
                    _ => false,
                };
                if ends {
                    // Keep runs of end marks ("?!", "。。") with the sentence.
                    let mut cut = i + c.len_utf8();
                    while let Some(&(j, n)) = chars.peek() {
                        if matches!(n, '。' | '！' | '？' | '!' | '?' | '.') {
                            cut = j + n.len_utf8();
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    end = cut;
                    break;
                }
            }
            let (sentence, tail) = rest.split_at(end);
            rest = tail;
            let sentence = sentence.trim();
            if !sentence.is_empty() {
                return Some(sentence);
            }
        }
    })
}

/// Japanese conjunctions after which a sentence's next clause starts ("札幌に住んでるんだ
/// けど、雪かきを楽にする方法ある？"): the clause before may be a fact while the sentence
/// asks.
const JA_CONJUNCTIONS: &[&str] = &[
    "なんですけど",
    "なんだけど",
    "なんですが",
    "んですけど",
    "んだけど",
    "んですが",
    "けれども",
    "けれど",
    "けど",
    "のですが",
    "ですが",
    "ますが",
    "だが",
    "なので",
    "ので",
];

/// Explanatory endings left when a conjunction is cut off ("住んでるんだ", "生まれなんです").
const JA_EXPLANATORY: &[&str] = &["なんです", "なんだ", "んです", "んだ", "のです", "なの"];

/// Words that start a new English clause after a comma ("…, any tips?", "…, I can't
/// stand it").
const EN_CLAUSE_STARTS: &[&str] = &[
    "i", "i'm", "i've", "i'd", "my", "we", "we're", "our", "any", "anything", "what", "how", "can",
    "could", "would", "should", "do", "does", "is", "are", "so", "but", "please", "thanks",
    "remind", "tell", "which", "where", "when", "why",
];

/// Clause starts that begin a clause after a comma only as a question.
const EN_AUXILIARIES: &[&str] = &["can", "could", "would", "should", "do", "does", "is", "are"];

/// The clauses of a sentence that may each state a fact: Japanese sentences split after a
/// conjunction (which is cut off, with any explanatory ending before it), English ones
/// before a new clause ("I live in Osaka and my wife works in Kobe", "…, any tips?").
fn clauses(sentence: &str, lang: Lang) -> Vec<Clause<'_>> {
    let mut out = Vec::new();
    match lang {
        Lang::Ja => {
            let mut start = 0;
            for (at, _) in sentence.match_indices('、') {
                let head = &sentence[start..at];
                if let Some(conj) = JA_CONJUNCTIONS.iter().find(|c| head.ends_with(*c)) {
                    let mut clause = &head[..head.len() - conj.len()];
                    if let Some(e) = JA_EXPLANATORY.iter().find(|e| clause.ends_with(*e)) {
                        clause = &clause[..clause.len() - e.len()];
                    }
                    out.push(Clause {
                        text: clause.trim(),
                        before_conjunction: true,
                    });
                    start = at + '、'.len_utf8();
                }
            }
            out.push(Clause {
                text: sentence[start..].trim(),
                before_conjunction: false,
            });
        }
        Lang::En => {
            let lower = sentence.to_ascii_lowercase();
            let mut cuts = vec![0];
            for sep in [
                " and i ",
                " and my ",
                " and we ",
                " and our ",
                ", but i ",
                "; ",
            ] {
                let mut from = 0;
                while let Some(at) = lower[from..].find(sep) {
                    let at = from + at;
                    // Cut after the conjunction, so the clause starts at its pronoun.
                    let skip = sep
                        .trim_end()
                        .rfind(' ')
                        .map_or(sep.len(), |space| space + 1);
                    cuts.push(if sep == "; " { at + 2 } else { at + skip });
                    from = at + sep.len();
                }
            }
            for (at, _) in lower.match_indices(", ") {
                let next = lower[at + 2..]
                    .split(|c: char| !(c.is_alphanumeric() || c == '\''))
                    .next()
                    .unwrap_or("");
                // Not after an opening name or phrase ("Maisie, my youngest, is nine").
                let since = cuts.iter().copied().filter(|&c| c <= at).max().unwrap_or(0);
                let before = lower[since..at].split_whitespace().count();
                // An auxiliary starts a clause only as a question ("…, can you help?").
                let asks = lower[at + 2 + next.len()..]
                    .split_whitespace()
                    .next()
                    .is_some_and(|w| {
                        ["you", "i", "we", "it", "there", "that", "this"].contains(&w)
                    });
                let starts =
                    EN_CLAUSE_STARTS.contains(&next) && (!EN_AUXILIARIES.contains(&next) || asks);
                if starts && before >= 3 {
                    cuts.push(at + 2);
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            for (n, &start) in cuts.iter().enumerate() {
                let end = cuts.get(n + 1).map_or(sentence.len(), |&e| e);
                let mut clause = sentence[start..end].trim();
                for tail in [" and", ", but", ";", ","] {
                    clause = clause.strip_suffix(tail).unwrap_or(clause).trim_end();
                }
                out.push(Clause {
                    text: clause,
                    before_conjunction: false,
                });
            }
        }
    }
    out.retain(|c| !c.text.is_empty());
    out
}

/// A clause of a sentence, and whether it was cut before a Japanese conjunction.
struct Clause<'a> {
    text: &'a str,
    before_conjunction: bool,
}

/// The fact a clause states, or `None` for a question, a request, thanks or small talk.
fn statement(clause: &Clause<'_>, lang: Lang) -> Option<String> {
    let flat = clause.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = match lang {
        Lang::Ja => ja_statement(&flat, clause.before_conjunction)?,
        Lang::En => en_statement(&flat)?,
    };
    let chars = text.chars().count();
    (4..=MAX_FACT_CHARS).contains(&chars).then_some(text)
}

/// The subject of `fact` (see `subject`), in the language of `fact`.
pub fn subject_of(fact: &str) -> Option<String> {
    subject(
        fact,
        detect_language(fact),
        &super::concepts::mentioned(fact),
    )
}

/// A fact's subject: the single-valued household concept it is about (the same in both
/// languages: `router` for "my router" and "うちのルーター"), else what its wording
/// names ("cat name", "猫の名前"). `concepts`: those `fact` mentions.
fn subject(fact: &str, lang: Lang, concepts: &[usize]) -> Option<String> {
    super::concepts::subject(concepts).or_else(|| match lang {
        Lang::Ja => ja_subject(fact),
        Lang::En => en_subject(fact),
    })
}

#[cfg(test)]
mod tests;
