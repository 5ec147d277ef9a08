//! Searching an [`Index`]: the hybrid score (cosine and lexical match) of the items a
//! search reads, kept in a top-k heap.
//!
//! A recall for a turn reads its own thread's arena whole, and of the person's other
//! threads only the facts that share a term or a concept with the question (from the
//! facts' postings, rarest term first, at most [`MAX_CANDIDATES`]): its cost depends on
//! the thread and the question, not on how many facts the person holds.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet};

use super::{Index, OFF_TOPIC_FACTOR};
use crate::memory::concepts::{Fit, Mask};
use crate::memory::lexical::Analysis;
use crate::memory::store::MemoryItem;

/// The most facts of other threads one recall scores. A fact that shares no term or
/// concept with the question is never among them: its lexical share is 0, so it could
/// only pass `cross_thread_min_score` on a cosine alone that the built-in embedder does
/// not give two texts without a word in common.
pub const MAX_CANDIDATES: usize = 512;

/// An item's position in the index and its similarity to the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub slot: usize,
    pub score: f32,
}

impl Eq for Scored {}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.slot.cmp(&self.slot))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The best `k` of what it is offered, kept in a min-heap.
struct TopK {
    k: usize,
    heap: BinaryHeap<Reverse<Scored>>,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    fn offer(&mut self, s: Scored) {
        if self.k == 0 {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(Reverse(s));
        } else if self.heap.peek().is_some_and(|Reverse(min)| s > *min) {
            self.heap.pop();
            self.heap.push(Reverse(s));
        }
    }

    /// Best first.
    fn into_sorted(self) -> Vec<Scored> {
        let mut out: Vec<Scored> = self.heap.into_iter().map(|Reverse(s)| s).collect();
        out.sort_by(|a, b| b.cmp(a));
        out
    }
}

/// What a search looks for: the query's vector and its lexical terms, and how much the
/// lexical match counts (0 = vectors only, 1 = terms only).
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub vector: &'a [f32],
    pub terms: &'a [u64],
    /// The household concepts the query mentions (see `concepts`), and their terms.
    pub concepts: &'a [usize],
    pub concept_terms: &'a [u64],
    pub lexical_weight: f32,
}

impl<'a> Query<'a> {
    /// A query on vectors alone.
    pub fn vector(vector: &'a [f32]) -> Self {
        Self {
            vector,
            terms: &[],
            concepts: &[],
            concept_terms: &[],
            lexical_weight: 0.0,
        }
    }

    /// A query on `analysis` of its text as well as its vector.
    pub fn hybrid(vector: &'a [f32], analysis: &'a Analysis, lexical_weight: f32) -> Self {
        Self {
            vector,
            terms: &analysis.terms,
            concepts: &analysis.concepts,
            concept_terms: &analysis.concept_terms,
            lexical_weight,
        }
    }
}

impl Index {
    /// The `k` items most similar to `query` among all threads, best first.
    pub fn search(&self, query: &Query<'_>, k: usize) -> Vec<Scored> {
        let mut top = TopK::new(k);
        let every: Vec<usize> = (0..self.arenas.len()).collect();
        self.scan(query, &every, |_, _| true, |_, s| top.offer(s));
        top.into_sorted()
    }

    /// The best `k` of `thread` (every item of its arena scored), and the best `k` shared
    /// items (facts that nothing supersedes) of every other thread, of which only the
    /// candidates are scored (see [`candidates`](Self::candidates)).
    pub fn search_split(
        &self,
        query: &Query<'_>,
        k: usize,
        thread: &str,
    ) -> (Vec<Scored>, Vec<Scored>) {
        let own = self.thread_numbers.get(thread).copied();
        let (mut mine, mut others) = (TopK::new(k), TopK::new(k));
        let arenas: Vec<usize> = own.map(|t| t as usize).into_iter().collect();
        self.scan(query, &arenas, |_, _| true, |_, s| mine.offer(s));
        let shared_elsewhere = |slot: usize, t: u32| Some(t) != own && self.shared(slot);
        match self.candidates(query, own) {
            Some(slots) => self.score_slots(query, &slots, shared_elsewhere, |s| others.offer(s)),
            // A query on vectors alone has no terms to pick candidates by.
            None => {
                let every: Vec<usize> = (0..self.arenas.len()).collect();
                self.scan(query, &every, shared_elsewhere, |_, s| others.offer(s));
            }
        }
        (mine.into_sorted(), others.into_sorted())
    }

