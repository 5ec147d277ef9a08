//! Markdown-aware chunking: a document is split along its heading structure, every chunk
//! carries its heading path ("Backup › NAS › Schedule"), and a fenced code block, a table
//! or a list item is never split (it may make a chunk longer than the limit instead).
//! Front matter (`---` … `---` at the top) is kept as the document's metadata, not text.
//!
//! Used by [`super::ingest`] for every file; plain text files are chunked by paragraph.

use std::collections::BTreeMap;

/// Sizes in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkConfig {
    pub max_chars: usize,
    /// The next chunk of a section starts with the previous chunk's last block when that
    /// block is at most this long (blocks are never cut for overlap).
    pub overlap_chars: usize,
}

/// A chunked document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chunked {
    /// The front matter's `title`, else the first level-1 heading, else empty.
    pub title: String,
    /// The front matter's `key: value` pairs (lists joined with ", ").
    pub metadata: BTreeMap<String, String>,
    pub chunks: Vec<Chunk>,
}

/// One retrievable piece of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The headings above the chunk, outermost first.
    pub heading: Vec<String>,
    pub text: String,
}

/// The separator of a heading path.
pub const PATH_SEPARATOR: &str = " › ";

impl Chunk {
    pub fn heading_path(&self) -> String {
        self.heading.join(PATH_SEPARATOR)
    }
}

/// The kinds of block a section is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Heading(usize),
    /// A fenced code block, a table or a list item: never split.
    Whole,
    Paragraph,
}

#[derive(Debug, Clone)]
struct Block {
    kind: Kind,
    text: String,
}

/// Chunks a Markdown document.
pub fn chunk_markdown(source: &str, config: &ChunkConfig) -> Chunked {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let (metadata, body) = front_matter(source);
    let blocks = blocks(body);
    let title = metadata.get("title").cloned().or_else(|| {
        blocks.iter().find_map(|b| match b.kind {
            Kind::Heading(1) => Some(b.text.clone()),
            _ => None,
        })
    });
    Chunked {
        title: title.unwrap_or_default(),
        chunks: pack(&blocks, config),
        metadata,
    }
}

/// Chunks plain text: paragraphs (separated by blank lines), no headings.
pub fn chunk_plain(source: &str, config: &ChunkConfig) -> Chunked {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let blocks: Vec<Block> = source
        .split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| Block {
            kind: Kind::Paragraph,
            text: p.to_owned(),
        })
        .collect();
    Chunked {
        chunks: pack(&blocks, config),
        ..Chunked::default()
    }
}

/// The front matter's pairs and the rest of the document. A document whose first line is
/// `---` but that never closes it has no front matter.
fn front_matter(source: &str) -> (BTreeMap<String, String>, &str) {
    let mut meta = BTreeMap::new();
    let Some(rest) = source
        .strip_prefix("---\n")
        .or_else(|| source.strip_prefix("---\r\n"))
    else {
        return (meta, source);
    };
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            end = Some(offset + line.len());
            break;
        }
        offset += line.len();
    }
    let Some(end) = end else {
        return (meta, source);
    };
    let mut last_key: Option<String> = None;
    for line in rest[..offset].lines() {
        if let Some(item) = line.trim_start().strip_prefix("- ")
            && line.starts_with([' ', '-'])
            && let Some(key) = &last_key
        {
            let entry: &mut String = meta.entry(key.clone()).or_default();
            if !entry.is_empty() {
                entry.push_str(", ");
            }
            entry.push_str(unquote(item.trim()));
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || key.starts_with('#') || line.starts_with(' ') {
            continue;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .map(|list| {
                list.split(',')
                    .map(|s| unquote(s.trim()))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|| unquote(value).to_owned());
        meta.insert(key.to_owned(), value);
        last_key = Some(key.to_owned());
    }
    (meta, &rest[end..])
}

fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// The opening fence of a code block: its character and length.
fn fence_open(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let t = &line[indent..];
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|x| *x == c).count();
    // A backtick fence's info string may not contain a backtick.
    (n >= 3 && !(c == '`' && t[n..].contains('`'))).then_some((c, n))
}

fn fence_closes(line: &str, (c, n): (char, usize)) -> bool {
    let t = line.trim();
    t.chars().take_while(|x| *x == c).count() >= n && t.chars().all(|x| x == c)
}

fn heading(line: &str) -> Option<(usize, String)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let t = &line[indent..];
    let level = t.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    // A closing sequence of `#`s is not part of the heading.
    let text = rest.trim().trim_end_matches('#').trim_end();
    Some((level, text.to_owned()))
}

