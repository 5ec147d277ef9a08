//! Files to stored chunks: Markdown and plain text, directories recursively, idempotent by
//! content hash (an unchanged file is skipped, a changed one replaced whole, and with
//! `sync` a file gone from an ingested directory is dropped).
//!
//! Used by `coordinator docs ingest` (with a progress bar) and `POST /docs`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use chrono::Utc;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::chunk::{ChunkConfig, chunk_markdown, chunk_plain};
use super::retrieve::indexed_text;
use super::store::{DocStore, NewChunk, NewDocument};
use super::terms::terms;
use super::{Collection, DocsConfig, DocsError};
use crate::memory::embed::HashEmbedder;

/// What kind of text a file holds, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Markdown,
    Plain,
}

impl Kind {
    pub fn of(name: &str) -> Option<Self> {
        let ext = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "md" | "markdown" | "mdown" => Some(Self::Markdown),
            "txt" | "text" => Some(Self::Plain),
            _ => None,
        }
    }
}

/// One text to ingest.
#[derive(Debug, Clone)]
pub struct Source {
    /// The key (a canonical path, or `upload:<name>`).
    pub path: String,
    /// What citations show.
    pub display: String,
    pub kind: Kind,
    pub content: String,
}

/// What happened to one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Added,
    Replaced,
    Unchanged,
}

/// What an ingest did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IngestReport {
    pub added: usize,
    pub replaced: usize,
    pub unchanged: usize,
    /// Documents dropped by `sync` (their files are gone).
    pub removed: usize,
    /// Chunks written (for added and replaced documents).
    pub chunks: usize,
    /// Files in a directory that were not ingested, with why (not UTF-8, unreadable).
    pub skipped: Vec<String>,
}

