//! The memory context as the worker sees it: a short header in the prompt's language,
//! then one line per memory, capped in length. It goes between the history and the
//! user's original prompt, and only into what the worker receives.

use super::MemoryHit;
use crate::lang::Lang;

/// The header before the memories.
fn header(lang: Lang) -> &'static str {
    match lang {
        Lang::Ja => "関連する過去の会話の記憶:",
        Lang::En => "Relevant memories from earlier conversations:",
    }
}

/// Formats `hits` (best first) within `max_chars` characters; `None` when none fits.
///
/// Each memory is one line: an exchange item ("prompt\nanswer") reads "prompt → answer",
/// every run of whitespace is one space, and a line longer than the room left is cut
/// with "…". Written word by word, with no copies on the way.
pub fn context_block(hits: &[MemoryHit], lang: Lang, max_chars: usize) -> Option<String> {
    let header = header(lang);
    let text_bytes: usize = hits.iter().map(|h| h.item.text.len() + 8).sum();
    let mut out = String::with_capacity(header.len() + text_bytes.min(4 * max_chars));
    out.push_str(header);
    let mut used = header.chars().count();
    let mut lines = 0;
    for hit in hits {
        let mut words = words(&hit.item.text).peekable();
        if words.peek().is_none() {
            continue;
        }
        let room = max_chars.saturating_sub(used + 3);
        if room < 10 {
            break;
        }
        out.push_str("\n- ");
        let mut written = 0;
        let mut cut = false;
        for (i, word) in words.enumerate() {
            let space = usize::from(i > 0);
            let chars = word.chars().count();
            if written + space + chars <= room {
                if space == 1 {
                    out.push(' ');
                }
                out.push_str(word);
                written += space + chars;
                continue;
            }
            // The line ends inside this word (or just before it).
            let mut left = room - written;
            if space == 1 && left > 0 {
                out.push(' ');
                left -= 1;
            }
            let end = word
                .char_indices()
                .nth(left)
                .map_or(word.len(), |(at, _)| at);
            out.push_str(&word[..end]);
            written = room;
            cut = true;
            break;
        }
        if cut {
            out.push('…');
            written += 1;
        }
        used += written + 3;
        lines += 1;
    }
    (lines > 0).then_some(out)
}

/// The words of a memory's text as shown: its first newline (between an exchange's
/// prompt and answer) as the word "→".
fn words(text: &str) -> impl Iterator<Item = &str> {
    let (prompt, answer) = match text.split_once('\n') {
        Some((prompt, answer)) => (prompt, Some(answer)),
        None => (text, None),
    };
    prompt
        .split_whitespace()
        .chain(answer.map(|_| "→"))
        .chain(answer.into_iter().flat_map(str::split_whitespace))
}
