//! Which people's memories the process holds, and bringing them up to date.
//!
//! Nothing is read at start: a person's items are read from the store when they are
//! first recalled for, remembered for or searched ([`Memory::load_person`]), so start-up
//! and resident memory grow with the people who talk, not with the store. Of that read
//! the index holds the current facts (recalled in every thread) and the items of the
//! threads the person is talking in; the rest (years of other threads' exchanges, recalled
//! only in their own thread, and superseded facts, never recalled) is only counted for
//! idf. A thread's items are read again, from the thread's own rows, on its first turn
//! ([`Memory::load_thread`]) and held from then on. Concurrent first turns share one read;
//! a recall waits for it, so it never searches a half-built index.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::MemoryError;
use super::index::Index;
use super::service::{Indexes, lock};
use super::store::{ItemKind, MemoryItem};
use super::{Memory, REFRESH_OVERLAP};
use crate::domain::Person;

/// Per person: the one load of their items (done once it is set).
pub(super) type Loads = HashMap<Person, Arc<tokio::sync::OnceCell<()>>>;

/// How many threads of one person are held at once. Beyond it, the one talked in least
/// recently is let go: its exchanges are counted again, and read again on its next turn.
pub const HELD_THREADS: usize = 32;

/// Per person and thread: the one read of the thread's items. A thread is *held* from
/// the moment its read starts: what is written or refreshed for it from then on is held
/// too, so nothing falls between the read and the writes.
#[derive(Default)]
pub(super) struct ThreadLoads {
    by_person: HashMap<Person, HashMap<Box<str>, HeldThread>>,
    /// Counts the turns, for which thread was talked in last.
    tick: u64,
}

#[derive(Default)]
struct HeldThread {
    read: Arc<tokio::sync::OnceCell<()>>,
    /// The tick of its latest turn.
    used: u64,
}

/// Per person: the threads held (see [`ThreadLoads`]).
pub(super) type Held = HashMap<Person, HashSet<Box<str>>>;

impl Memory {
    /// Reads `person`'s items from the store into their index, once: a second call waits
    /// for the first's read (or, after it failed, tries again).
    pub async fn load_person(&self, person: &Person) -> Result<(), MemoryError> {
        let cell = lock(&self.inner.loads)
            .entry(person.clone())
            .or_default()
            .clone();
        cell.get_or_try_init(|| async {
            // Each batch goes into the index as it is read: no recall searches it before
            // the last (they wait on this cell), and a failed read leaves what it added,
            // which the next try skips.
            let (mut count, mut added) = (0, 0);
            let mut each = |items: Vec<MemoryItem>| {
                count += items.len();
                let held = self.held_threads();
                added += add_items(&mut self.indexes_mut(), items, &held);
            };
            self.inner.store.load_person(person, &mut each).await?;
            let held = self.indexes_mut().get_mut(person).map_or(0, |own| {
                own.values_mut().for_each(Index::shrink_to_fit);
                own.values().map(Index::held).sum::<usize>()
            });
            tracing::info!(person = %person.as_str(), items = count, added, held, "memory loaded; current facts held, the rest counted until needed");
            Ok::<(), MemoryError>(())
        })
        .await?;
        Ok(())
    }

    /// Holds the items of `person`'s `thread` (after reading the person's memory), reading
    /// them once: a second call waits for the first's read (or, after it failed, tries
    /// again).
    pub async fn load_thread(&self, person: &Person, thread: &str) -> Result<(), MemoryError> {
        self.load_person(person).await?;
        // Under the threads' lock (taken before the indexes', never after), so that a
        // thread let go cannot be taken up again between the two.
        let cell = {
            let mut threads = lock(&self.inner.threads);
            threads.tick += 1;
            let tick = threads.tick;
            let own = match threads.by_person.get_mut(person) {
                Some(own) => own,
                None => threads.by_person.entry(person.clone()).or_default(),
            };
            let held = match own.get_mut(thread) {
                Some(held) => held,
                None => own.entry(thread.into()).or_default(),
            };
            held.used = tick;
            let cell = held.read.clone();
            if let Some(gone) = least_recent(own, thread)
                && let Some(own) = self.indexes_mut().get_mut(person)
            {
                let released: usize = own.values_mut().map(|i| i.release_thread(&gone)).sum();
                tracing::debug!(person = %person.as_str(), thread = %gone, released, "memory thread let go");
            }
            cell
        };
        cell.get_or_try_init(|| async {
            let mut each = |items: Vec<MemoryItem>| {
                let held = self.held_threads();
                add_items(&mut self.indexes_mut(), items, &held);
            };
            self.inner
                .store
                .load_thread(person, thread, &mut each)
                .await?;
            Ok::<(), MemoryError>(())
        })
        .await?;
        Ok(())
    }

