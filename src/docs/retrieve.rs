//! Hybrid retrieval: the full-text index's ranking and the built-in embedder's ranking,
//! fused by reciprocal rank fusion (`1 / (60 + rank)` summed over both lists), then
//! filtered so that a question the documents do not answer gets no chunks at all (and an
//! honest answer). The filter takes two signals ([`relevant`]): the cosine similarity,
//! which the embedder's letter n-grams can raise for a chunk that only shares parts of
//! words with the question, and the share of the question's words the chunk holds.
//!
//! The vectors of every chunk are held in memory per process, reloaded when the store's
//! generation changes (another process, or `coordinator docs ingest`, wrote documents).
//! Only RAG jobs come here; ordinary chats never do.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::Serialize;

use super::Collection;
use super::store::{ChunkVector, DocStore, StoredChunk};
use super::terms::{is_word, query_terms, terms};
use crate::memory::embed::HashEmbedder;
use crate::store::StoreError;

/// How many candidates each ranking contributes to the fusion.
const CANDIDATES: usize = 50;
/// The rank constant of reciprocal rank fusion (Cormack et al., 2009).
const RRF_K: f64 = 60.0;
/// How many of the best fused candidates above the similarity floor are read and judged,
/// per chunk asked for.
const JUDGED_PER_RESULT: usize = 4;
/// The share of the question's words a chunk must hold to be relevant at `min_score`.
const MIN_WORD_SHARE: f64 = 0.5;
/// The share of the question's words that makes a chunk relevant at half of `min_score`:
/// it says nearly everything the question says, in the same words.
const STRONG_WORD_SHARE: f64 = 0.75;

/// One retrieved chunk and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub chunk: StoredChunk,
    /// The fused score (higher is better).
    pub score: f64,
    /// Cosine similarity of the query and the chunk (built-in embedder).
    pub similarity: f32,
    /// 1-based rank in the full-text list, if the chunk was in it.
    pub text_rank: Option<usize>,
    /// 1-based rank in the vector list, if the chunk was in it.
    pub vector_rank: Option<usize>,
}

struct Vectors {
    generation: i64,
    rows: Vec<ChunkVector>,
}

/// Searches the documents; cheap to clone.
#[derive(Clone)]
pub struct Retriever {
    store: Arc<dyn DocStore>,
    embedder: HashEmbedder,
    vectors: Arc<RwLock<Option<Arc<Vectors>>>>,
}

/// The text a chunk is embedded and indexed as: the title and heading path carry what the
/// chunk is about when its own text does not say it.
pub fn indexed_text(title: &str, heading: &str, text: &str) -> String {
    format!("{title}\n{heading}\n{text}")
}

impl Retriever {
    pub fn new(store: Arc<dyn DocStore>) -> Self {
        Self {
            store,
            embedder: HashEmbedder,
            vectors: Arc::new(RwLock::new(None)),
        }
    }

    pub fn store(&self) -> &Arc<dyn DocStore> {
        &self.store
    }

    /// The vectors as of the store's current generation.
    async fn vectors(&self) -> Result<Arc<Vectors>, StoreError> {
        let generation = self.store.generation().await?;
        let cached = self
            .vectors
            .read()
            .ok()
            .and_then(|v| v.as_ref().filter(|v| v.generation == generation).cloned());
        if let Some(v) = cached {
            return Ok(v);
        }
        let rows = self.store.vectors(self.embedder.id()).await?;
        let fresh = Arc::new(Vectors { generation, rows });
        if let Ok(mut slot) = self.vectors.write() {
            *slot = Some(fresh.clone());
        }
        Ok(fresh)
    }

