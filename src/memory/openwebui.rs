//! Open WebUI's own memory, as it reaches Coordinator: when its memory feature is on, Open
//! WebUI puts the person's memories into the system prompt before it sends the chat, in
//! one of two shapes:
//!
//! - 0.6.x: `User Context:` then numbered lines `1. [2025-01-02] I live in Kashiwa`;
//! - 0.12.x: a `<memory_context>` … `</memory_context>` block of sections (`[User Memory]`,
//!   `[Relevant Context]`, …) with lines `- content` or `- path: content`.
//!
//! Coordinator never injects a memory that Open WebUI already put there
//! (`[memory] openwebui_memory = "merge"`), or leaves such turns to Open WebUI altogether
//! (`"defer"`). Open WebUI's background `memory_review` task is an internal task: it is
//! never remembered and recalls nothing.

use super::facts::fact_key;

const BLOCK_OPEN: &str = "<memory_context>";
const BLOCK_CLOSE: &str = "</memory_context>";
const LEGACY_HEADER: &str = "User Context:";

/// The memories Open WebUI carried in `system` (its texts, in order), or `None` when the
/// system prompt holds none.
pub fn carried(system: &[String]) -> Option<Vec<String>> {
    let mut found = None::<Vec<String>>;
    for text in system {
        if let Some(start) = text.find(BLOCK_OPEN) {
            let body = &text[start + BLOCK_OPEN.len()..];
            let body = body.find(BLOCK_CLOSE).map_or(body, |end| &body[..end]);
            let lines = body
                .lines()
                .filter_map(|l| l.trim().strip_prefix("- "))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned);
            found.get_or_insert_with(Vec::new).extend(lines);
        }
        if let Some(start) = text.find(LEGACY_HEADER) {
            let lines = text[start + LEGACY_HEADER.len()..]
                .lines()
                .map(str::trim)
                .skip_while(|l| l.is_empty())
                .map_while(legacy_line)
                .map(str::to_owned);
            found.get_or_insert_with(Vec::new).extend(lines);
        }
    }
    found
}

/// `12. [2025-01-02] text` → `text`.
fn legacy_line(line: &str) -> Option<&str> {
    let (number, rest) = line.split_once(". ")?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('[') {
        Some(dated) => dated.split_once(']')?.1,
        None => rest,
    };
    Some(rest.trim())
}

/// Whether one of Open WebUI's memories already says what `text` says: one holds the
/// other, compared on letters and digits only. For an exchange item only its prompt
/// counts.
pub fn already_said(carried: &[String], text: &str) -> bool {
    let prompt = text.split_once('\n').map_or(text, |(p, _)| p);
    let mine = fact_key(prompt);
    if mine.is_empty() {
        return false;
    }
    carried.iter().any(|theirs| {
        // A memory saved under a path ("pets/cat: …") is compared by its content.
        let theirs = fact_key(theirs);
        !theirs.is_empty() && (theirs.contains(&mine) || mine.contains(&theirs))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_are_read() {
        let legacy = "You are helpful.\nUser Context:\n1. [2025-01-02] I live in Kashiwa\n2. [2025-02-03] My cat is called Mike\n\nBe brief.".to_owned();
        assert_eq!(
            carried(&[legacy]).unwrap(),
            ["I live in Kashiwa", "My cat is called Mike"]
        );
        let block = "Be kind.\n<memory_context>\n[User Memory]\n- 私の猫の名前はミケです\n- pets/dog: うちの犬はポチ\n\n[Relevant Context]\n- NAS is a DS920+\n</memory_context>".to_owned();
        assert_eq!(
            carried(&[block]).unwrap(),
            [
                "私の猫の名前はミケです",
                "pets/dog: うちの犬はポチ",
                "NAS is a DS920+"
            ]
        );
        assert_eq!(carried(&["You are a helpful assistant.".to_owned()]), None);
        assert_eq!(carried(&[]), None);
    }

    #[test]
    fn a_memory_open_webui_carries_is_already_said() {
        let theirs = vec![
            "私の猫の名前はミケです".to_owned(),
            "pets/dog: My dog is called Max.".to_owned(),
        ];
        assert!(already_said(&theirs, "私の猫の名前はミケです"));
        assert!(already_said(&theirs, "my dog is called max"));
        assert!(already_said(
            &theirs,
            "私の猫の名前はミケです。覚えておいてね\nかわいい名前ですね"
        ));
        assert!(!already_said(&theirs, "I live in Osaka"));
        assert!(!already_said(&theirs, "..."));
    }
}
