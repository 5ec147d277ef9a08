//! Follow-up resolution by rules: finds a demonstrative or pronoun in the prompt (この市,
//! その町, そこ, 彼, it, there, that city) and replaces it with the most recent matching
//! entity from the thread's history (千葉県柏市, Kyoto), so that "この市の特産物をおしえて"
//! becomes a standalone search.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::chat::{ChatMessage, Role};

/// Japanese demonstratives that take a noun after them.
const JA_DEMONSTRATIVES: [&str; 5] = ["この", "その", "あの", "同", "当"];
/// Nouns after この/その/あの that do not point at an entity (その後 = afterwards).
const JA_NOT_ENTITY_NOUNS: [&str; 14] = [
    "後", "前", "他", "時", "際", "場合", "通り", "結果", "上", "中", "点", "日", "頃", "次",
];
/// Standalone Japanese pronouns.
const JA_PRONOUNS: [&str; 5] = ["あそこ", "そこ", "彼女", "彼ら", "彼"];
/// Place suffixes, most specific first when a kanji run holds several units.
const PLACE_SUFFIXES: [char; 7] = ['市', '町', '村', '区', '県', '都', '府'];
/// Kanji-run prefixes that are time words, not part of a place name.
const TIME_WORDS: [&str; 14] = [
    "今日", "明日", "昨日", "本日", "今週", "来週", "先週", "今月", "来月", "今年", "去年", "来年",
    "現在", "最新",
];
/// English pronouns and phrases, longest first; all are replaced by the entity.
const EN_ANAPHORA: [&str; 16] = [
    "that city",
    "this city",
    "the city",
    "that town",
    "this town",
    "that place",
    "this place",
    "that country",
    "its",
    "their",
    "his",
    "her",
    "it",
    "there",
    "they",
    "them",
];
/// [`EN_ANAPHORA`]'s searchers, built once: building one per phrase for every turn cost
/// more than the searches.
static EN_ANAPHORA_FINDERS: LazyLock<[Finder<'static>; 16]> =
    LazyLock::new(|| EN_ANAPHORA.map(Finder::new));
/// Capitalised words that start sentences rather than name things.
const EN_NOT_NAMES: [&str; 40] = [
    "What",
    "Who",
    "Where",
    "When",
    "Why",
    "How",
    "Which",
    "Tell",
    "Please",
    "Can",
    "Could",
    "Would",
    "Is",
    "Are",
    "Was",
    "Do",
    "Does",
    "Did",
    "The",
    "A",
    "An",
    "I",
    "It",
    "In",
    "On",
    "Of",
    "And",
    "My",
    "Today",
    "Tomorrow",
    "Yesterday",
    "Give",
    "Show",
    "Find",
    "Search",
    "This",
    "That",
    "There",
    "Hi",
    "Hello",
];

/// What kind of entity a reference wants: a place with a given suffix, or anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wants {
    Suffix(char),
    Any,
}

/// The prompt with its first reference replaced, and the entity used; `None` when the
/// prompt has no reference or the history has no matching entity.
pub fn resolve(prompt: &str, history: &[ChatMessage]) -> Option<(String, String)> {
    resolve_by(prompt, |wants| recent_entity(history, wants))
}

/// [`resolve`] with the history built only for a prompt that has a reference (most
/// prompts have none).
pub fn resolve_with(
    prompt: &str,
    history: impl FnOnce() -> Vec<ChatMessage>,
) -> Option<(String, String)> {
    resolve_by(prompt, |wants| recent_entity(&history(), wants))
}

fn resolve_by(
    prompt: &str,
    entity: impl FnOnce(Wants) -> Option<String>,
) -> Option<(String, String)> {
    // Japanese references are never ASCII.
    let (start, end, wants) = (!prompt.is_ascii())
        .then(|| find_japanese_reference(prompt))
        .flatten()
        .or_else(|| find_english_reference(prompt))?;
    let entity = entity(wants)?;
    let replaced = format!("{} {} {}", &prompt[..start], entity, &prompt[end..]);
    Some((replaced, entity))
}

