//! The in-memory vector index of one embedder and person: their facts and the items of
//! the threads they are talking in, vectors in contiguous arenas (one per thread),
//! searched by a dot-product scan with a top-k heap ([`search`]).
//!
//! Vectors are unit length, so the dot product is the cosine similarity. They are held
//! as one byte per dimension and a scale ([`Quantized`]): a quarter of the memory of
//! `f32`s, for a cosine within 0.002 of the exact one for a long text's vector and 0.006
//! for a short one's (the store keeps the exact vectors). An item's other fields are held
//! once per index where they are the same for all (person, embedder, thread id): see
//! [`Entry`]. The scan is a plain loop over fixed-width chunks that the compiler
//! vectorises; at 256 dimensions 100,000 items take a few milliseconds (see
//! `benches/memory.rs`). A recall for a turn reads its own thread's arena and, of other
//! threads, only the facts its question shares a term or concept with, so its cost grows
//! neither with the person's other threads (years of them) nor with their facts.
//!
//! An exchange is only ever recalled for its own thread, so the exchanges and answers of
//! threads nobody is talking in are not held: they are *counted* ([`Index::count`]), their
//! terms adding to the counts idf reads and nothing else, and held once their thread's
//! first turn reads them ([`Index::insert`] of a counted item). Loaded from the store when
//! the person is first recalled for, updated on every write and forget.

mod search;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::concepts::Mask;
use super::store::{ItemKind, MemoryItem};
use crate::domain::{Person, TaskId};

pub(crate) use search::Quantized;
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
    /// Whose items these are and which embedder made their vectors (taken from the
    /// first item: an index holds one person's items of one embedder).
    person: Person,
    embedder: String,
    /// The items without their vectors, slot for slot.
    entries: Vec<Entry>,
    /// Each slot's thread, interned.
    threads: Vec<u32>,
    /// Per slot: its lexical terms and concepts.
    terms: Vec<Box<[u64]>>,
    concepts: Vec<Mask>,
    /// How many items hold each term (what idf reads), held or counted.
    counts: HashMap<u64, u32>,
    /// The items counted but not held (see [`Index::count`]).
    counted: HashSet<Uuid>,
    /// Each term's facts: where a recall finds other threads' candidates.
    fact_postings: HashMap<u64, Vec<u32>>,
    thread_numbers: HashMap<String, u32>,
    /// Each thread number's thread id.
    thread_ids: Vec<Box<str>>,
    slots: HashMap<Uuid, usize>,
    /// (thread, hash of the text) of every item, so the same exchange is stored once.
    known: HashSet<(u32, u64)>,
    /// The key of every fact's text (see `facts::fact_key`) and the newest fact with it.
    facts: HashMap<u64, Uuid>,
    /// Each subject's newest fact.
    current: HashMap<String, Uuid>,
}

/// What the index keeps of an item besides its vector, its thread and its owner (which
/// it holds once, not per item): [`Index::item`] makes the whole [`MemoryItem`] again.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: Uuid,
    pub task_id: TaskId,
    pub created_at: DateTime<Utc>,
    pub seq: u32,
    pub kind: ItemKind,
    pub text: Box<str>,
    pub subject: Option<Box<str>>,
}

impl Entry {
    fn of(item: MemoryItem) -> Self {
        Self {
            id: item.id,
            task_id: item.task_id,
            created_at: item.created_at,
            seq: item.seq,
            kind: item.kind,
            text: item.text.into_boxed_str(),
            subject: item.subject.map(String::into_boxed_str),
        }
    }

    /// Its place in time: by time, then id (the newer is the larger).
    fn stamp(&self) -> (DateTime<Utc>, Uuid) {
        (self.created_at, self.id)
    }

    /// Whether it was made after `other`.
    fn newer_than(&self, other: &Entry) -> bool {
        self.stamp() > other.stamp()
    }
}

