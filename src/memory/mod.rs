//! Conversation memory: what the person said in earlier turns, recalled for the turn at
//! hand.
//!
//! Where it sits in the request flow (DESIGN.md §3):
//! - **Producer**: when an LLM task has finished and its answer has been delivered, the
//!   exchange (the user's original prompt and the start of the answer) becomes an
//!   `exchange` item, context for its own thread, and the statements the person made in
//!   the prompt become `fact` items ([`facts`], or `[memory] extract_model` through
//!   [`extract`]); all are embedded and written with their thread and task id
//!   ([`Memory::remember_task`]). Web, RAG, utility and internal tasks, failed tasks and
//!   turns the user asked not to remember are never written. `coordinator memory
//!   backfill` feeds finished tasks from the task store the same way, idempotently.
//! - **Consumer**: at compose time, [`Memory::recall`] finds the items most relevant to the
//!   current prompt: the thread's own, and facts from other threads that no newer fact
//!   supersedes, scored by the embedder and the lexical match ([`lexical`], with the
//!   household thesaurus of [`concepts`]); [`Memory::context_block`] formats them, fenced
//!   and dated, for the worker, which receives history + memory context + original. What
//!   Open WebUI's own memory already put in the system prompt is not repeated
//!   ([`openwebui`]). The stored prompt stays the user's text, so the seed's self-feeding
//!   loop (history and memory written back as the prompt, then remembered again) cannot
//!   happen: memory is only ever made from `tasks.prompt` and the answer.
//!
//! Vectors live in the task store's database (`memory_items`, SQLite or PostgreSQL), the
//! source of truth; each process keeps an [`index::Index`] per person and embedder in
//! memory for search, read from the store on the person's first turn (`load`): their
//! facts and the threads they talk in are held, the rest only counted.
//! Embeddings come from a backend model (`[memory] embedding_model`) or, without one,
//! from the built-in hashed character n-gram embedder ([`embed::HashEmbedder`]).

pub mod cli;
pub mod concepts;
mod context;
pub mod embed;
pub mod eval;
pub mod extract;
pub mod facts;
pub mod index;
pub mod lexical;
mod load;
pub mod openwebui;
pub mod policy;
mod producer;
mod service;
pub mod store;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use context::{context_block, shown_in};
pub use policy::thread_allows_memory;
pub use producer::{
    BackfillReport, Exchange, Piece, Skip, condense, eligibility, fact_pieces, flatten,
};
pub use service::{Memory, MemoryHit, REFRESH_OVERLAP, select};
pub use store::{MemoryItem, MemoryStore};

/// Which memories a recall may return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Only the current thread.
    Thread,
    /// Every thread alike.
    Global,
    /// The current thread first, plus strong matches (`cross_thread_min_score`) from others.
    #[default]
    Auto,
}

/// `[memory]`: conversation memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryConfig {
    /// Whether turns are remembered and recalled. Listing and forgetting work either way.
    pub enabled: bool,
    pub scope: Scope,
    /// How many memories go into one prompt at most.
    pub top_k: usize,
    /// Lowest score (-1..1) a memory of the same thread needs. Scores blend the
    /// embedder's cosine with the lexical match (`lexical_weight`); the defaults are
    /// calibrated on `eval/memory.jsonl` with the built-in embedder (`coordinator eval
    /// memory --calibrate` finds them for another embedder).
    pub min_score: f32,
    /// Lowest score a fact from another thread needs under `scope = "auto"`.
    pub cross_thread_min_score: f32,
    /// A backend embedding model (e.g. `nomic-embed-text`); the built-in embedder otherwise.
    pub embedding_model: Option<String>,
    /// The backend (worker name) that serves `embedding_model`; the first backend otherwise.
    pub embedding_backend: Option<String>,
    /// The longest memory context put into one prompt, in characters.
    pub max_context_chars: usize,
    /// How much the lexical match counts in a memory's score (0 = the embedder's cosine
    /// only, 1 = terms only); calibrated on `eval/memory.jsonl`.
    pub lexical_weight: f32,
    /// What to do when a request already carries Open WebUI's own memories in its
    /// system prompt.
    pub openwebui_memory: OpenWebUiMemory,
    /// A (small) model that extracts the facts of a remembered turn; the rules otherwise,
    /// and whenever it fails or is late.
    pub extract_model: Option<String>,
    /// The backend (worker name) that serves `extract_model`; the first backend otherwise.
    pub extract_backend: Option<String>,
    /// How long fact extraction by the model may take before the rules decide.
    pub extract_timeout_ms: u64,
}

