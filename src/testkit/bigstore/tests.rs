use std::sync::Arc;

use super::*;
use crate::domain::{Person, TaskStatus, ThreadId};
use crate::memory::Memory;
use crate::memory::embed::Embedder;
use crate::memory::store::sqlite::SqliteMemoryStore;
use crate::store::TaskStore;
use crate::store::sqlite::SqliteStore;

fn plan() -> Plan {
    Plan {
        tasks: 3_000,
        memories: 600,
        people: 4,
        years: 2,
        seed: 5,
    }
}

#[tokio::test]
async fn a_seeded_store_holds_the_plan_and_memory_loads_and_recalls_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("big.db");
    let (report, _) = seed_file(&path, &plan()).await.expect("seeded");
    assert_eq!((report.tasks, report.memories), (3_000, 600));
    assert!(report.facts > 0 && report.threads > 4, "{report:?}");

    let store = SqliteStore::open(&path).await.expect("opens");
    let done = store.count(TaskStatus::Done).await.expect("counts");
    assert!(done > 2_500 && done < 3_000, "{done} done");
    assert_eq!(store.unfinished().await.expect("reads").len(), 0);

    let memory = Memory::open(
        Default::default(),
        Arc::new(SqliteMemoryStore::new(store.pool().clone())),
        Embedder::default(),
    )
    .await
    .expect("memory loads");
    let person = Person::default_person();
    let items = memory
        .list(Some(&person), None, 10_000)
        .await
        .expect("lists");
    assert!(
        items.len() > 60,
        "the default person holds {} items",
        items.len()
    );
    // A fact the seed states is recalled in a thread that never mentioned it.
    let fact = items
        .iter()
        .find(|i| i.kind == ItemKind::Fact)
        .expect("a fact");
    let hits = memory
        .recall(
            &fact.text,
            &person,
            &ThreadId::parse("elsewhere").expect("thread"),
        )
        .await;
    assert!(
        hits.iter().any(|h| h.item.kind == ItemKind::Fact),
        "{hits:?}"
    );
}

#[tokio::test]
async fn seeding_over_an_existing_file_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("big.db");
    seed_file(&path, &plan()).await.expect("seeded");
    let before = std::fs::metadata(&path).expect("file").len();
    let err = seed_file(&path, &plan()).await.expect_err("refused");
    assert!(err.to_string().contains("exists"), "{err}");
    assert_eq!(std::fs::metadata(&path).expect("file").len(), before);
}
