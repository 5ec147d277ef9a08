//! Each person's memory is read from the store on their first turn, not at start.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::*;
use crate::memory::index::{Index, Query};
use crate::memory::lexical;
use crate::memory::store::Batches;
use crate::memory::store::in_memory::InMemoryStore;
use crate::store::StoreError;

/// A store that counts the reads of a person's items, can hold them until released and
/// can fail them.
struct Watched {
    inner: Arc<dyn MemoryStore>,
    reads: AtomicUsize,
    /// Reads of one thread's items.
    thread_reads: AtomicUsize,
    entered: tokio::sync::Notify,
    release: tokio::sync::Semaphore,
    fail: AtomicBool,
}

impl Watched {
    fn new(inner: Arc<dyn MemoryStore>, held: bool) -> Arc<Self> {
        Arc::new(Self {
            inner,
            reads: AtomicUsize::new(0),
            thread_reads: AtomicUsize::new(0),
            entered: tokio::sync::Notify::new(),
            release: tokio::sync::Semaphore::new(if held { 0 } else { 1000 }),
            fail: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl MemoryStore for Watched {
    async fn insert(&self, items: &[MemoryItem]) -> Result<Vec<Uuid>, StoreError> {
        self.inner.insert(items).await
    }
    async fn load(&self, since: Option<DateTime<Utc>>) -> Result<Vec<MemoryItem>, StoreError> {
        self.inner.load(since).await
    }
    async fn load_person(&self, person: &Person, each: &mut Batches<'_>) -> Result<(), StoreError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.entered.notify_one();
        self.release.acquire().await.unwrap().forget();
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Corrupt {
                task_id: "-".into(),
                detail: "the database went away".into(),
            });
        }
        self.inner.load_person(person, each).await
    }
    async fn load_thread(
        &self,
        person: &Person,
        thread_id: &str,
        each: &mut Batches<'_>,
    ) -> Result<(), StoreError> {
        self.thread_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.load_thread(person, thread_id, each).await
    }
    async fn newest_fact(
        &self,
        person: &Person,
        subject: &str,
        embedder: &str,
    ) -> Result<Option<MemoryItem>, StoreError> {
        self.inner.newest_fact(person, subject, embedder).await
    }
    async fn people(&self) -> Result<Vec<(Person, u64)>, StoreError> {
        self.inner.people().await
    }
    async fn list(
        &self,
        person: Option<&Person>,
        thread_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        self.inner.list(person, thread_id, limit).await
    }
    async fn task_seqs(&self, task_id: TaskId, embedder: &str) -> Result<Vec<u32>, StoreError> {
        self.inner.task_seqs(task_id, embedder).await
    }
    async fn delete(
        &self,
        id: Uuid,
        person: Option<&Person>,
    ) -> Result<Option<MemoryItem>, StoreError> {
        self.inner.delete(id, person).await
    }
    async fn delete_thread(
        &self,
        person: Option<&Person>,
        thread_id: &str,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        self.inner.delete_thread(person, thread_id).await
    }
}

fn someone() -> Person {
    Person::parse("webui/u7").unwrap()
}

/// Writes, through another process's memory, a cat for `me()` and a router for
/// `someone()`.
async fn two_people_remembered(store: Arc<dyn MemoryStore>) {
    let writer = memory_on(store, MemoryConfig::default()).await;
    writer
        .remember_task(&record(
            "A",
            "私の猫の名前はミケです",
            "かわいい名前ですね。",
        ))
        .await
        .unwrap();
    let mut router = record("R", "My router is a Netgear Nighthawk", "A good one.");
    router.person = someone();
    writer.remember_task(&router).await.unwrap();
}

/// Nothing is read at start; a person's first turn reads theirs (and only theirs), and
/// what is written before and after that read is recalled.
async fn the_first_turn_reads_only_its_persons_memory(store: Arc<dyn MemoryStore>) {
    two_people_remembered(store.clone()).await;
    let watched = Watched::new(store.clone(), false);
    let memory = memory_on(watched.clone(), MemoryConfig::default()).await;
    assert_eq!(memory.len(), 0);
    assert!(!memory.is_loaded(&me()));
    // What each person holds is counted in the store (the dashboard's), read or not.
    let stored = memory.stored_by_person().await.unwrap();
    let people: Vec<&str> = stored.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(people, [me().as_str(), someone().as_str()], "{stored:?}");
    assert!(stored.iter().all(|(_, n)| *n > 0), "{stored:?}");
    assert_eq!(
        watched.reads.load(Ordering::SeqCst),
        0,
        "counting reads no one"
    );

    let ask = "私の猫の名前は何でしたっけ？";
    let hits = memory.recall(ask, &me(), &thread("B")).await;
    assert!(hits[0].item.text.contains("ミケ"), "{hits:?}");
    assert!(memory.is_loaded(&me()));
    assert!(!memory.is_loaded(&someone()), "another person is not read");
    assert_eq!(memory.len_by_person().len(), 1);
    assert_eq!(watched.reads.load(Ordering::SeqCst), 1);
    memory.recall(ask, &me(), &thread("C")).await;
    assert_eq!(watched.reads.load(Ordering::SeqCst), 1, "read once");

    // Written by another process after the read: seen after a refresh.
    let other = memory_on(store.clone(), MemoryConfig::default()).await;
    other
        .remember_task(&record("D", "My dog is called Rex", "Good dog."))
        .await
        .unwrap();
    // The dog's exchange and fact, and (made in the overlap before this memory opened)
    // the router's of the person not read yet: their read later skips what is held.
    assert_eq!(memory.refresh().await.unwrap(), 4);
    let dog = memory
        .recall("what is my dog called?", &me(), &thread("E"))
        .await;
    assert!(dog[0].item.text.contains("Rex"), "{dog:?}");

    // A person not read yet: a turn of theirs written here reads their memory first,
    // so what they told before is neither lost nor stored twice.
    let mut again = record("S", "My router is a Netgear Nighthawk", "Still good.");
    again.person = someone();
    memory.remember_task(&again).await.unwrap();
    assert!(memory.is_loaded(&someone()));
    let facts: Vec<MemoryItem> = store
        .list(Some(&someone()), None, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.kind == ItemKind::Fact)
        .collect();
    assert_eq!(facts.len(), 1, "the fact told before is not stored again");
    let router = memory
        .recall("which router do I have?", &someone(), &thread("T"))
        .await;
    assert!(router[0].item.text.contains("Nighthawk"), "{router:?}");
}

#[tokio::test]
async fn the_first_turn_reads_only_its_persons_memory_on_sqlite() {
    let db = sqlite().await;
    the_first_turn_reads_only_its_persons_memory(db.store.clone()).await;
}

#[tokio::test]
async fn the_first_turn_reads_only_its_persons_memory_on_postgres() {
    let Some(db) = postgres().await else { return };
    the_first_turn_reads_only_its_persons_memory(db.store.clone()).await;
    db.drop().await;
}

/// Two first turns at once share one read, and neither recalls before it is done.
#[tokio::test]
async fn concurrent_first_turns_share_one_read() {
    let db = sqlite().await;
    two_people_remembered(db.store.clone()).await;
    let watched = Watched::new(db.store.clone(), true);
    let memory = memory_on(watched.clone(), MemoryConfig::default()).await;
    let ask = "私の猫の名前は何でしたっけ？";
    let (person, b, c) = (me(), thread("B"), thread("C"));
    let (first, second, ()) = tokio::join!(
        memory.recall(ask, &person, &b),
        memory.recall(ask, &person, &c),
        async {
            // Both turns are waiting now (this runtime polls them first, on one thread).
            watched.entered.notified().await;
            assert_eq!(memory.len(), 0, "nothing recalled from a half-read index");
            watched.release.add_permits(1);
        }
    );
    assert_eq!(watched.reads.load(Ordering::SeqCst), 1);
    assert!(first[0].item.text.contains("ミケ"), "{first:?}");
    assert_eq!(first[0].item.id, second[0].item.id);
}

/// A read that fails recalls nothing for that turn and leaves the person unread, so the
/// next turn reads again.
#[tokio::test]
async fn a_failed_read_is_tried_again() {
    let db = sqlite().await;
    two_people_remembered(db.store.clone()).await;
    let watched = Watched::new(db.store.clone(), false);
    let memory = memory_on(watched.clone(), MemoryConfig::default()).await;
    let ask = "私の猫の名前は何でしたっけ？";
    watched.fail.store(true, Ordering::SeqCst);
    assert!(memory.recall(ask, &me(), &thread("B")).await.is_empty());
    assert!(!memory.is_loaded(&me()));
    assert!(memory.search(ask, Some(&me()), None, 3).await.is_err());
    watched.fail.store(false, Ordering::SeqCst);
    let hits = memory.recall(ask, &me(), &thread("B")).await;
    assert!(hits[0].item.text.contains("ミケ"), "{hits:?}");
    assert!(memory.is_loaded(&me()));
    assert_eq!(watched.reads.load(Ordering::SeqCst), 3);
}

/// A person with more items than one batch: the store hands them over oldest first in
/// batches of at most `LOAD_BATCH`, and their memory knows every one and gives each back whole.
async fn a_long_memory_is_read_in_batches(store: Arc<dyn MemoryStore>) {
    use crate::memory::store::LOAD_BATCH;
    // Whole seconds: PostgreSQL keeps microseconds.
    let start = chrono::SubsecRound::trunc_subsecs(Utc::now(), 0) - chrono::Duration::days(1);
    let items: Vec<MemoryItem> = (0..2 * LOAD_BATCH + 3)
        .map(|i| {
            let text = format!("exchange number {i} about topic {}", i % 7);
            MemoryItem {
                id: Uuid::now_v7(),
                person: me(),
                thread_id: format!("t{}", i % 5),
                task_id: TaskId::new(),
                seq: 0,
                kind: ItemKind::Exchange,
                text: text.clone(),
                subject: None,
                superseded_by: None,
                embedder: HashEmbedder::ID.into(),
                vector: HashEmbedder.embed(&text),
                created_at: start + chrono::Duration::seconds(i as i64),
            }
        })
        .collect();
    assert_eq!(store.insert(&items).await.unwrap().len(), items.len());

    let mut batches = Vec::new();
    let mut each = |batch: Vec<MemoryItem>| batches.push(batch);
    store.load_person(&me(), &mut each).await.unwrap();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, [LOAD_BATCH, LOAD_BATCH, 3]);
    let read: Vec<Uuid> = batches.into_iter().flatten().map(|i| i.id).collect();
    let written: Vec<Uuid> = items.iter().map(|i| i.id).collect();
    assert_eq!(read, written, "oldest first");

    let memory = memory_on(store.clone(), MemoryConfig::default()).await;
    memory.load_person(&me()).await.unwrap();
    assert_eq!(memory.len(), items.len());
    let hits = memory
        .search("exchange number 260", Some(&me()), None, 1)
        .await
        .unwrap();
    let mut expected = items[260].clone();
    expected.vector = Vec::new();
    assert_eq!(
        hits[0].item, expected,
        "the item comes back whole from the index"
    );
}

#[tokio::test]
async fn a_long_memory_is_read_in_batches_on_sqlite() {
    let db = sqlite().await;
    a_long_memory_is_read_in_batches(db.store.clone()).await;
}

#[tokio::test]
async fn a_long_memory_is_read_in_batches_on_postgres() {
    let Some(db) = postgres().await else { return };
    a_long_memory_is_read_in_batches(db.store.clone()).await;
    db.drop().await;
}

#[tokio::test]
async fn a_long_memory_is_read_in_batches_in_memory() {
    a_long_memory_is_read_in_batches(Arc::new(
        crate::memory::store::in_memory::InMemoryStore::default(),
    ))
    .await;
}

/// Years of a person's other threads are counted, not held: their first turn holds their
/// facts; a thread's own items are read on its first turn. Recall, search and forgetting
/// give the same items and scores as an index that holds everything.
async fn other_threads_are_counted_not_held(store: Arc<dyn MemoryStore>) {
    let writer = memory_on(store.clone(), MemoryConfig::default()).await;
    for (t, prompt, answer) in [
        ("A", "My cat is called Miso", "A lovely name for a cat."),
        (
            "A",
            "We planned the Kyoto trip: Fushimi Inari first, then Arashiyama",
            "A good order; go early to avoid the crowds.",
        ),
        (
            "B",
            "How do I set up a VPN on the home router?",
            "Enable WireGuard in the router settings and add a peer.",
        ),
        (
            "B",
            "The VPN drops every night at three",
            "Check the router's scheduled reboot.",
        ),
    ] {
        writer
            .remember_task(&record(t, prompt, answer))
            .await
            .unwrap();
    }
    let everything = store.load(None).await.unwrap();
    let facts = everything
        .iter()
        .filter(|i| i.kind == ItemKind::Fact)
        .count();
    assert!(facts >= 1 && facts < everything.len(), "{everything:?}");
    // What an index holding every item says (as before threads were held on demand).
    let full = |items: &[MemoryItem]| {
        let mut index = Index::new(items[0].vector.len());
        for item in items {
            index.insert(item.clone());
        }
        index
    };
    let config = MemoryConfig::default();
    let query = |text: &str| (HashEmbedder.embed(text), lexical::analyze(text));

    let watched = Watched::new(store.clone(), false);
    let memory = memory_on(watched.clone(), MemoryConfig::default()).await;
    let cat = memory
        .recall("what is my cat called?", &me(), &thread("C"))
        .await;
    assert!(cat[0].item.text.contains("Miso"), "{cat:?}");
    assert_eq!(memory.len(), everything.len(), "every item is known");
    assert_eq!(memory.held(), facts, "only the facts are held");
    assert_eq!(watched.thread_reads.load(Ordering::SeqCst), 1, "C's own");

    // A's first turn holds A's items, counted once: the same hits and scores as the
    // index that holds everything.
    let ask = "which shrine did we plan to see first in Kyoto?";
    let hits = memory.recall(ask, &me(), &thread("A")).await;
    assert!(hits[0].item.text.contains("Fushimi"), "{hits:?}");
    let (vector, analysis) = query(ask);
    let whole = full(&everything);
    let expected = select(
        &whole,
        &Query::hybrid(&vector, &analysis, config.lexical_weight),
        "A",
        &config,
        config.top_k,
    );
    let got: Vec<(Uuid, f32)> = hits.iter().map(|h| (h.item.id, h.score)).collect();
    let want: Vec<(Uuid, f32)> = expected
        .iter()
        .map(|(s, _)| (whole.entry(s.slot).unwrap().id, s.score))
        .collect();
    assert_eq!(got, want);
    let in_a = everything.iter().filter(|i| i.thread_id == "A").count();
    let facts_elsewhere = everything
        .iter()
        .filter(|i| i.kind == ItemKind::Fact && i.thread_id != "A")
        .count();
    assert_eq!(memory.held(), in_a + facts_elsewhere);
    memory.recall(ask, &me(), &thread("A")).await;
    assert_eq!(
        watched.thread_reads.load(Ordering::SeqCst),
        2,
        "A read once"
    );

    // A search of every thread reads what is not held from the store, scores it as the
    // whole index would, and holds none of it.
    let search = |memory: &Memory, text: &'static str| {
        let memory = memory.clone();
        async move {
            memory
                .search(text, Some(&me()), None, 3)
                .await
                .unwrap()
                .into_iter()
                .map(|h| (h.item, h.score))
                .collect::<Vec<_>>()
        }
    };
    let expect = |items: &[MemoryItem], text: &str| {
        let (vector, analysis) = query(text);
        let whole = full(items);
        whole
            .search(&Query::hybrid(&vector, &analysis, config.lexical_weight), 3)
            .into_iter()
            .map(|s| (whole.item(s.slot).unwrap(), s.score))
            .collect::<Vec<_>>()
    };
    let held = memory.held();
    let vpn = search(&memory, "VPN on the router").await;
    assert!(vpn[0].0.text.contains("VPN"), "{vpn:?}");
    assert_eq!(vpn[0].0.thread_id, "B");
    assert_eq!(vpn, expect(&everything, "VPN on the router"));
    assert_eq!(memory.held(), held, "nothing of B is held for a search");

