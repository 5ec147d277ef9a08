//! The memory context as the worker sees it: a short header in the prompt's language,
//! then one line per memory, capped in length. It goes between the history and the
//! user's original prompt, and only into what the worker receives.

use super::MemoryHit;
use crate::web::Lang;

/// The header before the memories.
fn header(lang: Lang) -> &'static str {
    match lang {
        Lang::Ja => "関連する過去の会話の記憶:",
        Lang::En => "Relevant memories from earlier conversations:",
    }
}

/// Formats `hits` (best first) within `max_chars` characters; `None` when none fits.
pub fn context_block(hits: &[MemoryHit], lang: Lang, max_chars: usize) -> Option<String> {
    let mut out = header(lang).to_owned();
    let mut used = out.chars().count();
    let mut lines = 0;
    for hit in hits {
        // An exchange item is "prompt\nanswer": shown as "prompt → answer".
        let text = hit.item.text.replacen('\n', " → ", 1);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            continue;
        }
        let room = max_chars.saturating_sub(used + 3);
        if room < 10 {
            break;
        }
        let line = match text.char_indices().nth(room) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        };
        used += line.chars().count() + 3;
        out.push_str("\n- ");
        out.push_str(&line);
        lines += 1;
    }
    (lines > 0).then_some(out)
}