/// The most recent entity in the history, user messages first (newest to oldest), then
/// the assistant's. Within a message the first entity wins (the topic usually comes first).
fn recent_entity(history: &[ChatMessage], wants: Wants) -> Option<String> {
    let by_role = |role: Role| {
        history
            .iter()
            .rev()
            .filter(move |m| m.role == role)
            .find_map(|m| entities(&m.content).into_iter().find(|e| matches(e, wants)))
    };
    by_role(Role::User).or_else(|| by_role(Role::Assistant))
}

/// Any entity, for elliptical follow-ups ("人口は？").
pub fn any_recent_entity(history: &[ChatMessage]) -> Option<String> {
    recent_entity(history, Wants::Any)
}

/// Whether `text` itself names an entity.
pub fn has_entity(text: &str) -> bool {
    !entities(text).is_empty()
}

fn matches(entity: &str, wants: Wants) -> bool {
    match wants {
        Wants::Any => true,
        Wants::Suffix(c) => entity.ends_with(c),
    }
}

fn is_kanji(c: char) -> bool {
    matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '々' | 'ヶ')
}

fn is_katakana(c: char) -> bool {
    matches!(c, '\u{30A1}'..='\u{30FA}' | 'ー')
}

fn find_japanese_reference(text: &str) -> Option<(usize, usize, Wants)> {
    for d in JA_DEMONSTRATIVES {
        for (i, _) in text.match_indices(d) {
            // `そこの` holds `この`; `共同市場` holds `同市`: those are not demonstratives.
            let prev = text[..i].chars().next_back();
            let glued = match d {
                "同" | "当" => prev.is_some_and(is_kanji),
                _ => prev.is_some_and(|p| matches!(p, 'そ' | 'あ' | 'ど')),
            };
            if glued {
                continue;
            }
            let after = i + d.len();
            let noun: String = text[after..]
                .chars()
                .take_while(|&c| is_kanji(c) || is_katakana(c))
                .collect();
            if noun.is_empty() || JA_NOT_ENTITY_NOUNS.iter().any(|n| noun.starts_with(n)) {
                continue;
            }
            let first = noun.chars().next()?;
            if (d == "同" || d == "当") && !PLACE_SUFFIXES.contains(&first) {
                continue;
            }
            let wants = if PLACE_SUFFIXES.contains(&first) && noun.chars().count() == 1 {
                Wants::Suffix(first)
            } else {
                Wants::Any
            };
            return Some((i, after + noun.len(), wants));
        }
    }
    JA_PRONOUNS
        .iter()
        .find_map(|p| text.find(p).map(|i| (i, i + p.len(), Wants::Any)))
}

fn find_english_reference(text: &str) -> Option<(usize, usize, Wants)> {
    let lower = text.to_lowercase();
    if lower.len() != text.len() {
        return None;
    }
    EN_ANAPHORA_FINDERS.iter().find_map(|phrase| {
        phrase.find_iter(lower.as_bytes()).find_map(|i| {
            let end = i + phrase.needle().len();
            let before_ok = lower[..i]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric());
            let after_ok = lower[end..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric() && c != '\'');
            (before_ok && after_ok).then_some((i, end, Wants::Any))
        })
    })
}

/// Entities named in `text`, in order: Japanese place names (and their prefecture and
/// city units), katakana names, capitalised English names.
fn entities(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let class = |c: char| {
            if is_kanji(c) {
                1
            } else if is_katakana(c) {
                2
            } else {
                0
            }
        };
        let k = class(c);
        if k == 0 {
            i += 1;
            continue;
        }
        let run: String = chars[i..].iter().take_while(|&&c| class(c) == k).collect();
        i += run.chars().count();
        if k == 1 {
            found.extend(place_units(&run));
        } else if run.chars().count() >= 2 {
            found.push(run);
        }
    }
    found.extend(english_names(text));
    found
}

