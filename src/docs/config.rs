//! `[docs]` in the config: chunk sizes and overlap, how many chunks an answer cites, and
//! the minimum similarity below which a document is not taken as an answer.

use serde::{Deserialize, Serialize};

use super::chunk::ChunkConfig;

/// The `[docs]` section. Every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DocsConfig {
    /// The collection `docs ingest` and `POST /docs` use when none is named.
    pub default_collection: String,
    /// The largest chunk, in characters. A fenced code block, a table or a list item
    /// longer than this stays one chunk (they are never split).
    pub chunk_max_chars: usize,
    /// How much of the end of one chunk the next one repeats (whole blocks only).
    pub chunk_overlap_chars: usize,
    /// How many chunks go into the answer's prompt and its sources.
    pub top_k: usize,
    /// The lowest cosine similarity (built-in embedder) a chunk needs to be relevant,
    /// when it also holds half of the question's words (half of it suffices for a chunk
    /// that holds three quarters of them; see `docs::retrieve`); calibrated on
    /// `eval/rag.jsonl` (docs/BENCHMARKS.md).
    pub min_score: f32,
    /// The model that answers from the documents; `[routing] default_model`, else the
    /// model of whichever worker takes the job, when absent.
    pub model: Option<String>,
}

impl Default for DocsConfig {
    fn default() -> Self {
        Self {
            default_collection: "default".to_owned(),
            chunk_max_chars: 1200,
            chunk_overlap_chars: 200,
            top_k: 5,
            min_score: 0.18,
            model: None,
        }
    }
}

impl DocsConfig {
    pub fn chunking(&self) -> ChunkConfig {
        ChunkConfig {
            max_chars: self.chunk_max_chars,
            overlap_chars: self.chunk_overlap_chars,
        }
    }

    /// Every problem in the section, each prefixed with its key.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(e) = super::Collection::parse(&self.default_collection) {
            problems.push(format!("docs.default_collection: {e}"));
        }
        if self.chunk_max_chars < 100 {
            problems.push("docs.chunk_max_chars: must be at least 100".to_owned());
        }
        if self.chunk_overlap_chars >= self.chunk_max_chars {
            problems.push("docs.chunk_overlap_chars: must be less than chunk_max_chars".to_owned());
        }
        if !(1..=20).contains(&self.top_k) {
            problems.push("docs.top_k: must be between 1 and 20".to_owned());
        }
        if !(0.0..1.0).contains(&self.min_score) {
            problems.push("docs.min_score: must be in [0, 1)".to_owned());
        }
        if let Some(m) = &self.model
            && let Err(e) = crate::domain::ModelName::parse(m)
        {
            problems.push(format!("docs.model: {e}"));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_problems_are_all_named() {
        assert!(DocsConfig::default().validate().is_empty());
        let bad = DocsConfig {
            default_collection: "Bad".into(),
            chunk_max_chars: 50,
            chunk_overlap_chars: 60,
            top_k: 0,
            min_score: 1.5,
            model: Some("bad model".into()),
        };
        assert_eq!(bad.validate().len(), 6, "{:?}", bad.validate());
    }
}
