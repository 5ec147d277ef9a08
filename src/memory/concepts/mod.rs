//! A household thesaurus: the things people tell a home assistant about and ask about
//! later in other words ("my boy" for "my son", "スマホ" for "iPhone", "Wi-Fiの機械" for
//! "ルーター"). Each concept has English words and Japanese forms; a text mentions the
//! concepts whose forms it holds. Recall uses them three ways:
//!
//! - as lexical terms (a question about "my vehicle" matches a fact about "my Subaru");
//! - as subjects: a fact about exactly one single-valued concept (one car, one router,
//!   one home at a time) is keyed by it, so that a newer fact supersedes the older;
//! - as a conflict: a question about a pet or a family member that a memory does not
//!   mention ("my dog's name" against "my cat's name") does not get that memory.
//!
//! Rules only, microseconds: English words match whole (after the lexical stemmer),
//! Japanese forms match as substrings of the NFKC text.

use unicode_normalization::UnicodeNormalization;

/// What kind of thing a concept is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Pets and people of the household (and their kinds: a pet, a child): a question
    /// about one is not answered by a memory about another.
    Who,
    /// Things one has one of at a time (a car, a router, where one lives).
    One,
    /// Topics one can have several of (hobbies, allergies, tastes, dates).
    Many,
}

/// One concept of the thesaurus.
#[derive(Debug)]
pub struct Concept {
    pub name: &'static str,
    pub family: Family,
    /// English words (lowercase; matched whole, also in the plural) and phrases (with a
    /// space: matched in the lowercased text).
    en: &'static [&'static str],
    /// Japanese (and brand) forms, matched as substrings of the NFKC, lowercased text.
    ja: &'static [&'static str],
    /// A broader concept every mention of this one also mentions (`son` → `child`).
    broader: Option<&'static str>,
}

mod table;

pub use table::CONCEPTS;

/// Japanese compounds in which a form does not mean its concept: 大丈夫 holds no husband,
/// 電車 no car, 祖母 no mother (it is a grandparent).
const MASKS: &[&str] = &[
    "大丈夫",
    "丈夫",
    "工夫",
    "電車",
    "自転車",
    "風車",
    "歯車",
    "祖母",
    "叔母",
    "伯母",
    "保母",
    "祖父",
    "叔父",
    "伯父",
    "筋肉",
    "皮肉",
    "曲がる",
    "曲がり",
    "曲線",
    "医療費",
];

/// One pattern of the automaton: a concept's form, or a mask.
struct Pattern {
    /// The concept, or `None` for a mask.
    concept: Option<usize>,
    /// ASCII patterns match whole words (a plural `s`, `es` or `'s` may follow).
    word: bool,
}

struct Matcher {
    ac: aho_corasick::AhoCorasick,
    patterns: Vec<Pattern>,
}

static MATCHER: std::sync::LazyLock<Option<Matcher>> = std::sync::LazyLock::new(|| {
    let mut texts: Vec<String> = Vec::new();
    let mut patterns = Vec::new();
    for (i, concept) in CONCEPTS.iter().enumerate() {
        for form in concept.en.iter().chain(concept.ja) {
            let form: String = form
                .nfkc()
                .flat_map(char::to_lowercase)
                .map(|c| if matches!(c, '-' | '_' | '/') { ' ' } else { c })
                .collect();
            patterns.push(Pattern {
                concept: Some(i),
                word: form.is_ascii(),
            });
            texts.push(form);
        }
    }
    for mask in MASKS {
        patterns.push(Pattern {
            concept: None,
            word: false,
        });
        texts.push((*mask).to_owned());
    }
    let ac = aho_corasick::AhoCorasickBuilder::new()
        .match_kind(aho_corasick::MatchKind::Standard)
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .build(&texts)
        .ok()?;
    Some(Matcher { ac, patterns })
});

