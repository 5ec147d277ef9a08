//! The in-memory vector index: every item of one embedder, vectors in contiguous
//! `Vec<f32>` arenas, searched by a brute-force dot-product scan with a top-k heap.
//!
//! Vectors are unit length, so the dot product is the cosine similarity. The scan is a
//! plain loop over fixed-width chunks that the compiler vectorises; at 256 dimensions
//! 100,000 items take a few milliseconds (see `benches/memory.rs`). A recall for a turn
//! reads only the facts' arena and its own thread's, so its cost does not grow with the
//! person's other threads (years of them). Loaded from the store at start, updated on
//! every write and forget.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};

use uuid::Uuid;

use super::concepts::{Fit, Mask};
use super::lexical::Analysis;
use super::store::{ItemKind, MemoryItem};

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

/// Items without any of the query's terms assumed besides the index's own (see
/// `Index::lexical`).
pub const BACKGROUND: usize = 50;

/// The most items a term may be in and still name one fact (see [`Index::subject_named`]).
pub const NAMING_DF: usize = 5;

/// How much more a shared concept weighs than a shared word of the same rarity.
pub const CONCEPT_WEIGHT: f32 = 3.0;

/// What a memory's score is multiplied by when it is about another topic than the
/// question (see `concepts::off_topic`).
pub const OFF_TOPIC_FACTOR: f32 = 0.5;

/// Items of one embedder (one dimension) of one person.
///
/// Besides the vectors it keeps an inverted index of every item's lexical terms (for the
/// hybrid score), and the facts' bookkeeping: which fact texts it holds (a fact told twice
/// is stored once) and, per subject, the newest fact, which supersedes the older ones.
/// Only facts that nothing supersedes are *shared*: recalled for other threads.
#[derive(Debug, Clone)]
pub struct Index {
    dim: usize,
    /// The vectors: every fact in the first arena (a recall for any thread reads them
    /// one after the other), and each thread's other items in an arena of its own (at
    /// `1 +` the thread's number), which only that thread's recall reads.
    arenas: Vec<Arena>,
    /// Per slot: its arena and position there.
    place: Vec<(u32, u32)>,
    /// The items without their vectors, slot for slot.
    entries: Vec<MemoryItem>,
    /// Each slot's thread, interned.
    threads: Vec<u32>,
    /// Per slot: whether a recall for another thread may return it.
    shared: Vec<bool>,
    /// Per slot: its lexical terms and concepts; and each term's slots.
    terms: Vec<Vec<u64>>,
    concepts: Vec<Mask>,
    postings: HashMap<u64, Vec<u32>>,
    thread_numbers: HashMap<String, u32>,
    slots: HashMap<Uuid, usize>,
    /// (thread, hash of the text) of every item, so the same exchange is stored once.
    known: HashSet<(u32, u64)>,
    /// The key of every fact's text (see `facts::fact_key`) and the newest fact with it.
    facts: HashMap<u64, Uuid>,
    /// Each subject's newest fact.
    current: HashMap<String, Uuid>,
}

/// Vectors of some of an index's items, contiguous, with each one's slot and thread.
#[derive(Debug, Clone, Default)]
struct Arena {
    vectors: Vec<f32>,
    slots: Vec<u32>,
    threads: Vec<u32>,
}

/// The arena of an item of `kind` in the thread numbered `thread`.
fn arena_of(kind: ItemKind, thread: u32) -> u32 {
    if kind == ItemKind::Fact {
        0
    } else {
        thread.saturating_add(1)
    }
}