    // Forgetting an item that is only counted takes its terms out of the counts.
    let night = everything
        .iter()
        .find(|i| i.text.contains("every night"))
        .unwrap()
        .id;
    assert!(memory.forget(night, None).await.unwrap());
    assert_eq!(memory.len(), everything.len() - 1);
    let left = store.load(None).await.unwrap();
    assert_eq!(
        search(&memory, "VPN on the router").await,
        expect(&left, "VPN on the router")
    );
    let gone = memory.forget_thread(None, &thread("B")).await.unwrap();
    let left = store.load(None).await.unwrap();
    assert_eq!(memory.len(), left.len(), "{gone} went");
    assert_eq!(
        search(&memory, "Kyoto trip").await,
        expect(&left, "Kyoto trip")
    );
}

#[tokio::test]
async fn other_threads_are_counted_not_held_on_sqlite() {
    let db = sqlite().await;
    other_threads_are_counted_not_held(db.store.clone()).await;
}

#[tokio::test]
async fn other_threads_are_counted_not_held_on_postgres() {
    let Some(db) = postgres().await else { return };
    other_threads_are_counted_not_held(db.store.clone()).await;
    db.drop().await;
}

#[tokio::test]
async fn other_threads_are_counted_not_held_in_memory() {
    other_threads_are_counted_not_held(Arc::new(InMemoryStore::default())).await;
}

