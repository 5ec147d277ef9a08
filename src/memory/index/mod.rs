//! The in-memory vector index: every item of one embedder and person, vectors in
//! contiguous `Vec<f32>` arenas (one per thread), searched by a dot-product scan with a
//! top-k heap ([`search`]).
//!
//! Vectors are unit length, so the dot product is the cosine similarity. The scan is a
//! plain loop over fixed-width chunks that the compiler vectorises; at 256 dimensions
//! 100,000 items take a few milliseconds (see `benches/memory.rs`). A recall for a turn
//! reads its own thread's arena and, of other threads, only the facts its question
//! shares a term or concept with, so its cost grows neither with the person's other
//! threads (years of them) nor with their facts. Loaded from the store when the person
//! is first recalled for, updated on every write and forget.

mod search;

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::concepts::Mask;
use super::store::{ItemKind, MemoryItem};

pub use search::{MAX_CANDIDATES, Query, Scored, dot};

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
    /// The vectors: each thread's items in an arena of its own (at the thread's number),
    /// which that thread's recall reads whole.
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
    /// The same for the facts alone: where a recall finds other threads' candidates.
    fact_postings: HashMap<u64, Vec<u32>>,
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

/// Takes `slot` out of the postings of its `terms`.
fn unpost(postings: &mut HashMap<u64, Vec<u32>>, terms: &[u64], slot: usize) {
    for t in terms {
        if let Some(p) = postings.get_mut(t) {
            p.retain(|s| *s != slot_u32(slot));
            if p.is_empty() {
                postings.remove(t);
            }
        }
    }
}

/// Renames `from` to `to` in the postings of its `terms`.
fn repost(postings: &mut HashMap<u64, Vec<u32>>, terms: &[u64], from: usize, to: usize) {
    for t in terms {
        if let Some(p) = postings.get_mut(t) {
            p.iter_mut()
                .filter(|s| **s == slot_u32(from))
                .for_each(|s| *s = slot_u32(to));
        }
    }
}

impl Index {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            arenas: Vec::new(),
            place: Vec::new(),
            entries: Vec::new(),
            threads: Vec::new(),
            shared: Vec::new(),
            terms: Vec::new(),
            concepts: Vec::new(),
            postings: HashMap::new(),
            fact_postings: HashMap::new(),
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

    /// The vector of the item in `slot` (which must be held).
    fn vector(&self, slot: usize) -> &[f32] {
        let (a, pos) = self.place[slot];
        let start = pos as usize * self.dim;
        &self.arenas[a as usize].vectors[start..start + self.dim]
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
        let Some(arena) = self.arenas.get(own as usize) else {
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
        let a = thread;
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
            if item.kind == ItemKind::Fact {
                self.fact_postings
                    .entry(*t)
                    .or_default()
                    .push(slot_u32(slot));
            }
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
        let terms = std::mem::take(&mut self.terms[slot]);
        unpost(&mut self.postings, &terms, slot);
        unpost(&mut self.fact_postings, &terms, slot);
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
            repost(&mut self.postings, &self.terms[last], last, slot);
            repost(&mut self.fact_postings, &self.terms[last], last, slot);
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
}

#[cfg(test)]
mod tests;