    /// The score of an item the index does not hold (a counted one, read from the store
    /// for a search), as if it held it; `None` when it does not fit the query.
    pub fn score_item(&self, query: &Query<'_>, item: &MemoryItem) -> Option<f32> {
        if item.vector.len() != self.dim {
            return None;
        }
        let scorer = self.scorer(query)?;
        let (terms, concepts) = super::analyzed(item.kind, &item.text, item.subject.as_deref());
        let mut codes = Vec::with_capacity(self.dim);
        let scale = quantize(&item.vector, &mut codes);
        scorer.of(
            concepts,
            &terms,
            Quantized {
                codes: &codes,
                scale,
            },
        )
    }

    /// The best `k` of one thread.
    pub fn search_thread(&self, query: &Query<'_>, k: usize, thread: &str) -> Vec<Scored> {
        let Some(own) = self.thread_numbers.get(thread).copied() else {
            return Vec::new();
        };
        let mut top = TopK::new(k);
        self.scan(query, &[own as usize], |_, _| true, |_, s| top.offer(s));
        top.into_sorted()
    }

    /// The shared facts of threads other than `own` that hold one of the query's terms or
    /// concepts: the rarest term's first, newest first within a term, at most
    /// [`MAX_CANDIDATES`]. `None` when the query is on vectors alone (no lexical weight),
    /// where every shared fact is a candidate.
    pub(super) fn candidates(&self, query: &Query<'_>, own: Option<u32>) -> Option<Vec<usize>> {
        if query.lexical_weight <= 0.0 {
            return None;
        }
        let mut postings: Vec<&Vec<u32>> = query
            .terms
            .iter()
            .chain(query.concept_terms)
            .filter_map(|t| self.fact_postings.get(t))
            .collect();
        postings.sort_by_key(|p| p.len());
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for &slot in postings.iter().flat_map(|p| p.iter().rev()) {
            let slot = slot as usize;
            if out.len() == MAX_CANDIDATES {
                break;
            }
            if self.shared(slot) && Some(self.threads[slot]) != own && seen.insert(slot) {
                out.push(slot);
            }
        }
        Some(out)
    }

    /// Every item's score: `(1 - w) × cosine + w × lexical`, where lexical is the share of
    /// the query terms' weight (BM25's idf over this index) that the item holds. A term
    /// the index has never seen weighs the most, so a question about something never
    /// told matches nothing well. A memory about another pet or person than the one the
    /// question names is not offered at all; one about another topic scores
    /// [`OFF_TOPIC_FACTOR`] of that. Only the slots `wanted(slot, thread)` of the
    /// `arenas` named are scored.
    fn scan(
        &self,
        query: &Query<'_>,
        arenas: &[usize],
        wanted: impl Fn(usize, u32) -> bool,
        mut visit: impl FnMut(u32, Scored),
    ) {
        let Some(scorer) = self.scorer(query) else {
            return;
        };
        let every = arenas
            .iter()
            .filter_map(|&a| self.arenas.get(a))
            .flat_map(|arena| {
                arena
                    .codes
                    .chunks_exact(self.dim)
                    .zip(&arena.scales)
                    .zip(arena.slots.iter().zip(&arena.threads))
            });
        for ((codes, &scale), (&slot, t)) in every {
            let slot = slot as usize;
            if wanted(slot, *t)
                && let Some(s) = scorer.score(self, slot, Quantized { codes, scale })
            {
                visit(*t, s);
            }
        }
    }

    /// [`scan`](Self::scan)'s score for the `slots` named (in any arena) that are
    /// `wanted(slot, thread)`.
    fn score_slots(
        &self,
        query: &Query<'_>,
        slots: &[usize],
        wanted: impl Fn(usize, u32) -> bool,
        mut visit: impl FnMut(Scored),
    ) {
        let Some(scorer) = self.scorer(query) else {
            return;
        };
        for &slot in slots {
            if wanted(slot, self.threads[slot])
                && let Some(s) = scorer.score(self, slot, self.vector(slot))
            {
                visit(s);
            }
        }
    }

    /// What scoring `query` needs besides each item: `None` when its vector does not fit.
    fn scorer<'q>(&self, query: &'q Query<'q>) -> Option<Scorer<'q>> {
        if query.vector.len() != self.dim || self.dim == 0 {
            return None;
        }
        let w = query.lexical_weight.clamp(0.0, 1.0);
        let lexical = (w > 0.0 && !(query.terms.is_empty() && query.concept_terms.is_empty()))
            .then(|| self.lexical(query));
        Some(Scorer {
            vector: query.vector,
            w,
            lexical,
            fit: Fit::new(query.concepts),
        })
    }