    /// At most `k` chunks of `scope` (every collection when `None`) relevant to `query`:
    /// similarity at least `min_score`, best fused score first.
    pub async fn search(
        &self,
        scope: Option<&Collection>,
        query: &str,
        k: usize,
        min_score: f32,
    ) -> Result<Vec<Hit>, StoreError> {
        let terms = query_terms(query);
        let text_ids = self
            .store
            .text_search(scope, &terms, CANDIDATES as u32)
            .await?;
        let q = self.embedder.embed(query);
        let vectors = self.vectors().await?;
        let mut similarity: HashMap<i64, f32> = HashMap::with_capacity(vectors.rows.len());
        similarity.extend(
            vectors
                .rows
                .iter()
                .filter(|r| scope.is_none_or(|c| &r.collection == c))
                .map(|r| (r.id, dot(&q, &r.vector))),
        );
        let mut by_vector: Vec<(i64, f32)> = similarity.iter().map(|(id, s)| (*id, *s)).collect();
        let n = by_vector.len().min(CANDIDATES);
        if n > 0 && n < by_vector.len() {
            by_vector.select_nth_unstable_by(n - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        }
        by_vector.truncate(n);
        by_vector.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let floor = min_score / 2.0;
        let mut fused: Vec<Ranked> = fuse(&text_ids, &by_vector)
            .into_iter()
            .filter(|r| similarity.get(&r.id).is_some_and(|s| *s >= floor))
            .collect();
        fused.truncate(k.saturating_mul(JUDGED_PER_RESULT));
        let ids: Vec<i64> = fused.iter().map(|r| r.id).collect();
        let mut chunks: HashMap<i64, StoredChunk> = self
            .store
            .chunks(&ids)
            .await?
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        let words: Vec<&str> = terms
            .iter()
            .map(String::as_str)
            .filter(|t| is_word(t))
            .collect();
        Ok(fused
            .into_iter()
            .filter_map(|r| {
                let chunk = chunks.remove(&r.id)?;
                let similarity = similarity.get(&r.id).copied().unwrap_or(0.0);
                relevant(similarity, word_share(&words, &chunk), min_score).then_some(Hit {
                    chunk,
                    score: r.score,
                    similarity,
                    text_rank: r.text_rank,
                    vector_rank: r.vector_rank,
                })
            })
            .take(k)
            .collect())
    }
}

/// The share of the question's `words` that `chunk` holds (its file name and heading
/// path count); `None` when the question has no words (Japanese is characters and
/// bigrams, which span particles and say little about a match on their own).
fn word_share(words: &[&str], chunk: &StoredChunk) -> Option<f64> {
    if words.is_empty() {
        return None;
    }
    let held: std::collections::HashSet<String> = terms(&format!(
        "{} {} {}",
        chunk.display, chunk.heading, chunk.text
    ))
    .into_iter()
    .filter(|t| is_word(t))
    .collect();
    let found = words.iter().filter(|w| held.contains(**w)).count();
    Some(found as f64 / words.len() as f64)
}

/// Whether a chunk answers the question: similar enough and holding at least half of the
/// question's words, or holding nearly all of them and at least half as similar. With no
/// words to count, the similarity alone decides.
fn relevant(similarity: f32, word_share: Option<f64>, min_score: f32) -> bool {
    match word_share {
        None => similarity >= min_score,
        Some(share) => {
            (similarity >= min_score && share >= MIN_WORD_SHARE)
                || (similarity >= min_score / 2.0 && share >= STRONG_WORD_SHARE)
        }
    }
}

/// A chunk's place in the fused ranking.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Ranked {
    id: i64,
    score: f64,
    text_rank: Option<usize>,
    vector_rank: Option<usize>,
}

/// The dot product of two vectors of one embedder (the memory index's, which
/// vectorises: the largest single cost of a query over 10,000 chunks); 0 for vectors of
/// different lengths (different embedders).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    match a.len() == b.len() {
        true => crate::memory::index::dot(a, b),
        false => 0.0,
    }
}

/// Reciprocal rank fusion of the two ranked lists, best first; ties by id.
fn fuse(text: &[i64], vector: &[(i64, f32)]) -> Vec<Ranked> {
    let mut all: HashMap<i64, Ranked> = HashMap::new();
    let rrf = |i: usize| 1.0 / (RRF_K + (i + 1) as f64);
    for (i, id) in text.iter().enumerate() {
        let e = all.entry(*id).or_insert(Ranked {
            id: *id,
            ..Ranked::default()
        });
        e.score += rrf(i);
        e.text_rank = Some(i + 1);
    }
    for (i, (id, _)) in vector.iter().enumerate() {
        let e = all.entry(*id).or_insert(Ranked {
            id: *id,
            ..Ranked::default()
        });
        e.score += rrf(i);
        e.vector_rank = Some(i + 1);
    }
    let mut out: Vec<Ranked> = all.into_values().collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_in_lanes_is_the_dot_product() {
        for len in [0, 3, 8, 13, 256] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-4, "{len}");
        }
        assert_eq!(dot(&[1.0, 2.0], &[1.0]), 0.0, "vectors of other embedders");
    }

    #[test]
    fn relevance_takes_the_similarity_and_the_words() {
        let min = 0.18;
        // "quantum chromodynamics lecture notes" against a chunk about notes: similar by
        // letters, one word of four.
        assert!(!relevant(0.206, Some(0.25), min));
        assert!(relevant(0.206, Some(0.5), min));
        // Every word of the question, a little less similar.
        assert!(relevant(0.175, Some(1.0), min));
        assert!(!relevant(0.08, Some(1.0), min));
        // Japanese: the similarity alone.
        assert!(relevant(0.19, None, min));
        assert!(!relevant(0.17, None, min));
        let chunk = StoredChunk {
            id: 1,
            collection: Collection::parse("notes").unwrap(),
            path: "upload:backup.md".into(),
            display: "backup.md".into(),
            heading: "Backup › NAS".into(),
            text: "Runs every night.".into(),
        };
        let share = |q: &str| {
            let t = query_terms(q);
            let words: Vec<&str> = t
                .iter()
                .map(String::as_str)
                .filter(|t| is_word(t))
                .collect();
            word_share(&words, &chunk)
        };
        assert_eq!(share("when does the NAS backup run"), Some(0.5));
        assert_eq!(share("バックアップ"), None);
    }

    #[test]
    fn fusion_rewards_agreement() {
        // 7 is second in both lists; 1 is first in one only.
        let fused = fuse(&[1, 7, 3], &[(9, 0.9), (7, 0.8), (3, 0.1)]);
        assert_eq!(fused[0].id, 7);
        assert_eq!(
            (fused[0].text_rank, fused[0].vector_rank),
            (Some(2), Some(2))
        );
        assert_eq!(fused[1].id, 3, "in both lists, third");
        assert_eq!(fused.len(), 4);
        let only_vector = fused.iter().find(|f| f.id == 9).unwrap();
        assert_eq!(
            (only_vector.text_rank, only_vector.vector_rank),
            (None, Some(1))
        );
    }
}