/// Vectors of some of an index's items, contiguous (each `dim` bytes, times its scale),
/// with each one's slot and thread.
#[derive(Debug, Clone, Default)]
struct Arena {
    codes: Vec<i8>,
    scales: Vec<f32>,
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

/// Counts one item fewer for each of its `terms`.
fn uncount(counts: &mut HashMap<u64, u32>, terms: &[u64]) {
    for t in terms {
        if let Some(n) = counts.get_mut(t) {
            *n -= 1;
            if *n == 0 {
                counts.remove(t);
            }
        }
    }
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

/// An item's lexical terms (its words and concepts, sorted, once each) and its concepts.
/// A fact is about its subject even when it does not say so ("Finally sold the Mazda and
/// got a Kia" took "car" from the fact it replaces).
pub(super) fn analyzed(kind: ItemKind, text: &str, subject: Option<&str>) -> (Vec<u64>, Mask) {
    let mut analysis = super::lexical::analyze(text);
    if let Some(subject) = subject.filter(|_| kind == ItemKind::Fact) {
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
    (terms, super::concepts::mask(&analysis.concepts))
}

impl Index {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            arenas: Vec::new(),
            place: Vec::new(),
            person: Person::default(),
            embedder: String::new(),
            entries: Vec::new(),
            threads: Vec::new(),
            terms: Vec::new(),
            concepts: Vec::new(),
            counts: HashMap::new(),
            counted: HashSet::new(),
            fact_postings: HashMap::new(),
            thread_numbers: HashMap::new(),
            thread_ids: Vec::new(),
            slots: HashMap::new(),
            known: HashSet::new(),
            facts: HashMap::new(),
            current: HashMap::new(),
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// How many items the index knows: held, or counted only.
    pub fn len(&self) -> usize {
        self.entries.len() + self.counted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items it holds whole (searchable).
    pub fn held(&self) -> usize {
        self.entries.len()
    }

    pub fn entry(&self, slot: usize) -> Option<&Entry> {
        self.entries.get(slot)
    }

    /// The whole item in `slot` (without its vector, which the store keeps).
    pub fn item(&self, slot: usize) -> Option<MemoryItem> {
        let e = self.entries.get(slot)?;
        Some(MemoryItem {
            id: e.id,
            person: self.person.clone(),
            thread_id: self.thread_ids[self.threads[slot] as usize].to_string(),
            task_id: e.task_id,
            seq: e.seq,
            kind: e.kind,
            text: e.text.to_string(),
            subject: e.subject.as_deref().map(str::to_owned),
            superseded_by: self.superseded_by(slot),
            embedder: self.embedder.clone(),
            vector: Vec::new(),
            created_at: e.created_at,
        })
    }

    /// Gives back what the vectors and lists hold beyond their items (after a load).
    pub fn shrink_to_fit(&mut self) {
        for arena in &mut self.arenas {
            arena.codes.shrink_to_fit();
            arena.scales.shrink_to_fit();
            arena.slots.shrink_to_fit();
            arena.threads.shrink_to_fit();
        }
        self.arenas.shrink_to_fit();
        self.place.shrink_to_fit();
        self.entries.shrink_to_fit();
        self.threads.shrink_to_fit();
        self.terms.shrink_to_fit();
        self.concepts.shrink_to_fit();
        self.fact_postings.values_mut().for_each(Vec::shrink_to_fit);
        self.counts.shrink_to_fit();
        self.counted.shrink_to_fit();
    }

    /// The vector of the item in `slot` (which must be held).
    fn vector(&self, slot: usize) -> Quantized<'_> {
        let (a, pos) = self.place[slot];
        let (arena, pos) = (&self.arenas[a as usize], pos as usize);
        Quantized {
            codes: &arena.codes[pos * self.dim..(pos + 1) * self.dim],
            scale: arena.scales[pos],
        }
    }

    /// Whether it holds the item with `id` whole.
    pub fn holds(&self, id: &Uuid) -> bool {
        self.slots.contains_key(id)
    }

    /// Whether it knows the item with `id`: held, or counted only.
    pub fn contains(&self, id: &Uuid) -> bool {
        self.holds(id) || self.counted.contains(id)
    }

    /// Whether `thread` already has an item with exactly this text.
    pub fn has_text(&self, thread: &str, text: &str) -> bool {
        self.thread_numbers
            .get(thread)
            .is_some_and(|t| self.known.contains(&(*t, text_key(text))))
    }

    /// The newest fact saying the same as `text` (same letters and digits), if any, and
    /// whether it is still current (no newer fact on its subject).
    pub fn same_fact(&self, text: &str) -> Option<(&Entry, bool)> {
        let id = self.facts.get(&fact_hash(text))?;
        let slot = *self.slots.get(id)?;
        Some((&self.entries[slot], self.shared(slot)))
    }

    /// The newer fact that supersedes the item in `slot`, if one does.
    pub fn superseded_by(&self, slot: usize) -> Option<Uuid> {
        let e = self.entries.get(slot)?;
        self.current_instead_of(e.kind, e.subject.as_deref(), e.id)
    }

    /// The current fact of the subject of a fact (`kind`, `subject`, `id`), when that is
    /// another.
    fn current_instead_of(&self, kind: ItemKind, subject: Option<&str>, id: Uuid) -> Option<Uuid> {
        let subject = subject.filter(|_| kind == ItemKind::Fact)?;
        self.current.get(subject).filter(|c| **c != id).copied()
    }

    /// The subject of the current fact that `terms` (a new fact's word terms) name most
    /// specifically: the newest shared fact with a subject holding the most of the rarer
    /// terms (held by at most [`NAMING_DF`] items). "I ditched the Nighthawk" names the
    /// fact "My router is a Netgear Nighthawk".
    pub fn subject_named(&self, terms: &[u64]) -> Option<String> {
        let mut overlap: HashMap<usize, usize> = HashMap::new();
        for t in terms {
            // Only facts are shared; a term is rare among all the items.
            let rare = self.counts.get(t).is_some_and(|n| *n as usize <= NAMING_DF);
            let Some(posting) = self.fact_postings.get(t).filter(|_| rare) else {
                continue;
            };
            for &slot in posting {
                let slot = slot as usize;
                if self.shared(slot) && self.entries[slot].subject.is_some() {
                    *overlap.entry(slot).or_default() += 1;
                }
            }
        }
        overlap
            .into_iter()
            .max_by_key(|&(slot, n)| (n, self.entries[slot].created_at, self.entries[slot].id))
            .and_then(|(slot, _)| self.entries[slot].subject.as_deref().map(str::to_owned))
    }

    /// The latest `n` `exchange` items of a thread, newest first.
    pub fn recent_in_thread(&self, thread: &str, n: usize) -> Vec<&Entry> {
        let Some(own) = self.thread_numbers.get(thread).copied() else {
            return Vec::new();
        };
        let Some(arena) = self.arenas.get(own as usize) else {
            return Vec::new();
        };
        let mut items: Vec<&Entry> = arena
            .slots
            .iter()
            .map(|&slot| &self.entries[slot as usize])
            .filter(|e| e.kind == ItemKind::Exchange)
            .collect();
        items.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        items.truncate(n);
        items
    }

    /// Counts an item without holding it: its terms count for idf, and nothing else of it
    /// is kept (an exchange or answer of a thread nobody is talking in). False (and
    /// nothing counted) when its dimension differs or the index knows it already.
    pub fn count(&mut self, item: &MemoryItem) -> bool {
        if item.vector.len() != self.dim || self.contains(&item.id) {
            return false;
        }
        self.adopt(item);
        let (terms, _) = analyzed(item.kind, &item.text, item.subject.as_deref());
        for t in &terms {
            *self.counts.entry(*t).or_default() += 1;
        }
        self.counted.insert(item.id);
        true
    }

    /// Takes the owner and embedder from the first item (an index holds one person's
    /// items of one embedder).
    fn adopt(&mut self, item: &MemoryItem) {
        if self.is_empty() {
            self.person = item.person.clone();
            self.embedder.clone_from(&item.embedder);
        }
    }

    /// Whether a recall for another thread may return the item in `slot`: a fact (only
    /// current facts are held).
    fn shared(&self, slot: usize) -> bool {
        self.entries[slot].kind == ItemKind::Fact
    }

    /// Stops holding the item with `id` and counts it instead.
    fn demote(&mut self, id: &Uuid) {
        if self.take(id, false) {
            self.counted.insert(*id);
        }
    }

    /// Forgets a counted item (the store's copy of it, which says what its terms were).
    /// Returns whether it was counted.
    pub fn uncount(&mut self, item: &MemoryItem) -> bool {
        if !self.counted.remove(&item.id) {
            return false;
        }
        let (terms, _) = analyzed(item.kind, &item.text, item.subject.as_deref());
        uncount(&mut self.counts, &terms);
        true
    }

    /// Holds an item whole (a counted one too, which is then held and not counted
    /// twice); false (and nothing added) when its dimension differs or it is held already.
    /// Only current facts are held: a fact older than its subject's current one is
    /// counted instead, and one newer than it makes it counted.
    pub fn insert(&mut self, item: MemoryItem) -> bool {
        if item.vector.len() != self.dim || self.slots.contains_key(&item.id) {
            return false;
        }
        if item.kind == ItemKind::Fact && self.superseded_on_arrival(&item) {
            return self.count(&item);
        }
        self.adopt(&item);
        let was_counted = self.counted.remove(&item.id);
        let next = u32::try_from(self.thread_numbers.len()).unwrap_or(u32::MAX);
        let thread = *self
            .thread_numbers
            .entry(item.thread_id.clone())
            .or_insert(next);
        if thread == next {
            self.arenas.push(Arena::default());
            self.thread_ids.push(item.thread_id.as_str().into());
        }
        let slot = self.entries.len();
        self.known.insert((thread, text_key(&item.text)));
        let a = thread;
        let arena = &mut self.arenas[a as usize];
        self.place.push((a, slot_u32(arena.slots.len())));
        arena
            .scales
            .push(search::quantize(&item.vector, &mut arena.codes));
        arena.slots.push(slot_u32(slot));
        arena.threads.push(thread);
        let item = Entry::of(item);
        let (terms, concepts) = analyzed(item.kind, &item.text, item.subject.as_deref());
        for t in &terms {
            if !was_counted {
                *self.counts.entry(*t).or_default() += 1;
            }
            if item.kind == ItemKind::Fact {
                self.fact_postings
                    .entry(*t)
                    .or_default()
                    .push(slot_u32(slot));
            }
        }
        self.terms.push(terms.into_boxed_slice());
        self.concepts.push(concepts);
        let mut superseded = None;
        if item.kind == ItemKind::Fact {
            let key = fact_hash(&item.text);
            let replaces = self
                .facts
                .get(&key)
                .and_then(|id| self.slots.get(id))
                .is_none_or(|&s| item.newer_than(&self.entries[s]));
            if replaces {
                self.facts.insert(key, item.id);
            }
            // It is newer than its subject's current fact (see `superseded_on_arrival`),
            // which it supersedes.
            if let Some(subject) = &item.subject {
                superseded = self.current.insert(subject.to_string(), item.id);
            }
        }
        self.slots.insert(item.id, slot);
        self.entries.push(item);
        self.threads.push(thread);
        // A superseded fact is never recalled: it is counted from now on, not held.
        if let Some(old) = superseded {
            self.demote(&old);
        }
        true
    }

    /// Whether `item`, a fact, is older than its subject's current fact here (and so
    /// superseded the moment it arrives).
    fn superseded_on_arrival(&self, item: &MemoryItem) -> bool {
        item.subject
            .as_deref()
            .and_then(|subject| self.current.get(subject))
            .and_then(|id| self.slots.get(id))
            .is_some_and(|&held| (item.created_at, item.id) < self.entries[held].stamp())
    }

    /// The fact that supersedes `item` (held or not): its subject's current fact, when
    /// that is another.
    pub fn superseding(&self, item: &MemoryItem) -> Option<Uuid> {
        self.current_instead_of(item.kind, item.subject.as_deref(), item.id)
    }

    /// Whether a subject has a current fact held.
    pub fn has_current(&self, subject: &str) -> bool {
        self.current.contains_key(subject)
    }

    /// Removes an item (the last slot moves into its place). Returns whether it was there.
    pub fn remove(&mut self, id: &Uuid) -> bool {
        self.take(id, true)
    }

    /// Stops holding the exchanges and answers of `thread` (a thread nobody has talked in
    /// for a while): they are counted again, as if never held; its facts stay. Returns
    /// how many items it let go.
    pub fn release_thread(&mut self, thread: &str) -> usize {
        let Some(arena) = self
            .thread_numbers
            .get(thread)
            .and_then(|t| self.arenas.get(*t as usize))
        else {
            return 0;
        };
        let ids: Vec<Uuid> = arena
            .slots
            .iter()
            .map(|&slot| &self.entries[slot as usize])
            .filter(|e| e.kind != ItemKind::Fact)
            .map(|e| e.id)
            .collect();
        for id in &ids {
            self.demote(id);
        }
        ids.len()
    }

    /// Removes an item, and its terms from the counts when `uncounted`.
    fn take(&mut self, id: &Uuid, uncounted: bool) -> bool {
        let Some(slot) = self.slots.remove(id) else {
            return false;
        };
        self.known
            .remove(&(self.threads[slot], text_key(&self.entries[slot].text)));
        let last = self.entries.len() - 1;
        let terms = std::mem::take(&mut self.terms[slot]);
        if uncounted {
            uncount(&mut self.counts, &terms);
        }
        unpost(&mut self.fact_postings, &terms, slot);
        // Its vector leaves its arena (the arena's last moves into its place)…
        let (a, pos) = self.place[slot];
        let arena = &mut self.arenas[a as usize];
        let (pos, end) = (pos as usize, arena.slots.len() - 1);
        if pos != end {
            let (head, tail) = arena.codes.split_at_mut(end * self.dim);
            head[pos * self.dim..(pos + 1) * self.dim].copy_from_slice(&tail[..self.dim]);
            arena.scales[pos] = arena.scales[end];
            arena.slots[pos] = arena.slots[end];
            arena.threads[pos] = arena.threads[end];
            self.place[arena.slots[pos] as usize].1 = slot_u32(pos);
        }
        arena.codes.truncate(end * self.dim);
        arena.scales.pop();
        arena.slots.pop();
        arena.threads.pop();
        // … and its slot the index (the last slot moves into its place).
        if slot != last {
            let (a, pos) = self.place[last];
            self.arenas[a as usize].slots[pos as usize] = slot_u32(slot);
            self.slots.insert(self.entries[last].id, slot);
            repost(&mut self.fact_postings, &self.terms[last], last, slot);
        }
        self.place.swap_remove(slot);
        let gone = self.entries.swap_remove(slot);
        self.threads.swap_remove(slot);
        self.terms.swap_remove(slot);
        self.concepts.swap_remove(slot);
        if gone.kind == ItemKind::Fact {
            let key = fact_hash(&gone.text);
            if self.facts.get(&key) == Some(&gone.id) {
                self.facts.remove(&key);
            }
            // Every older fact on its subject is counted, not held: the store gives the
            // one that is current again (`Memory::forget`).
            if let Some(subject) = gone.subject.as_deref()
                && self.current.get(subject) == Some(&gone.id)
            {
                self.current.remove(subject);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests;