    /// The query terms' weights: each term's idf over this index (a concept's
    /// [`CONCEPT_WEIGHT`](super::CONCEPT_WEIGHT) times its idf), and their sum.
    fn lexical(&self, query: &Query<'_>) -> Lexical {
        // BM25's idf over this index and [`BACKGROUND`] virtual items that hold none of
        // the terms: a memory of a few items weighs its words like a larger one would.
        let n = (self.len() + super::BACKGROUND) as f32;
        let weighted = query.terms.iter().map(|t| (t, 1.0)).chain(
            query
                .concept_terms
                .iter()
                .map(|t| (t, super::CONCEPT_WEIGHT)),
        );
        let weights: Vec<(u64, f32)> = weighted
            .map(|(t, weight)| {
                let df = self.counts.get(t).copied().unwrap_or(0) as f32;
                (*t, weight * ((n - df + 0.5) / (df + 0.5)).ln_1p())
            })
            .collect();
        let total = weights.iter().map(|(_, idf)| idf).sum();
        Lexical { weights, total }
    }
}

/// A query made ready to score items with.
struct Scorer<'q> {
    vector: &'q [f32],
    w: f32,
    lexical: Option<Lexical>,
    fit: Fit,
}

impl Scorer<'_> {
    /// The score of the item in `slot`, whose vector is `v`; `None` when it is about
    /// another pet or person than the question names.
    fn score(&self, index: &Index, slot: usize, v: Quantized<'_>) -> Option<Scored> {
        let score = self.of(index.concepts[slot], &index.terms[slot], v)?;
        Some(Scored { slot, score })
    }

    /// The score of an item with these `concepts`, `terms` and vector.
    fn of(&self, concepts: Mask, terms: &[u64], v: Quantized<'_>) -> Option<f32> {
        if !self.fit.compatible(concepts) {
            return None;
        }
        let cosine = v.dot(self.vector);
        let w = self.w;
        let mut score = match &self.lexical {
            Some(l) => (1.0 - w) * cosine + w * l.share(terms),
            None => (1.0 - w) * cosine,
        };
        if self.fit.off_topic(concepts) {
            score *= OFF_TOPIC_FACTOR;
        }
        Some(score)
    }
}

/// A query's terms with their weights (see [`Index::lexical`]): an item's lexical score is
/// the sum of the weights of the terms it holds. Looked up per item scored, so a recall
/// costs what it reads, not what the person's whole memory holds.
struct Lexical {
    weights: Vec<(u64, f32)>,
    total: f32,
}

impl Lexical {
    /// The share (0..1) of the query's weight that an item with `terms` (sorted) holds.
    fn share(&self, terms: &[u64]) -> f32 {
        let mut sum = 0f32;
        for (t, weight) in &self.weights {
            if terms.binary_search(t).is_ok() {
                sum += weight;
            }
        }
        if self.total > 0.0 {
            sum / self.total
        } else {
            sum
        }
    }
}

/// A vector held as one signed byte per dimension: each dimension is `codes[i] × scale`,
/// where `scale` is the largest magnitude over 127. For a unit vector every dimension is
/// within `scale / 2` of the exact one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quantized<'a> {
    pub codes: &'a [i8],
    pub scale: f32,
}

impl Quantized<'_> {
    /// The dot product with an exact vector `q`.
    pub fn dot(&self, q: &[f32]) -> f32 {
        lanes_dot(q, self.codes) * self.scale
    }
}

/// Appends `v` to `codes` as [`Quantized`] codes; returns its scale.
pub(super) fn quantize(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let largest = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if largest == 0.0 || !largest.is_finite() {
        codes.extend(std::iter::repeat_n(0, v.len()));
        return 0.0;
    }
    let scale = largest / 127.0;
    // In range by construction: |x / scale| <= 127.
    codes.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// The dot product, in eight independent lanes so that it vectorises.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    lanes_dot(a, b)
}

/// The dot product of `a` with `b`'s elements as `f32`s (exact ones, or a
/// [`Quantized`] vector's codes), in eight independent lanes so that it vectorises.
fn lanes_dot<T: Copy + Into<f32>>(a: &[f32], b: &[T]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * (*y).into())
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i].into();
        }
    }
    lanes.iter().sum::<f32>() + tail
}