/// A person holds at most `HELD_THREADS` threads: the one talked in least recently is let
/// go (its exchanges counted again, not forgotten) and read again on its next turn, with
/// the same hits and scores as an index that holds everything.
#[tokio::test]
async fn the_threads_held_are_bounded() {
    use crate::memory::load::HELD_THREADS;
    let store: Arc<dyn MemoryStore> = Arc::new(InMemoryStore::default());
    let writer = memory_on(store.clone(), MemoryConfig::default()).await;
    let name = |n: usize| format!("t{n}");
    for n in 0..=HELD_THREADS {
        let prompt = format!("We went through the budget of project number {n} today");
        let answer = format!("Project {n} keeps its budget if the hardware arrives in time.");
        writer
            .remember_task(&record(&name(n), &prompt, &answer))
            .await
            .unwrap();
    }
    let everything = store.load(None).await.unwrap();
    let thread_items = |t: &str| {
        everything
            .iter()
            .filter(|i| i.thread_id == t && i.kind != ItemKind::Fact)
            .count()
    };
    let facts = everything
        .iter()
        .filter(|i| i.kind == ItemKind::Fact)
        .count();

    let watched = Watched::new(store.clone(), false);
    let memory = memory_on(watched.clone(), MemoryConfig::default()).await;
    for n in 0..=HELD_THREADS {
        memory
            .recall("what about the budget?", &me(), &thread(&name(n)))
            .await;
    }
    let held_then = |first: usize| {
        facts
            + (first..first + HELD_THREADS)
                .map(|n| thread_items(&name(n % (HELD_THREADS + 1))))
                .sum::<usize>()
    };
    assert_eq!(memory.held(), held_then(1), "t0 was let go");
    assert_eq!(memory.len(), everything.len(), "and is still counted");

    // t0's next turn reads it again (and lets t1 go), and recalls as if it had never
    // gone: the same hits and scores as an index holding everything.
    let ask = "what did we say about the budget of project number 0?";
    let hits = memory.recall(ask, &me(), &thread("t0")).await;
    assert!(hits[0].item.text.contains("number 0"), "{hits:?}");
    assert_eq!(
        watched.thread_reads.load(Ordering::SeqCst),
        HELD_THREADS + 2
    );
    assert_eq!(memory.held(), held_then(2));
    let mut whole = Index::new(everything[0].vector.len());
    for item in &everything {
        whole.insert(item.clone());
    }
    let config = MemoryConfig::default();
    let (vector, analysis) = (HashEmbedder.embed(ask), lexical::analyze(ask));
    let want: Vec<(Uuid, f32)> = select(
        &whole,
        &Query::hybrid(&vector, &analysis, config.lexical_weight),
        "t0",
        &config,
        config.top_k,
    )
    .iter()
    .map(|(s, _)| (whole.entry(s.slot).unwrap().id, s.score))
    .collect();
    let got: Vec<(Uuid, f32)> = hits.iter().map(|h| (h.item.id, h.score)).collect();
    assert_eq!(got, want);
}
