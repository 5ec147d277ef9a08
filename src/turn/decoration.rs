//! The routing header and footer Coordinator can add to answers (`[server] routing_info`),
//! and their removal when those answers come back as history.
//!
//! In the request flow this sits at both ends: the front doors wrap the worker's answer
//! with [`Decoration::header`] / [`Decoration::footer`] (before the first token and after
//! the last when streaming), and [`crate::turn::build_turn`] calls [`clean_for_history`] on
//! every earlier assistant message.
//!
//! The format is chosen so that [`strip`] is exact: `strip(&d.apply(x)) == x` for every
//! text `x`. Values are sanitised so they hold no line break, no `*` and no ` / `, which
//! makes the header line-structured and the footer's fields splittable. The two modes use
//! different footers (footer-only names the queue as well, because there is no header),
//! so a footer-only answer whose own text happens to start like a header is never
//! mistaken for a header-and-footer answer.

use crate::config::RoutingInfo;

const HEADER_TITLE: &str = "📡 ルーティング情報\n";
const HEADER_LABELS: [&str; 4] = ["- ドメイン: ", "- モデル: ", "- Worker: ", "- キュー: "];
/// The header's optional last line: why the answer waited (see [`RouteInfo::wait`]).
const WAIT_LABEL: &str = "- ⏳ ";
const FOOTER_MARKER: &str = "\n\n---\n*domain: ";
const SEPARATOR: &str = " / ";
/// Shown for a value that is empty after sanitising.
const EMPTY_VALUE: &str = "-";

/// Where a task went, as shown to the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteInfo {
    pub domain: String,
    pub model: String,
    pub worker: String,
    pub queue: String,
    /// Why the answer waited (queued behind others, its model loading), in the prompt's
    /// language; empty when it did not. Shown in the header, so only with `header_footer`.
    pub wait: String,
}

/// The header and footer for one answer, built once and reused for every chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decoration {
    header: String,
    footer: String,
}

impl Decoration {
    /// The decoration `mode` asks for; both parts are empty when it is `off`.
    pub fn new(info: &RouteInfo, mode: RoutingInfo) -> Self {
        let domain = sanitise(&info.domain);
        let model = sanitise(&info.model);
        let worker = sanitise(&info.worker);
        let queue = sanitise(&info.queue);
        let short_footer =
            || format!("{FOOTER_MARKER}{domain} / model: {model} / worker: {worker}*");
        match mode {
            RoutingInfo::Off => Self::default(),
            RoutingInfo::Footer => Self {
                header: String::new(),
                footer: format!(
                    "{FOOTER_MARKER}{domain} / model: {model} / worker: {worker} / queue: {queue}*"
                ),
            },
            RoutingInfo::HeaderFooter => Self {
                header: format!(
                    "{HEADER_TITLE}{}{domain}\n{}{model}\n{}{worker}\n{}{queue}\n{}\n",
                    HEADER_LABELS[0],
                    HEADER_LABELS[1],
                    HEADER_LABELS[2],
                    HEADER_LABELS[3],
                    wait_line(&info.wait),
                ),
                footer: short_footer(),
            },
        }
    }

    /// Text to send before the first token; empty when there is none.
    pub fn header(&self) -> &str {
        &self.header
    }

    /// Text to send after the last token; empty when there is none.
    pub fn footer(&self) -> &str {
        &self.footer
    }

    pub fn is_empty(&self) -> bool {
        self.header.is_empty() && self.footer.is_empty()
    }

    /// A whole (non-streamed) answer with its header and footer.
    pub fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(self.header.len() + text.len() + self.footer.len());
        out.push_str(&self.header);
        out.push_str(text);
        out.push_str(&self.footer);
        out
    }
}

/// The header's wait line, or nothing when the answer did not wait.
fn wait_line(wait: &str) -> String {
    if wait.trim().is_empty() {
        String::new()
    } else {
        format!("{WAIT_LABEL}{}\n", sanitise(wait))
    }
}

/// `text` with the given decoration; shorthand for [`Decoration::new`] + [`Decoration::apply`].
pub fn decorate(text: &str, info: &RouteInfo, mode: RoutingInfo) -> String {
    Decoration::new(info, mode).apply(text)
}

/// A value that cannot break the header's lines or the footer's fields: whitespace runs
/// become one space, `*` is dropped, spaces next to `/` are dropped (so ` / ` never
/// appears), and an empty result becomes `-`.
pub fn sanitise(value: &str) -> String {
    let cleaned: String = value
        .chars()
        .filter(|&c| c != '*')
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out = String::with_capacity(cleaned.len());
    let words: Vec<&str> = cleaned.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        let joins_slash = out.ends_with('/') || word.starts_with('/');
        if i > 0 && !joins_slash {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        EMPTY_VALUE.to_owned()
    } else {
        out
    }
}

