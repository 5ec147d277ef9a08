//! The English rules: what makes a clause a question, a request or small talk, and the
//! subject of a statement by its wording.

use super::is_change;

const EN_FILLERS: &[&str] = &[
    "btw",
    "by the way",
    "fyi",
    "oh",
    "also",
    "so",
    "well",
    "ok",
    "okay",
    "anyway",
    "actually",
    "just so you know",
    "for the record",
    "for context",
    "quick note",
    "note that",
    "remember that",
    "remember this",
    "please remember that",
    "please remember",
    "remember",
    "keep in mind that",
    "don't forget that",
];

/// Openings that make a clause a question.
const EN_QUESTION_STARTS: &[&str] = &[
    "what", "where", "when", "who", "whom", "whose", "why", "how", "which", "do", "does", "did",
    "is", "are", "was", "were", "can", "could", "would", "should", "will", "shall", "have", "has",
    "any", "am",
];

/// Openings that make a clause a request (or a thought, not a fact).
const EN_REQUEST_STARTS: &[&str] = &[
    "please",
    "tell",
    "remind",
    "help",
    "write",
    "explain",
    "give",
    "show",
    "make",
    "list",
    "find",
    "suggest",
    "recommend",
    "let's",
    "let me",
    "translate",
    "summarize",
    "summarise",
    "create",
    "check",
    "compare",
    "describe",
    "i want you",
    "i'd like you",
    "i need you",
    "i need help",
    "i'd like to know",
    "i want to know",
    "i wonder",
    "i was wondering",
    "i think",
    "i guess",
    "i hope",
    "i'm not sure",
    "i am not sure",
    "i don't know",
    "i'm looking for",
    "i am looking for",
    "i'm trying to",
    "i am trying to",
    "thanks",
    "thank you",
    "hello",
    "hi",
    "hey",
    "great",
    "cool",
    "nice",
    "got it",
    "sounds good",
];

const EN_FIRST_PERSON: &[&str] = &[
    "i", "i'm", "i've", "i'd", "i'll", "im", "my", "me", "mine", "we", "we're", "we've", "our",
    "us", "myself",
];

pub(super) fn en_statement(clause: &str) -> Option<String> {
    let mut s = clause.trim();
    if s.ends_with('?') {
        return None;
    }
    s = s.trim_end_matches(['.', '!', ' ']);
    let lower = |s: &str| s.to_ascii_lowercase().replace('’', "'");
    // Fillers and "remember that" before the fact.
    loop {
        let l = lower(s);
        let Some(filler) = EN_FILLERS.iter().find(|f| {
            l.starts_with(*f)
                && l[f.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| matches!(c, ' ' | ',' | ':' | '-'))
        }) else {
            break;
        };
        s = s[filler.len()..].trim_start_matches([' ', ',', ':', '-']);
    }
    let l = lower(s);
    let words: Vec<&str> = l
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let first = *words.first()?;
    if EN_QUESTION_STARTS.contains(&first)
        || EN_REQUEST_STARTS.iter().any(|r| {
            l.starts_with(r)
                && l[r.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric())
        })
        || first == "you"
    {
        return None;
    }
    // About the person: in the first person, or about their household (a pet, a family
    // member, one of their machines: "Mum's birthday is 2 February").
    let household = || {
        crate::memory::concepts::mentioned(s).iter().any(|&c| {
            crate::memory::concepts::CONCEPTS[c].family != crate::memory::concepts::Family::Many
        })
    };
    // A change ("Finally sold the Mazda") is the speaker's without saying so.
    if !words.iter().any(|w| EN_FIRST_PERSON.contains(w)) && !household() && !is_change(s) {
        return None;
    }
    // A clause needs a verb-ish word beyond the pronoun ("my cat, Mike" is not enough).
    if words.len() < 3 {
        return None;
    }
    Some(s.to_owned())
}

/// Single-valued things (English nouns after "my"/"our").
const EN_SINGLE: &[&str] = &[
    "name",
    "birthday",
    "anniversary",
    "address",
    "hometown",
    "job",
    "employer",
    "car",
    "router",
    "nas",
    "gpu",
    "graphics card",
    "desktop",
    "laptop",
    "computer",
    "pc",
    "server",
    "phone",
    "editor",
    "os",
    "distro",
    "isp",
    "internet",
    "monitor",
    "keyboard",
    "blood type",
    "timezone",
    "time zone",
    "email",
    "favorite",
    "favourite",
];

pub(super) fn en_subject(fact: &str) -> Option<String> {
    let l = fact.to_ascii_lowercase().replace('’', "'");
    // "replaced my router with …", "upgraded my GPU to …", "switched my editor to …".
    for verb in [
        "replaced my ",
        "upgraded my ",
        "swapped my ",
        "changed my ",
        "switched my ",
    ] {
        if let Some(at) = l.find(verb) {
            let rest = &l[at + verb.len()..];
            let noun = rest
                .split([' ', ','])
                .take_while(|w| !matches!(*w, "with" | "to" | "for" | "from" | "out"))
                .collect::<Vec<_>>()
                .join(" ");
            return en_single(&noun);
        }
    }
    // "my cat's name is …", "my cat is called …", "my favorite food is …".
    let owner = ["my ", "our "]
        .iter()
        .filter_map(|o| l.find(o).map(|at| at + o.len()))
        .min()?;
    let rest = &l[owner..];
    let mut noun = String::new();
    for (verb, suffix) in [
        ("'s name is", " name"),
        (" is called", " name"),
        (" is named", " name"),
        ("'s called", " name"),
        (" name is", " name"),
        (" is", ""),
        (" are", ""),
        (" was", ""),
    ] {
        if let Some(at) = rest.find(verb) {
            let base = rest[..at].trim().trim_end_matches("'s");
            noun = format!("{base}{suffix}");
            break;
        }
    }
    if noun.split_whitespace().count() > 4 {
        return None;
    }
    en_single(&noun)
}

fn en_single(noun: &str) -> Option<String> {
    let noun = noun.trim();
    let words: Vec<&str> = noun.split_whitespace().collect();
    let single = EN_SINGLE
        .iter()
        .any(|s| noun.ends_with(s) || words.first().is_some_and(|w| w == s));
    (single && !noun.is_empty()).then(|| noun.to_owned())
}