fn list_marker(line: &str) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return false;
    }
    let t = &line[indent..];
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    let rest = if digits > 0 && digits <= 9 {
        t[digits..].strip_prefix(['.', ')'])
    } else {
        t.strip_prefix(['-', '*', '+'])
    };
    rest.is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t'])) && !is_thematic_break(line)
}

fn is_thematic_break(line: &str) -> bool {
    let t: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    t.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|c| t.chars().all(|x| x.to_string() == *c))
}

fn table_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

fn table_delimiter(line: &str) -> bool {
    let t = line.trim();
    t.contains('-')
        && t.contains('|')
        && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

fn indented(line: &str) -> bool {
    line.starts_with("  ") || line.starts_with('\t')
}

/// Splits the body into headings, whole blocks (code, tables, list items) and paragraphs.
fn blocks(body: &str) -> Vec<Block> {
    let lines: Vec<&str> = body.lines().collect();
    let mut out = Vec::new();
    let mut para: Vec<&str> = Vec::new();
    let flush_para = |para: &mut Vec<&str>, out: &mut Vec<Block>| {
        if !para.is_empty() {
            out.push(Block {
                kind: Kind::Paragraph,
                text: para.join("\n").trim().to_owned(),
            });
            para.clear();
        }
    };
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() {
            flush_para(&mut para, &mut out);
            i += 1;
        } else if let Some(fence) = fence_open(line) {
            flush_para(&mut para, &mut out);
            let end = fence_end(&lines, i, fence);
            out.push(whole(&lines[i..end]));
            i = end;
        } else if let Some((level, text)) = heading(line) {
            flush_para(&mut para, &mut out);
            out.push(Block {
                kind: Kind::Heading(level),
                text,
            });
            i += 1;
        } else if para.len() == 1 && setext_level(line).is_some() {
            let level = setext_level(line).unwrap_or(2);
            let text = para[0].trim().to_owned();
            para.clear();
            out.push(Block {
                kind: Kind::Heading(level),
                text,
            });
            i += 1;
        } else if table_row(line)
            || (lines.get(i + 1).is_some_and(|n| table_delimiter(n)) && line.contains('|'))
        {
            flush_para(&mut para, &mut out);
            let start = i;
            while i < lines.len() && lines[i].contains('|') && !lines[i].trim().is_empty() {
                i += 1;
            }
            out.push(whole(&lines[start..i]));
        } else if list_marker(line) {
            flush_para(&mut para, &mut out);
            let end = list_item_end(&lines, i);
            out.push(whole(&lines[i..end]));
            i = end;
        } else {
            para.push(line);
            i += 1;
        }
    }
    flush_para(&mut para, &mut out);
    out
}

fn whole(lines: &[&str]) -> Block {
    Block {
        kind: Kind::Whole,
        text: lines.join("\n").trim_end().to_owned(),
    }
}

fn setext_level(line: &str) -> Option<usize> {
    let t = line.trim();
    if t.len() >= 2 && t.chars().all(|c| c == '=') {
        Some(1)
    } else if t.len() >= 2 && t.chars().all(|c| c == '-') {
        Some(2)
    } else {
        None
    }
}

/// The line after the fence that closes the block opened at `start` (or the end).
fn fence_end(lines: &[&str], start: usize, fence: (char, usize)) -> usize {
    let mut i = start + 1;
    while i < lines.len() {
        if fence_closes(lines[i], fence) {
            return i + 1;
        }
        i += 1;
    }
    lines.len()
}