fn text_key(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

fn fact_hash(text: &str) -> u64 {
    text_key(&super::facts::fact_key(text))
}

fn slot_u32(slot: usize) -> u32 {
    u32::try_from(slot).unwrap_or(u32::MAX)
}

impl Index {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            arenas: vec![Arena::default()],
            place: Vec::new(),
            entries: Vec::new(),
            threads: Vec::new(),
            shared: Vec::new(),
            terms: Vec::new(),
            concepts: Vec::new(),
            postings: HashMap::new(),
            thread_numbers: HashMap::new(),
            slots: HashMap::new(),
            known: HashSet::new(),
            facts: HashMap::new(),
            current: HashMap::new(),
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entry(&self, slot: usize) -> Option<&MemoryItem> {
        self.entries.get(slot)
    }

    pub fn contains(&self, id: &Uuid) -> bool {
        self.slots.contains_key(id)
    }

    /// Whether `thread` already has an item with exactly this text.
    pub fn has_text(&self, thread: &str, text: &str) -> bool {
        self.thread_numbers
            .get(thread)
            .is_some_and(|t| self.known.contains(&(*t, text_key(text))))
    }

    /// The newest fact saying the same as `text` (same letters and digits), if any, and
    /// whether it is still current (no newer fact on its subject).
    pub fn same_fact(&self, text: &str) -> Option<(&MemoryItem, bool)> {
        let id = self.facts.get(&fact_hash(text))?;
        let slot = *self.slots.get(id)?;
        Some((&self.entries[slot], self.shared[slot]))
    }

    /// The newer fact that supersedes the item in `slot`, if one does.
    pub fn superseded_by(&self, slot: usize) -> Option<Uuid> {
        let item = self.entries.get(slot)?;
        let subject = item
            .subject
            .as_ref()
            .filter(|_| item.kind == ItemKind::Fact)?;
        self.current
            .get(subject)
            .filter(|id| **id != item.id)
            .copied()
    }

    /// The subject of the current fact that `terms` (a new fact's word terms) name most
    /// specifically: the newest shared fact with a subject holding the most of the rarer
    /// terms (held by at most [`NAMING_DF`] items). "I ditched the Nighthawk" names the
    /// fact "My router is a Netgear Nighthawk".
    pub fn subject_named(&self, terms: &[u64]) -> Option<String> {
        let mut overlap: HashMap<usize, usize> = HashMap::new();
        for t in terms {
            let Some(posting) = self.postings.get(t).filter(|p| p.len() <= NAMING_DF) else {
                continue;
            };
            for &slot in posting {
                let slot = slot as usize;
                if self.shared[slot] && self.entries[slot].subject.is_some() {
                    *overlap.entry(slot).or_default() += 1;
                }
            }
        }
        overlap
            .into_iter()
            .max_by_key(|&(slot, n)| (n, self.entries[slot].created_at, self.entries[slot].id))
            .and_then(|(slot, _)| self.entries[slot].subject.clone())
    }

    /// [`superseded_by`](Self::superseded_by) for the item with `id`.
    pub fn superseded(&self, id: &Uuid) -> Option<Uuid> {
        self.slots
            .get(id)
            .and_then(|&slot| self.superseded_by(slot))
    }

    /// The latest `n` `exchange` items of a thread, newest first.
    pub fn recent_in_thread(&self, thread: &str, n: usize) -> Vec<&MemoryItem> {
        let Some(own) = self.thread_numbers.get(thread).copied() else {
            return Vec::new();
        };
        let Some(arena) = self.arenas.get(arena_of(ItemKind::Exchange, own) as usize) else {
            return Vec::new();
        };
        let mut items: Vec<&MemoryItem> = arena
            .slots
            .iter()
            .map(|&slot| &self.entries[slot as usize])
            .filter(|e| e.kind == ItemKind::Exchange)
            .collect();
        items.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        items.truncate(n);
        items
    }

    /// Adds an item; false (and nothing added) when its dimension differs or its id is
    /// already there.
    pub fn insert(&mut self, mut item: MemoryItem) -> bool {
        if item.vector.len() != self.dim || self.slots.contains_key(&item.id) {
            return false;
        }
        let next = u32::try_from(self.thread_numbers.len()).unwrap_or(u32::MAX);
        let thread = *self
            .thread_numbers
            .entry(item.thread_id.clone())
            .or_insert(next);
        if thread == next {
            self.arenas.push(Arena::default());
        }
        let slot = self.entries.len();
        self.known.insert((thread, text_key(&item.text)));
        let a = arena_of(item.kind, thread);
        let arena = &mut self.arenas[a as usize];
        self.place.push((a, slot_u32(arena.slots.len())));
        arena.vectors.extend_from_slice(&item.vector);
        arena.slots.push(slot_u32(slot));
        arena.threads.push(thread);
        item.vector = Vec::new();
        let mut analysis = super::lexical::analyze(&item.text);
        // A fact is about its subject even when it does not say so ("Finally sold the
        // Mazda and got a Kia" took "car" from the fact it replaces).
        if let Some(subject) = item
            .subject
            .as_deref()
            .filter(|_| item.kind == ItemKind::Fact)
        {
            for c in super::concepts::in_subject(subject) {
                if !analysis.concepts.contains(&c) {
                    analysis.concepts.push(c);
                    analysis.concept_terms.push(super::lexical::concept_term(c));
                }
            }
        }
        let mut terms = analysis.terms;
        terms.extend(analysis.concept_terms);
        terms.sort_unstable();
        terms.dedup();
        for t in &terms {
            self.postings.entry(*t).or_default().push(slot_u32(slot));
        }
        self.terms.push(terms);
        self.concepts
            .push(super::concepts::mask(&analysis.concepts));
        let mut shared = item.kind == ItemKind::Fact;
        if shared {
            let newer =
                |a: &MemoryItem, b: &MemoryItem| (a.created_at, a.id) > (b.created_at, b.id);
            let key = fact_hash(&item.text);
            let replaces = self
                .facts
                .get(&key)
                .and_then(|id| self.slots.get(id))
                .is_none_or(|&s| newer(&item, &self.entries[s]));
            if replaces {
                self.facts.insert(key, item.id);
            }
            if let Some(subject) = &item.subject {
                match self.current.get(subject).and_then(|id| self.slots.get(id)) {
                    Some(&held) if !newer(&item, &self.entries[held]) => shared = false,
                    held => {
                        if let Some(&held) = held {
                            self.shared[held] = false;
                        }
                        self.current.insert(subject.clone(), item.id);
                    }
                }
            }
        }
        self.shared.push(shared);
        self.slots.insert(item.id, slot);
        self.entries.push(item);
        self.threads.push(thread);
        true
    }

    /// Removes an item (the last slot moves into its place). Returns whether it was there.
    pub fn remove(&mut self, id: &Uuid) -> bool {
        let Some(slot) = self.slots.remove(id) else {
            return false;
        };
        self.known
            .remove(&(self.threads[slot], text_key(&self.entries[slot].text)));
        let last = self.entries.len() - 1;
        for t in std::mem::take(&mut self.terms[slot]) {
            if let Some(p) = self.postings.get_mut(&t) {
                p.retain(|s| *s != slot_u32(slot));
                if p.is_empty() {
                    self.postings.remove(&t);
                }
            }
        }
        // Its vector leaves its arena (the arena's last moves into its place)…
        let (a, pos) = self.place[slot];
        let arena = &mut self.arenas[a as usize];
        let (pos, end) = (pos as usize, arena.slots.len() - 1);
        if pos != end {
            let (head, tail) = arena.vectors.split_at_mut(end * self.dim);
            head[pos * self.dim..(pos + 1) * self.dim].copy_from_slice(&tail[..self.dim]);
            arena.slots[pos] = arena.slots[end];
            arena.threads[pos] = arena.threads[end];
            self.place[arena.slots[pos] as usize].1 = slot_u32(pos);
        }
        arena.vectors.truncate(end * self.dim);
        arena.slots.pop();
        arena.threads.pop();
        // … and its slot the index (the last slot moves into its place).
        if slot != last {
            let (a, pos) = self.place[last];
            self.arenas[a as usize].slots[pos as usize] = slot_u32(slot);
            self.slots.insert(self.entries[last].id, slot);
            for t in &self.terms[last] {
                if let Some(p) = self.postings.get_mut(t) {
                    p.iter_mut()
                        .filter(|s| **s == slot_u32(last))
                        .for_each(|s| *s = slot_u32(slot));
                }
            }
        }
        self.place.swap_remove(slot);
        let gone = self.entries.swap_remove(slot);
        self.threads.swap_remove(slot);
        self.terms.swap_remove(slot);
        self.concepts.swap_remove(slot);
        self.shared.swap_remove(slot);
        if gone.kind == ItemKind::Fact {
            let key = fact_hash(&gone.text);
            if self.facts.get(&key) == Some(&gone.id) {
                self.facts.remove(&key);
            }
            if let Some(subject) = &gone.subject
                && self.current.get(subject) == Some(&gone.id)
            {
                self.current.remove(subject);
                self.promote_newest(subject);
            }
        }
        true
    }

    /// After the current fact of `subject` went: the newest one left takes its place.
    fn promote_newest(&mut self, subject: &str) {
        let newest = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == ItemKind::Fact && e.subject.as_deref() == Some(subject))
            .max_by_key(|(_, e)| (e.created_at, e.id))
            .map(|(slot, e)| (slot, e.id));
        if let Some((slot, id)) = newest {
            self.shared[slot] = true;
            self.current.insert(subject.to_owned(), id);
        }
    }

    /// The `k` items most similar to `query` among all threads, best first.
    pub fn search(&self, query: &Query<'_>, k: usize) -> Vec<Scored> {
        let mut top = TopK::new(k);
        let every: Vec<usize> = (0..self.arenas.len()).collect();
        self.scan(query, &every, |_, _| true, |_, s| top.offer(s));
        top.into_sorted()
    }

    /// The arenas a recall for the thread numbered `own` reads: the facts', and the
    /// thread's own when it has one.
    fn arenas_for(&self, own: Option<u32>) -> Vec<usize> {
        let mut arenas = vec![0];
        arenas.extend(own.map(|t| arena_of(ItemKind::Exchange, t) as usize));
        arenas
    }

    /// In one scan: the best `k` of `thread`, and the best `k` shared items (facts that
    /// nothing supersedes) of every other thread; no other item is scored.
    pub fn search_split(
        &self,
        query: &Query<'_>,
        k: usize,
        thread: &str,
    ) -> (Vec<Scored>, Vec<Scored>) {
        let own = self.thread_numbers.get(thread).copied();
        let (mut mine, mut others) = (TopK::new(k), TopK::new(k));
        self.scan(
            query,
            &self.arenas_for(own),
            |slot, t| Some(t) == own || self.shared[slot],
            |t, s| {
                if Some(t) == own {
                    mine.offer(s);
                } else {
                    others.offer(s);
                }
            },
        );
        (mine.into_sorted(), others.into_sorted())
    }

    /// The best `k` of one thread.
    pub fn search_thread(&self, query: &Query<'_>, k: usize, thread: &str) -> Vec<Scored> {
        let Some(own) = self.thread_numbers.get(thread).copied() else {
            return Vec::new();
        };
        let mut top = TopK::new(k);
        let arenas = self.arenas_for(Some(own));
        self.scan(query, &arenas, |_, t| t == own, |_, s| top.offer(s));
        top.into_sorted()
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
        if query.vector.len() != self.dim || self.dim == 0 {
            return;
        }
        let w = query.lexical_weight.clamp(0.0, 1.0);
        let lexical = (w > 0.0 && !(query.terms.is_empty() && query.concept_terms.is_empty()))
            .then(|| self.lexical(query));
        let fit = Fit::new(query.concepts);
        let every = arenas
            .iter()
            .filter_map(|&a| self.arenas.get(a))
            .flat_map(|arena| {
                arena
                    .vectors
                    .chunks_exact(self.dim)
                    .zip(arena.slots.iter().zip(&arena.threads))
            });
        for (v, (&slot, t)) in every {
            let slot = slot as usize;
            let concepts = self.concepts[slot];
            if !wanted(slot, *t) || !fit.compatible(concepts) {
                continue;
            }
            let cosine = dot(query.vector, v);
            let mut score = match &lexical {
                Some(l) => (1.0 - w) * cosine + w * l.share(&self.terms[slot]),
                None => (1.0 - w) * cosine,
            };
            if fit.off_topic(concepts) {
                score *= OFF_TOPIC_FACTOR;
            }
            visit(*t, Scored { slot, score });
        }
    }

    /// The query terms' weights: each term's idf over this index (a concept's
    /// [`CONCEPT_WEIGHT`] times its idf), and their sum.
    fn lexical(&self, query: &Query<'_>) -> Lexical {
        // BM25's idf over this index and [`BACKGROUND`] virtual items that hold none of
        // the terms: a memory of a few items weighs its words like a larger one would.
        let n = (self.entries.len() + BACKGROUND) as f32;
        let weighted = query
            .terms
            .iter()
            .map(|t| (t, 1.0))
            .chain(query.concept_terms.iter().map(|t| (t, CONCEPT_WEIGHT)));
        let weights: Vec<(u64, f32)> = weighted
            .map(|(t, weight)| {
                let df = self.postings.get(t).map_or(0, Vec::len) as f32;
                (*t, weight * ((n - df + 0.5) / (df + 0.5)).ln_1p())
            })
            .collect();
        let total = weights.iter().map(|(_, idf)| idf).sum();
        Lexical { weights, total }
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

/// The dot product, in eight independent lanes so that it vectorises.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::TaskId;

    fn unit(dim: usize, hot: &[(usize, f32)]) -> Vec<f32> {
        let mut v = vec![0f32; dim];
        for (i, x) in hot {
            v[*i] = *x;
        }
        crate::memory::embed::normalize_l2(&mut v);
        v
    }

    fn item(thread: &str, vector: Vec<f32>) -> MemoryItem {
        MemoryItem {
            id: Uuid::now_v7(),
            person: crate::domain::Person::default(),
            thread_id: thread.into(),
            task_id: TaskId::new(),
            seq: 0,
            kind: ItemKind::Fact,
            text: format!("in {thread}"),
            subject: None,
            superseded_by: None,
            embedder: "test".into(),
            vector,
            created_at: chrono::Utc::now(),
        }
    }

    /// Ten items whose similarity to the query `e0` falls with their number.
    fn ranked(dim: usize) -> (Index, Vec<Uuid>) {
        let mut index = Index::new(dim);
        let mut ids = Vec::new();
        for i in 0..10 {
            let thread = if i % 2 == 0 { "even" } else { "odd" };
            let it = item(thread, unit(dim, &[(0, 10.0 - i as f32), (1 + i, 3.0)]));
            ids.push(it.id);
            assert!(index.insert(it));
        }
        (index, ids)
    }

    fn ids(index: &Index, found: &[Scored]) -> Vec<Uuid> {
        found
            .iter()
            .map(|s| index.entry(s.slot).unwrap().id)
            .collect()
    }

    #[test]
    fn top_k_is_best_first_and_threads_filter() {
        let dim = 19; // not a multiple of 8: the tail of the dot product counts too
        let (index, all) = ranked(dim);
        let q = unit(dim, &[(0, 1.0)]);
        let top = index.search(&Query::vector(&q), 3);
        assert_eq!(ids(&index, &top), all[..3].to_vec());
        assert!(top[0].score > top[1].score && top[1].score > top[2].score);
        assert_eq!(index.search(&Query::vector(&q), 50).len(), 10);
        assert!(index.search(&Query::vector(&q), 0).is_empty());

        let odd = index.search_thread(&Query::vector(&q), 2, "odd");
        assert_eq!(ids(&index, &odd), vec![all[1], all[3]]);
        assert!(
            index
                .search_thread(&Query::vector(&q), 2, "nobody")
                .is_empty()
        );
        let (mine, others) = index.search_split(&Query::vector(&q), 2, "even");
        assert_eq!(ids(&index, &mine), vec![all[0], all[2]]);
        assert_eq!(ids(&index, &others), vec![all[1], all[3]]);
        assert!(
            index
                .search(&Query::vector(&unit(4, &[(0, 1.0)])), 3)
                .is_empty(),
            "wrong dimension"
        );
    }

    #[test]
    fn remove_keeps_the_other_vectors_in_place() {
        let dim = 16;
        let (mut index, all) = ranked(dim);
        let q = unit(dim, &[(0, 1.0)]);
        assert!(index.remove(&all[0]));
        assert!(!index.remove(&all[0]));
        assert!(index.remove(&all[9]));
        assert_eq!(index.len(), 8);
        assert!(!index.contains(&all[0]));
        let top = index.search(&Query::vector(&q), 8);
        assert_eq!(ids(&index, &top), all[1..9].to_vec());
        // Scores after the move equal a fresh computation.
        for s in &top {
            let slot_id = index.entry(s.slot).unwrap().id;
            let i = all.iter().position(|x| *x == slot_id).unwrap();
            let expected = dot(&q, &unit(dim, &[(0, 10.0 - i as f32), (1 + i, 3.0)]));
            assert!((s.score - expected).abs() < 1e-6);
        }
        assert!(
            !index.insert(item("x", vec![1.0; 3])),
            "wrong dimension is refused"
        );
    }

    /// Facts and other items live in two arenas; whatever is removed, every item left is
    /// found by its own vector, in its own slot.
    #[test]
    fn removals_keep_both_arenas_right() {
        let dim = 16;
        let mut index = Index::new(dim);
        let mut live = Vec::new();
        for i in 0..40usize {
            let mut it = item(
                if i % 3 == 0 { "a" } else { "b" },
                unit(dim, &[(i % dim, 1.0), ((i * 7 + 3) % dim, 0.5 + i as f32)]),
            );
            it.kind = if i % 2 == 0 {
                ItemKind::Fact
            } else {
                ItemKind::Exchange
            };
            it.text = format!("item {i}");
            live.push((it.id, it.vector.clone()));
            assert!(index.insert(it));
        }
        let mut state = 7u64;
        while live.len() > 5 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let (id, _) = live.swap_remove((state >> 33) as usize % live.len());
            assert!(index.remove(&id));
            for (id, vector) in &live {
                let top = index.search(&Query::vector(vector), 1);
                let found = index.entry(top[0].slot).unwrap();
                assert!((top[0].score - 1.0).abs() < 1e-5, "{top:?}");
                assert_eq!(found.id, *id);
            }
        }
        assert_eq!(index.len(), 5);
    }

    #[test]
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..37).map(|i| (i as f32).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).cos()).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }
}
