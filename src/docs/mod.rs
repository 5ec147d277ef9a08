//! The RAG lane's documents: the household's Markdown and text files, chunked along
//! their headings, indexed for full-text and vector search, and retrieved by fusing both.
//!
//! Position in the request flow: nothing here runs for an ordinary chat. `coordinator
//! docs ingest` (and `POST /docs`) fill the store through [`ingest`]; a worker that takes a
//! job from `tasks:rag` asks [`retrieve::Retriever`] for the chunks that answer it.
//!
//! - [`chunk`]: Markdown-aware chunking (heading path, fenced code, tables and list items
//!   kept whole, front matter as metadata).
//! - [`terms`]: the full-text terms (words, and character bigrams for Japanese).
//! - [`store`]: documents and chunks in the task store's database (SQLite FTS5).
//! - [`ingest`]: files to chunks, idempotent by content hash.
//! - [`retrieve`]: full-text and vector ranks fused by reciprocal rank fusion.

pub mod chunk;
pub mod cli;
pub mod config;
pub mod eval;
pub mod ingest;
pub mod lane;
pub mod retrieve;
pub mod store;
pub mod terms;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use config::DocsConfig;

/// A named set of documents (`notes`, `manuals`): the model `rag:<collection>` searches
/// only it; `rag` searches every collection.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Collection(String);

impl Collection {
    /// The most characters a collection name may have.
    pub const MAX_LEN: usize = 64;

    /// A lowercase ASCII letter or digit first, then letters, digits, `-` and `_`.
    pub fn parse(s: &str) -> Result<Self, DocsError> {
        let bad = |why: &str| DocsError::BadCollection {
            name: s.to_owned(),
            why: why.to_owned(),
        };
        if s.is_empty() {
            return Err(bad("it is empty"));
        }
        if s.len() > Self::MAX_LEN {
            return Err(bad("it is longer than 64 characters"));
        }
        let mut chars = s.chars();
        if !chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return Err(bad("it must start with a lowercase letter or a digit"));
        }
        if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_') {
            return Err(bad(
                "only lowercase letters, digits, '-' and '_' are allowed",
            ));
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Collection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Collection {
    type Error = DocsError;

    fn try_from(s: String) -> Result<Self, DocsError> {
        Self::parse(&s)
    }
}

impl From<Collection> for String {
    fn from(c: Collection) -> String {
        c.0
    }
}

/// What the RAG model name asks for: every collection (`rag`) or one (`rag:<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RagModel {
    All,
    One(Collection),
}

impl RagModel {
    /// The model name of every collection.
    pub const ALL: &'static str = "rag";
    const PREFIX: &'static str = "rag:";

    /// `None` when `model` is not a RAG model name at all; an error when it starts with
    /// `rag:` but names no valid collection.
    pub fn parse(model: &str) -> Option<Result<Self, DocsError>> {
        if model == Self::ALL {
            return Some(Ok(Self::All));
        }
        let name = model.strip_prefix(Self::PREFIX)?;
        Some(Collection::parse(name).map(Self::One))
    }

    /// The collection searched, `None` for every collection.
    pub fn collection(&self) -> Option<&Collection> {
        match self {
            Self::All => None,
            Self::One(c) => Some(c),
        }
    }

    /// The model name of one collection.
    pub fn name_of(collection: &Collection) -> String {
        format!("{}{collection}", Self::PREFIX)
    }
}

impl fmt::Display for RagModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str(Self::ALL),
            Self::One(c) => write!(f, "{}{c}", Self::PREFIX),
        }
    }
}

/// Everything that can go wrong with documents.
#[derive(Debug, thiserror::Error)]
pub enum DocsError {
    #[error("{name:?} is not a collection name: {why}")]
    BadCollection { name: String, why: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not UTF-8 text")]
    NotText { path: String },
    #[error("{path}: only Markdown (.md, .markdown) and plain text (.txt, .text) are ingested")]
    UnsupportedKind { path: String },
    #[error("{field}: {why}")]
    BadUpload { field: &'static str, why: String },
    #[error("{path} does not exist")]
    Missing { path: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl From<sqlx::Error> for DocsError {
    fn from(e: sqlx::Error) -> Self {
        Self::Store(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names() {
        for ok in ["notes", "a", "0", "home-lab_2", &"x".repeat(64)] {
            assert_eq!(Collection::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "Notes",
            "-x",
            "_x",
            "a b",
            "a/b",
            "ノート",
            &"x".repeat(65),
        ] {
            assert!(Collection::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rag_model_names() {
        assert_eq!(RagModel::parse("rag").unwrap().unwrap(), RagModel::All);
        let one = RagModel::parse("rag:notes").unwrap().unwrap();
        assert_eq!(one.collection().unwrap().as_str(), "notes");
        assert_eq!(one.to_string(), "rag:notes");
        assert!(RagModel::parse("rag:Bad Name").unwrap().is_err());
        assert!(RagModel::parse("rag:").unwrap().is_err());
        assert!(RagModel::parse("ragtime").is_none());
        assert!(RagModel::parse("qwen2.5:7b").is_none());
    }
}