/// The line after the list item that starts at `start`: its continuation lines, its
/// nested items and any fenced code inside it belong to it.
fn list_item_end(lines: &[&str], start: usize) -> usize {
    let mut i = start + 1;
    loop {
        let Some(line) = lines.get(i) else {
            return i;
        };
        if let Some(fence) = fence_open(line.trim_start()).filter(|_| indented(line)) {
            i = fence_end(lines, i, fence);
            continue;
        }
        if line.trim().is_empty() {
            // A blank line ends the item unless indented content follows.
            let next = lines[i..].iter().position(|l| !l.trim().is_empty());
            match next {
                Some(n) if indented(lines[i + n]) => i += n,
                _ => return i,
            }
            continue;
        }
        if indented(line) {
            i += 1;
            continue;
        }
        // A lazy continuation: plain text right under the item.
        if list_marker(line)
            || heading(line).is_some()
            || fence_open(line).is_some()
            || table_row(line)
        {
            return i;
        }
        i += 1;
    }
}

/// Groups the blocks into chunks: a heading starts a new section; within one, blocks are
/// packed up to the limit, and an overlong paragraph is cut at sentence ends.
fn pack(blocks: &[Block], config: &ChunkConfig) -> Vec<Chunk> {
    let mut packer = Packer {
        config: *config,
        path: Vec::new(),
        current: Vec::new(),
        chunks: Vec::new(),
    };
    for block in blocks {
        match block.kind {
            Kind::Heading(level) => {
                packer.flush(false);
                packer.path.retain(|(l, _)| *l < level);
                packer.path.push((level, block.text.clone()));
            }
            Kind::Whole => packer.add(&block.text),
            Kind::Paragraph => {
                for piece in split_paragraph(&block.text, config.max_chars) {
                    packer.add(&piece);
                }
            }
        }
    }
    packer.flush(false);
    packer.chunks
}

struct Packer {
    config: ChunkConfig,
    path: Vec<(usize, String)>,
    /// The blocks of the chunk being filled.
    current: Vec<String>,
    chunks: Vec<Chunk>,
}

impl Packer {
    fn len(&self) -> usize {
        self.current.iter().map(|b| b.chars().count() + 2).sum()
    }

    fn add(&mut self, block: &str) {
        let n = block.chars().count();
        if !self.current.is_empty() && self.len() + n > self.config.max_chars {
            self.flush(true);
            // The overlap is dropped when it and the block do not fit together.
            if self.len() + n > self.config.max_chars {
                self.current.clear();
            }
        }
        self.current.push(block.to_owned());
    }

    /// Ends the current chunk; with `overlap`, the next one starts with its last block
    /// when that is short enough.
    fn flush(&mut self, overlap: bool) {
        if self.current.is_empty() {
            return;
        }
        let blocks = std::mem::take(&mut self.current);
        let last = blocks.last().cloned();
        self.chunks.push(Chunk {
            heading: self.path.iter().map(|(_, t)| t.clone()).collect(),
            text: blocks.join("\n\n"),
        });
        if overlap
            && blocks.len() > 1
            && let Some(last) = last.filter(|b| b.chars().count() <= self.config.overlap_chars)
        {
            self.current.push(last);
        }
    }
}

/// A paragraph in pieces of at most `max` characters, cut after a sentence end when there
/// is one (`。`, `.`, `!`, `?`, `！`, `？`), else at a space, else anywhere.
fn split_paragraph(text: &str, max: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest: &str = text;
    while rest.chars().count() > max {
        let limit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let head = &rest[..limit];
        let cut = head
            .char_indices()
            .rev()
            .filter(|(_, c)| matches!(c, '。' | '.' | '!' | '?' | '！' | '？'))
            .map(|(i, c)| i + c.len_utf8())
            .find(|i| *i > limit / 3)
            .or_else(|| head.rfind(' ').filter(|i| *i > limit / 3))
            .unwrap_or(limit);
        pieces.push(rest[..cut].trim().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.trim().is_empty() {
        pieces.push(rest.trim().to_owned());
    }
    pieces
}

#[cfg(test)]
#[path = "chunk_tests.rs"]
mod tests;