    /// Every person's held threads, now.
    pub(super) fn held_threads(&self) -> Held {
        lock(&self.inner.threads)
            .by_person
            .iter()
            .map(|(person, threads)| (person.clone(), threads.keys().cloned().collect()))
            .collect()
    }

    /// Whether `person`'s items have been read from the store.
    pub fn is_loaded(&self, person: &Person) -> bool {
        lock(&self.inner.loads)
            .get(person)
            .is_some_and(|cell| cell.initialized())
    }

    /// The people whose items have been read from the store.
    fn loaded_people(&self) -> Vec<Person> {
        lock(&self.inner.loads)
            .iter()
            .filter(|(_, cell)| cell.initialized())
            .map(|(person, _)| person.clone())
            .collect()
    }

    /// Re-reads the items of every person held (in cluster mode, to drop what other
    /// processes deleted), one person at a time. Returns how many items are indexed.
    pub async fn reload(&self) -> Result<usize, MemoryError> {
        for person in self.loaded_people() {
            let mut fresh = HashMap::new();
            let mut each = |items: Vec<MemoryItem>| {
                let held = self.held_threads();
                add_items(&mut fresh, items, &held);
            };
            self.inner.store.load_person(&person, &mut each).await?;
            let mut own = fresh.remove(&person).unwrap_or_default();
            own.values_mut().for_each(Index::shrink_to_fit);
            self.indexes_mut().insert(person, own);
        }
        Ok(self.len())
    }

    /// Adds what other processes wrote since the newest item held (less
    /// [`REFRESH_OVERLAP`]), reading only those items; items already held are kept as they
    /// are. Deletions by other processes show only after a full [`reload`](Self::reload).
    /// A person not loaded yet gets the new items now and the rest at their load (which
    /// skips what is held). Returns how many items it added.
    pub async fn refresh(&self) -> Result<usize, MemoryError> {
        let since = *lock(&self.inner.newest);
        let items = self.inner.store.load(Some(since - REFRESH_OVERLAP)).await?;
        let newest = items.iter().map(|i| i.created_at).max();
        let held = self.held_threads();
        let added = add_items(&mut self.indexes_mut(), items, &held);
        let mut held = lock(&self.inner.newest);
        *held = (*held).max(newest.unwrap_or(*held));
        Ok(added)
    }
}

/// When a person holds more than [`HELD_THREADS`] threads: takes the one talked in least
/// recently (other than `current`, and whose read is done) out of `own` and names it.
fn least_recent(own: &mut HashMap<Box<str>, HeldThread>, current: &str) -> Option<Box<str>> {
    if own.len() <= HELD_THREADS {
        return None;
    }
    let oldest = own
        .iter()
        .filter(|(t, held)| &***t != current && held.read.initialized())
        .min_by_key(|(_, held)| held.used)
        .map(|(t, _)| t.clone())?;
    own.remove(&oldest);
    Some(oldest)
}

/// `per` index, summed over every person and embedder.
pub(super) fn count(indexes: &Indexes, per: fn(&Index) -> usize) -> usize {
    indexes.values().flat_map(HashMap::values).map(per).sum()
}

/// Adds `items` to their person's index of their embedder (made when missing), skipping
/// those it knows already: current facts and the items of `held` threads are held, the
/// others (superseded facts, other threads' exchanges) counted (see [`Index::count`]).
/// Returns how many it added.
pub(super) fn add_items(
    indexes: &mut Indexes,
    items: impl IntoIterator<Item = MemoryItem>,
    held: &Held,
) -> usize {
    let mut added = 0;
    for item in items {
        let dim = item.vector.len();
        let index = indexes
            .entry(item.person.clone())
            .or_default()
            .entry(item.embedder.clone())
            .or_insert_with(|| Index::new(dim));
        // Facts are held when current, which the index decides.
        let hold = item.kind == ItemKind::Fact
            || held
                .get(&item.person)
                .is_some_and(|threads| threads.contains(item.thread_id.as_str()));
        added += usize::from(if hold {
            index.insert(item)
        } else {
            index.count(&item)
        });
    }
    added
}