/// The hash that decides whether a document changed: its content and the chunking
/// settings (new sizes re-chunk every file).
pub fn content_hash(content: &str, chunking: &ChunkConfig) -> String {
    let mut h = Sha256::new();
    h.update(format!("{}:{}:", chunking.max_chars, chunking.overlap_chars).as_bytes());
    h.update(content.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Chunks, embeds and indexes a source (pure: no store).
pub fn prepare(source: &Source, collection: &Collection, config: &DocsConfig) -> NewDocument {
    let chunking = config.chunking();
    let chunked = match source.kind {
        Kind::Markdown => chunk_markdown(&source.content, &chunking),
        Kind::Plain => chunk_plain(&source.content, &chunking),
    };
    let title = if chunked.title.is_empty() {
        Path::new(&source.display)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned()
    } else {
        chunked.title.clone()
    };
    let embedder = HashEmbedder;
    let chunks = chunked
        .chunks
        .iter()
        .map(|c| {
            let heading = c.heading_path();
            let text = indexed_text(&title, &heading, &c.text);
            NewChunk {
                vector: embedder.embed(&text),
                terms: terms(&text),
                embedder: embedder.id().to_owned(),
                heading,
                text: c.text.clone(),
            }
        })
        .collect();
    NewDocument {
        collection: collection.clone(),
        path: source.path.clone(),
        display: source.display.clone(),
        title,
        metadata: chunked.metadata,
        hash: content_hash(&source.content, &chunking),
        chunks,
        ingested_at: Utc::now(),
    }
}

/// Writes `source` unless the stored document has the same hash.
pub async fn ingest_source(
    store: &dyn DocStore,
    config: &DocsConfig,
    collection: &Collection,
    source: &Source,
    known: Option<&str>,
) -> Result<(Outcome, usize), DocsError> {
    if known == Some(content_hash(&source.content, &config.chunking()).as_str()) {
        return Ok((Outcome::Unchanged, 0));
    }
    let doc = prepare(source, collection, config);
    store.put(&doc).await?;
    let outcome = if known.is_some() {
        Outcome::Replaced
    } else {
        Outcome::Added
    };
    Ok((outcome, doc.chunks.len()))
}

/// A file found under an ingested root.
struct Found {
    path: PathBuf,
    display: String,
    kind: Kind,
}

/// The files to ingest: each given file (which must be Markdown or text), and every
/// Markdown or text file under each given directory (hidden entries skipped), sorted.
/// Also returns the canonical roots, which `sync` confines itself to.
fn find(paths: &[PathBuf]) -> Result<(Vec<Found>, Vec<PathBuf>), DocsError> {
    let mut found = Vec::new();
    let mut roots = Vec::new();
    for given in paths {
        let shown = given.display().to_string();
        let root = given.canonicalize().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DocsError::Missing {
                path: shown.clone(),
            },
            _ => DocsError::Read {
                path: shown.clone(),
                source: e,
            },
        })?;
        if root.is_dir() {
            let base = root.file_name().map(PathBuf::from).unwrap_or_default();
            walk(&root, &root, &base, &mut found)?;
        } else {
            let name = root
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            let kind = Kind::of(&name).ok_or(DocsError::UnsupportedKind { path: shown })?;
            found.push(Found {
                path: root.clone(),
                display: name,
                kind,
            });
        }
        roots.push(root);
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.dedup_by(|a, b| a.path == b.path);
    Ok((found, roots))
}

fn walk(root: &Path, dir: &Path, base: &Path, out: &mut Vec<Found>) -> Result<(), DocsError> {
    let read = |e| DocsError::Read {
        path: dir.display().to_string(),
        source: e,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(read)?
        .collect::<Result<_, _>>()
        .map_err(read)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().map_err(read)?;
        if kind.is_dir() {
            walk(root, &path, base, out)?;
        } else if kind.is_file()
            && let Some(kind) = Kind::of(name)
        {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            out.push(Found {
                display: base.join(relative).display().to_string(),
                path,
                kind,
            });
        }
    }
    Ok(())
}

/// Ingests files and directories into `collection`; `progress(done, total)` after each
/// file. With `sync`, documents of the collection under the given roots whose files are
/// gone are dropped.
pub async fn ingest_paths(
    store: &dyn DocStore,
    config: &DocsConfig,
    collection: &Collection,
    paths: &[PathBuf],
    sync: bool,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<IngestReport, DocsError> {
    let (found, roots) = find(paths)?;
    let known: HashMap<String, String> = store
        .documents(Some(collection))
        .await?
        .into_iter()
        .map(|d| (d.path, d.hash))
        .collect();
    let mut report = IngestReport::default();
    let mut seen = BTreeSet::new();
    for (i, file) in found.iter().enumerate() {
        let key = file.path.display().to_string();
        seen.insert(key.clone());
        match std::fs::read(&file.path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(content) => {
                    let source = Source {
                        path: key.clone(),
                        display: file.display.clone(),
                        kind: file.kind,
                        content,
                    };
                    let (outcome, chunks) = ingest_source(
                        store,
                        config,
                        collection,
                        &source,
                        known.get(&key).map(String::as_str),
                    )
                    .await?;
                    report.chunks += chunks;
                    match outcome {
                        Outcome::Added => report.added += 1,
                        Outcome::Replaced => report.replaced += 1,
                        Outcome::Unchanged => report.unchanged += 1,
                    }
                }
                Err(_) => report.skipped.push(format!("{key}: not UTF-8 text")),
            },
            Err(e) => report.skipped.push(format!("{key}: {e}")),
        }
        progress(i + 1, found.len());
    }
    if sync {
        for path in known.keys() {
            let under = roots.iter().any(|r| Path::new(path).starts_with(r));
            if under && !seen.contains(path) {
                report.removed +=
                    usize::try_from(store.forget(collection, Some(path)).await?).unwrap_or(0);
            }
        }
    }
    Ok(report)
}

/// The key of an uploaded document (`POST /docs`).
pub fn upload_key(name: &str) -> String {
    format!("{UPLOAD_PREFIX}{name}")
}

const UPLOAD_PREFIX: &str = "upload:";

/// The most characters an uploaded file's name may have.
pub const MAX_UPLOAD_NAME_CHARS: usize = 200;

/// An uploaded file (`POST /docs`) as a source: `name` (`home/cat.md`) decides its kind by
/// its extension, is what citations show, and keys it as `upload:<name>`, so uploading the
/// same name again replaces it (or changes nothing when the text is the same).
pub fn upload_source(name: &str, content: String) -> Result<Source, DocsError> {
    let bad = |why: &str| DocsError::BadUpload {
        field: "path",
        why: why.to_owned(),
    };
    if name.trim().is_empty() {
        return Err(bad("the file name is empty"));
    }
    if name.trim() != name {
        return Err(bad("the file name starts or ends with white space"));
    }
    if name.chars().count() > MAX_UPLOAD_NAME_CHARS {
        return Err(bad("the file name is longer than 200 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(bad("the file name holds a control character"));
    }
    let kind = Kind::of(name).ok_or_else(|| DocsError::UnsupportedKind {
        path: name.to_owned(),
    })?;
    if content.trim().is_empty() {
        return Err(DocsError::BadUpload {
            field: "content",
            why: "the file is empty".to_owned(),
        });
    }
    Ok(Source {
        path: upload_key(name),
        display: name.to_owned(),
        kind,
        content,
    })
}

/// What one upload did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UploadReport {
    pub collection: Collection,
    /// The stored key (`upload:<name>`), as `GET /docs` lists it.
    pub path: String,
    pub outcome: Outcome,
    /// Chunks written (none when unchanged).
    pub chunks: usize,
}

/// Ingests one uploaded source into `collection` the way a file is ingested: skipped
/// when its stored hash is the same, replaced whole when it changed.
pub async fn ingest_upload(
    store: &dyn DocStore,
    config: &DocsConfig,
    collection: &Collection,
    source: &Source,
) -> Result<UploadReport, DocsError> {
    let known = store
        .documents(Some(collection))
        .await?
        .into_iter()
        .find(|d| d.path == source.path)
        .map(|d| d.hash);
    let (outcome, chunks) =
        ingest_source(store, config, collection, source, known.as_deref()).await?;
    Ok(UploadReport {
        collection: collection.clone(),
        path: source.path.clone(),
        outcome,
        chunks,
    })
}

/// The stored key a client names a document by: the key itself as listed (a canonical
/// path or `upload:<name>`), or an uploaded file's bare name.
pub fn resolve_key<'a>(listed: impl IntoIterator<Item = &'a str>, given: &str) -> Option<String> {
    let upload = upload_key(given);
    let mut by_upload = None;
    for key in listed {
        if key == given {
            return Some(key.to_owned());
        }
        if key == upload {
            by_upload = Some(upload.clone());
        }
    }
    by_upload
}

/// The key a command-line `FILE` has in the store (its canonical path), or the name as
/// given when the file no longer exists (so a deleted file can still be forgotten).
pub fn file_key(file: &Path) -> String {
    file.canonicalize()
        .unwrap_or_else(|_| std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()))
        .display()
        .to_string()
}

#[cfg(test)]
#[path = "ingest_tests.rs"]
mod tests;