/// `[memory] openwebui_memory`: when Open WebUI's memory feature has put the person's
/// memories in the system prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenWebUiMemory {
    /// Add Coordinator's memories that Open WebUI's do not already say.
    #[default]
    Merge,
    /// Leave such turns to Open WebUI's memory: Coordinator adds none.
    Defer,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            scope: Scope::Auto,
            top_k: 3,
            min_score: 0.05,
            cross_thread_min_score: 0.07,
            embedding_model: None,
            embedding_backend: None,
            max_context_chars: 1500,
            lexical_weight: 0.9,
            openwebui_memory: OpenWebUiMemory::Merge,
            extract_model: None,
            extract_backend: None,
            extract_timeout_ms: 8000,
        }
    }
}

impl MemoryConfig {
    /// Every problem in `[memory]`, not just the first.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.top_k == 0 || self.top_k > 50 {
            problems.push("memory.top_k: must be between 1 and 50".to_owned());
        }
        for (key, value) in [
            ("min_score", self.min_score),
            ("cross_thread_min_score", self.cross_thread_min_score),
        ] {
            if !(-1.0..=1.0).contains(&value) {
                problems.push(format!(
                    "memory.{key}: {value} is not a similarity between -1 and 1"
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.lexical_weight) {
            problems.push(format!(
                "memory.lexical_weight: {} is not between 0 and 1",
                self.lexical_weight
            ));
        }
        if self.max_context_chars < 50 {
            problems.push("memory.max_context_chars: must be at least 50".to_owned());
        }
        if let Some(m) = &self.embedding_model
            && let Err(e) = crate::domain::ModelName::parse(m)
        {
            problems.push(format!("memory.embedding_model: {e}"));
        }
        if let Some(b) = &self.embedding_backend {
            if let Err(e) = crate::domain::WorkerName::parse(b) {
                problems.push(format!("memory.embedding_backend: {e}"));
            }
            if self.embedding_model.is_none() {
                problems.push(
                    "memory.embedding_backend: set only together with memory.embedding_model"
                        .to_owned(),
                );
            }
        }
        if let Some(m) = &self.extract_model
            && let Err(e) = crate::domain::ModelName::parse(m)
        {
            problems.push(format!("memory.extract_model: {e}"));
        }
        if let Some(b) = &self.extract_backend {
            if let Err(e) = crate::domain::WorkerName::parse(b) {
                problems.push(format!("memory.extract_backend: {e}"));
            }
            if self.extract_model.is_none() {
                problems.push(
                    "memory.extract_backend: set only together with memory.extract_model"
                        .to_owned(),
                );
            }
        }
        if !(100..=120_000).contains(&self.extract_timeout_ms) {
            problems.push(format!(
                "memory.extract_timeout_ms: {} is not between 100 and 120000",
                self.extract_timeout_ms
            ));
        }
        problems
    }
}

/// What can go wrong in memory.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("memory holds a malformed item {id}: {detail}")]
    Corrupt { id: String, detail: String },
    #[error("cannot read the memory eval file {path}: {detail}")]
    Eval { path: String, detail: String },
}

impl From<sqlx::Error> for MemoryError {
    fn from(e: sqlx::Error) -> Self {
        Self::Store(e.into())
    }
}