/// The concepts `text` mentions, as indexes into [`CONCEPTS`], sorted, with the broader
/// concepts of those it names.
pub fn mentioned(text: &str) -> Vec<usize> {
    let Some(matcher) = MATCHER.as_ref() else {
        return Vec::new();
    };
    // Lowercased NFKC, with hyphens and underscores as spaces ("Wi-Fi" → "wi fi"), so
    // that phrases match across punctuation.
    let fold = |c: char| if matches!(c, '-' | '_' | '/') { ' ' } else { c };
    // NFKC leaves ASCII as it is: the same result without the Unicode tables.
    let lower: String = if text.is_ascii() {
        text.chars().map(|c| fold(c.to_ascii_lowercase())).collect()
    } else {
        text.nfkc().flat_map(char::to_lowercase).map(fold).collect()
    };
    let bytes = lower.as_bytes();
    let word_byte = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    let mut masks: Vec<(usize, usize)> = Vec::new();
    let mut found: Vec<(usize, usize, usize)> = Vec::new();
    for m in matcher.ac.find_overlapping_iter(&lower) {
        let Some(pattern) = matcher.patterns.get(m.pattern().as_usize()) else {
            continue;
        };
        let Some(concept) = pattern.concept else {
            masks.push((m.start(), m.end()));
            continue;
        };
        if pattern.word {
            let before = m.start().checked_sub(1).and_then(|i| bytes.get(i));
            let rest = &lower[m.end()..];
            let end = ["'s", "es", "s", ""]
                .iter()
                .find(|suffix| rest.starts_with(**suffix))
                .map_or(m.end(), |suffix| m.end() + suffix.len());
            let after_plain = bytes.get(m.end());
            let after_suffixed = bytes.get(end);
            if word_byte(before) || (word_byte(after_plain) && word_byte(after_suffixed)) {
                continue;
            }
        }
        found.push((m.start(), m.end(), concept));
    }
    let mut out = Vec::new();
    for (start, end, concept) in found {
        let masked = masks
            .iter()
            .any(|&(ms, me)| ms <= start && end <= me && (ms, me) != (start, end));
        if masked {
            continue;
        }
        out.push(concept);
        if let Some(broader) = CONCEPTS[concept].broader
            && let Some(b) = CONCEPTS.iter().position(|c| c.name == broader)
        {
            out.push(b);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The concepts of `text` that say who or which pet it is about.
pub fn who(mentioned: &[usize]) -> impl Iterator<Item = usize> + '_ {
    mentioned
        .iter()
        .copied()
        .filter(|&i| CONCEPTS[i].family == Family::Who)
}

/// A set of concepts as bits (the thesaurus has fewer than 128 concepts; a test holds it
/// to that).
pub type Mask = u128;

/// The bit of one concept.
fn bit(i: usize) -> Mask {
    1u128
        .checked_shl(u32::try_from(i).unwrap_or(u32::MAX))
        .unwrap_or(0)
}

/// The concepts as a [`Mask`].
pub fn mask(concepts: &[usize]) -> Mask {
    concepts.iter().fold(0, |m, &i| m | bit(i))
}

/// The masks a recall's checks need, made once.
struct Masks {
    /// Pets and people (and their kinds).
    who: Mask,
    /// Pets and their kind.
    pets: Mask,
}

static FAMILY_MASKS: std::sync::LazyLock<Masks> = std::sync::LazyLock::new(|| {
    let of = |f: &dyn Fn(&Concept) -> bool| {
        CONCEPTS
            .iter()
            .enumerate()
            .filter(|(_, c)| f(c))
            .fold(0, |m, (i, _)| m | bit(i))
    };
    Masks {
        who: of(&|c| c.family == Family::Who),
        pets: of(&|c| c.name == "pet" || c.broader == Some("pet")),
    }
});

/// What a question's concepts allow of a memory, made once per recall so that checking
/// each of many memories is a few bit operations.
#[derive(Debug, Clone, Default)]
pub struct Fit {
    /// Who the question names (pets and people).
    who: Mask,
    /// The people it names: a memory must name each.
    people: Mask,
    /// The topics it names (things, tastes, names).
    topics: Mask,
    /// For each concept it names that has a broader one: the bits of the kinds of that
    /// broader one the question names, and of those it does not (a memory naming one of
    /// the latter and none of the former is about another kind of thing; a question
    /// about the cat and the dog gets the memory of either).
    siblings: Vec<(Mask, Mask)>,
}

impl Fit {
    pub fn new(query: &[usize]) -> Self {
        let masks = &*FAMILY_MASKS;
        let q = mask(query);
        let siblings = query
            .iter()
            .filter_map(|&i| {
                let broader = CONCEPTS[i].broader?;
                let kinds = CONCEPTS
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.broader == Some(broader))
                    .fold(0, |m, (j, _)| m | bit(j));
                Some((kinds & q, kinds & !q))
            })
            .collect();
        Self {
            who: q & masks.who,
            people: q & masks.who & !masks.pets,
            topics: q & !masks.who,
            siblings,
        }
    }

    /// Whether a memory with concepts `m` may answer the question: every person the
    /// question names is one the memory names too (a memory that names nobody is about
    /// the speaker), the memory names no other kind of the same thing instead (a cat
    /// against a dog, coffee against tea), nor only others than it names (a daughter
    /// against a hamster). A pet of a kind the thesaurus does not know is no conflict.
    pub fn compatible(&self, m: Mask) -> bool {
        let named_others = self.who != 0 && m & FAMILY_MASKS.who != 0 && self.who & m == 0;
        !named_others
            && self.people & !m == 0
            && self
                .siblings
                .iter()
                .all(|&(own, others)| m & own != 0 || m & others == 0)
    }

    /// Whether a memory with concepts `m` is about another topic than the question:
    /// both name topics (things, tastes, names, not people), and none in common ("my
    /// laptop's memory" against "my desktop's GPU", "my wife's job" against "my wife's
    /// name").
    pub fn off_topic(&self, m: Mask) -> bool {
        let theirs = m & !FAMILY_MASKS.who;
        self.topics != 0 && theirs != 0 && self.topics & theirs == 0
    }
}

/// [`Fit::compatible`] of two concept lists.
pub fn compatible(query: &[usize], memory: &[usize]) -> bool {
    Fit::new(query).compatible(mask(memory))
}

/// [`Fit::off_topic`] of two concept lists.
pub fn off_topic(query: &[usize], memory: &[usize]) -> bool {
    Fit::new(query).off_topic(mask(memory))
}

/// The subject of a fact by its concepts: the single-valued things it is about (a car;
/// a home server and its OS), at most two, qualified by whose they are when it names one
/// person ("wife car"); `None` when it names none or more.
pub fn subject(mentioned: &[usize]) -> Option<String> {
    let ones: Vec<&str> = mentioned
        .iter()
        .filter(|&&i| CONCEPTS[i].family == Family::One)
        .map(|&i| CONCEPTS[i].name)
        .collect();
    if ones.is_empty() || ones.len() > 2 {
        return None;
    }
    // The people named: the specific ones ("wife", not also "spouse"), no pets.
    let mut people = who(mentioned).filter(|&i| {
        let concept = &CONCEPTS[i];
        concept.broader != Some("pet") && !CONCEPTS.iter().any(|c| c.broader == Some(concept.name))
    });
    let things = ones.join(" ");
    match (people.next(), people.next()) {
        (None, _) => Some(things),
        (Some(p), None) => Some(format!("{} {things}", CONCEPTS[p].name)),
        _ => None,
    }
}

/// The concepts a subject made by [`subject`] names ("wife car" → wife, car).
pub fn in_subject(subject: &str) -> Vec<usize> {
    let words: Vec<&str> = subject.split(' ').collect();
    CONCEPTS
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c.name == subject
                || words.contains(&c.name)
                || (c.name.contains(' ') && subject.contains(c.name))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The concept's name (for tests and `memory list`).
pub fn name(i: usize) -> &'static str {
    CONCEPTS[i].name
}

#[cfg(test)]
mod tests;