/// Which footer a text ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Footer {
    /// Header-and-footer mode: domain, model, worker.
    Short,
    /// Footer-only mode: domain, model, worker, queue.
    Long,
}

/// Splits off a footer at the very end of `text`, matched structurally: the fields are
/// found by their labels, and no value may hold a line break, `*` or ` / `.
fn split_footer(text: &str) -> Option<(&str, Footer)> {
    let start = text.rfind(FOOTER_MARKER)?;
    let inner = text[start + FOOTER_MARKER.len()..].strip_suffix('*')?;
    if inner.contains(['\n', '*']) {
        return None;
    }
    let (domain, rest) = inner.split_once(" / model: ")?;
    let (model, rest) = rest.split_once(" / worker: ")?;
    let (worker, queue, kind) = match rest.split_once(" / queue: ") {
        Some((worker, queue)) => (worker, queue, Footer::Long),
        None => (rest, EMPTY_VALUE, Footer::Short),
    };
    let valid = |v: &str| !v.is_empty() && !v.contains(SEPARATOR);
    [domain, model, worker, queue]
        .into_iter()
        .all(valid)
        .then_some((&text[..start], kind))
}

/// Splits off a header at the very start of `text`, matched structurally.
fn split_header(text: &str) -> Option<&str> {
    let mut rest = text.strip_prefix(HEADER_TITLE)?;
    for label in HEADER_LABELS {
        rest = rest.strip_prefix(label)?;
        let end = rest.find('\n')?;
        rest = &rest[end + 1..];
    }
    if let Some(wait) = rest.strip_prefix(WAIT_LABEL) {
        rest = &wait[wait.find('\n')? + 1..];
    }
    rest.strip_prefix('\n')
}

/// Removes exactly what [`Decoration`] added: one footer at the very end and, when that
/// footer is the header-and-footer kind, one header at the very start. Text without a
/// footer of ours comes back unchanged.
pub fn strip(text: &str) -> &str {
    match split_footer(text) {
        Some((body, Footer::Short)) => split_header(body).unwrap_or(body),
        Some((body, Footer::Long)) => body,
        None => text,
    }
}

/// The legacy pipe's progress line; everything up to and including it was decoration.
const LEGACY_PROGRESS: [&str; 2] = ["⏳ 処理中...", "⏳ 処理中…"];
const LEGACY_FOOTERS: [&str; 3] = ["\n\n---\n*domain:", "\n---\n*domain:", "---\n*domain:"];
const LEGACY_LINE_PREFIXES: [&str; 6] = ["📡", "- ドメイン:", "🌙", "✅ ", "⚠️", "❌"];

/// Whether `text` shows signs of the Python pipe's decorations.
fn looks_legacy(text: &str) -> bool {
    text.trim_start().starts_with('📡')
        || LEGACY_PROGRESS.iter().any(|p| text.contains(p))
        || text.contains("---\n*domain:")
}

/// Best-effort removal of the Python pipe's decorations (the seed's `_clean_assistant`):
/// cut at the first `---\n*domain:` footer, drop everything up to the last
/// "⏳ 処理中...", drop lines that start with a decoration emoji or `- ドメイン:`, trim.
/// Lossy by design; only for history.
pub fn strip_legacy(text: &str) -> String {
    let mut t = text;
    if let Some(i) = LEGACY_FOOTERS.iter().find_map(|m| t.find(m)) {
        t = &t[..i];
    }
    if let Some((pos, len)) = LEGACY_PROGRESS
        .iter()
        .filter_map(|p| t.rfind(p).map(|i| (i, p.len())))
        .max()
    {
        t = &t[pos + len..];
    }
    t.lines()
        .filter(|l| !LEGACY_LINE_PREFIXES.iter().any(|p| l.trim().starts_with(p)))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

/// An earlier assistant message made fit for history: our exact decoration removed, a
/// header left alone by a stream cut short removed, and the legacy pipe's decorations
/// removed best-effort when the text shows any.
pub fn clean_for_history(text: &str) -> String {
    let exact = strip(text.trim_end());
    let exact = split_header(exact).unwrap_or(exact);
    if looks_legacy(exact) {
        strip_legacy(exact)
    } else {
        exact.to_owned()
    }
}

#[cfg(test)]
#[path = "decoration_tests.rs"]
mod tests;