/// `千葉県柏市` → `千葉県柏市`, `千葉県`, `柏市`; `今日東京都` → `東京都`; non-places → nothing.
fn place_units(run: &str) -> Vec<String> {
    let mut run = run;
    for t in TIME_WORDS {
        if let Some(rest) = run.strip_prefix(t) {
            run = rest;
        }
    }
    let ends_as_place = run
        .chars()
        .next_back()
        .is_some_and(|c| PLACE_SUFFIXES.contains(&c));
    if run.chars().count() < 2 || !ends_as_place {
        return Vec::new();
    }
    let mut units = vec![run.to_owned()];
    let split = ["東京都", "北海道"]
        .iter()
        .find(|p| run.starts_with(*p))
        .map(|p| p.len())
        .or_else(|| {
            run.char_indices()
                .find(|(_, c)| matches!(c, '県' | '府'))
                .map(|(i, c)| i + c.len_utf8())
        });
    if let Some(at) = split {
        let (pref, rest) = run.split_at(at);
        if rest.chars().count() >= 2 {
            units.push(pref.to_owned());
            units.push(rest.to_owned());
        }
    }
    units
}

/// Runs of capitalised words (`New York City`), without sentence-starter words.
fn english_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for raw in text.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let word = word.strip_suffix("'s").unwrap_or(word);
        let capitalised = word.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        if capitalised && !(current.is_empty() && EN_NOT_NAMES.contains(&word)) {
            current.push(word);
        } else if !current.is_empty() {
            names.push(current.join(" "));
            current.clear();
        }
        let ends_phrase = raw.ends_with([',', '.', '?', '!', ';', ':']);
        if ends_phrase && !current.is_empty() {
            names.push(current.join(" "));
            current.clear();
        }
    }
    if !current.is_empty() {
        names.push(current.join(" "));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_history() -> Vec<ChatMessage> {
        vec![
            ChatMessage::user("今日の千葉県柏市の天気を教えて"),
            ChatMessage::assistant("柏市は晴れ時々曇、最高31℃の見込みです。松戸市も同様です。"),
        ]
    }

    #[test]
    fn the_seed_follow_up_resolves_to_kashiwa() {
        let (text, entity) = resolve("この市の特産物をおしえて", &seed_history()).unwrap();
        assert_eq!(entity, "千葉県柏市");
        assert!(text.contains("柏市") && text.contains("特産物"), "{text}");
        assert!(!text.contains("この"));
    }

    #[test]
    fn the_wanted_suffix_picks_the_unit() {
        let (_, entity) = resolve("この県の県庁所在地は？", &seed_history()).unwrap();
        assert_eq!(entity, "千葉県");
        let (_, entity) = resolve("そこの人口は？", &seed_history()).unwrap();
        assert_eq!(entity, "千葉県柏市");
    }

    #[test]
    fn non_references_are_left_alone() {
        assert_eq!(resolve("その後の天気は？", &seed_history()), None);
        assert_eq!(resolve("柏市の特産物をおしえて", &seed_history()), None);
        assert_eq!(resolve("What is Rust?", &seed_history()), None);
        assert_eq!(resolve("この市の特産物は？", &[]), None);
    }

    #[test]
    fn english_pronouns_take_the_capitalised_name() {
        let history = vec![
            ChatMessage::user("Tell me about Kyoto."),
            ChatMessage::assistant("Kyoto was the capital of Japan for over a thousand years."),
        ];
        let (text, entity) = resolve("What about its population?", &history).unwrap();
        assert_eq!(entity, "Kyoto");
        assert_eq!(
            text.split_whitespace().collect::<Vec<_>>(),
            ["What", "about", "Kyoto", "population?"]
        );
        assert!(resolve("Is Python fast? Tell me about itertools", &history).is_none());
    }

    #[test]
    fn entities_are_found_in_order() {
        assert_eq!(entities("今日東京都の天気"), ["東京都"]);
        assert_eq!(
            entities("京都府京都市とニューヨーク"),
            ["京都府京都市", "京都府", "京都市", "ニューヨーク"]
        );
        assert_eq!(
            entities("What is the weather in New York City today?"),
            ["New York City"]
        );
        assert!(entities("天気を教えて").is_empty());
    }
}
