//! Memory as the service uses it, on real SQLite (and PostgreSQL when `DATABASE_URL` is
//! set): exclusions, scope rules, backfill idempotency, forgetting, the context block and
//! the shipped eval.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::Utc;

use super::embed::{Embedder, HashEmbedder};
use super::store::ItemKind;
use super::store::postgres::PostgresMemoryStore;
use super::store::sqlite::SqliteMemoryStore;
use super::*;
use crate::domain::{
    Domain, InternalTask, Lane, ModelName, Person, TaskId, TaskStatus, ThreadId, WorkerName,
};
use crate::lang::Lang;
use crate::store::postgres::PostgresStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{NewTask, TaskRecord, TaskStore};

pub(super) fn record(thread: &str, prompt: &str, response: &str) -> TaskRecord {
    TaskRecord {
        task_id: TaskId::new(),
        created_at: Utc::now(),
        updated_at: Utc::now(),
        person: Person::default(),
        thread_id: ThreadId::parse(thread).unwrap(),
        prompt: prompt.into(),
        domain: Domain::general(),
        model: ModelName::parse("qwen2.5:7b").unwrap(),
        worker_id: Some(WorkerName::parse("moon").unwrap()),
        queue: Lane::parse("tasks:llm:qwen2.5:7b").unwrap(),
        status: TaskStatus::Done,
        response: Some(response.into()),
        error: None,
        internal_task: None,
        web_search: false,
        fallback_used: false,
        fallback_reason: None,
        reasons: vec![],
        job: None,
        attempts: 1,
        queue_wait_ms: None,
        first_token_ms: None,
        total_ms: None,
        prompt_tokens: None,
        completion_tokens: None,
        remember: true,
        priority: crate::domain::Priority::Interactive,
        context: Default::default(),
        conversation: None,
    }
}

fn new_task(r: &TaskRecord) -> NewTask {
    NewTask {
        task_id: r.task_id,
        created_at: r.created_at,
        person: r.person.clone(),
        thread_id: r.thread_id.clone(),
        prompt: r.prompt.clone(),
        domain: r.domain.clone(),
        model: r.model.clone(),
        queue: r.queue.clone(),
        status: r.status,
        response: r.response.clone(),
        worker_id: r.worker_id.clone(),
        attempts: r.attempts,
        internal_task: r
            .internal_task
            .as_ref()
            .map(|_| InternalTask::TitleGeneration),
        web_search: r.web_search,
        reasons: vec![],
        job: None,
        remember: r.remember,
        priority: r.priority,
        context: r.context,
        conversation: None,
    }
}

fn thread(t: &str) -> ThreadId {
    ThreadId::parse(t).unwrap()
}

/// The one person of a household without keys, who owns every record made here.
fn me() -> Person {
    Person::default()
}

struct Sqlite {
    _dir: tempfile::TempDir,
    tasks: SqliteStore,
    store: Arc<SqliteMemoryStore>,
}

async fn sqlite() -> Sqlite {
    let dir = tempfile::tempdir().unwrap();
    let tasks = SqliteStore::open(&dir.path().join("c.db")).await.unwrap();
    let store = Arc::new(SqliteMemoryStore::new(tasks.pool().clone()));
    Sqlite {
        _dir: dir,
        tasks,
        store,
    }
}

/// Both stores in a schema of their own on `$DATABASE_URL`; `None` (with a note) when it
/// is not set.
struct Postgres {
    schema: String,
    tasks: PostgresStore,
    store: Arc<PostgresMemoryStore>,
}

async fn postgres() -> Option<Postgres> {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("note: DATABASE_URL is not set; PostgreSQL test skipped");
        return None;
    };
    let schema = format!("test_{}", uuid::Uuid::now_v7().simple());
    let tasks = PostgresStore::connect_with_schema(&url, &schema)
        .await
        .unwrap();
    let store = Arc::new(PostgresMemoryStore::new(tasks.pool().clone()));
    Some(Postgres {
        schema,
        tasks,
        store,
    })
}

impl Postgres {
    async fn drop(self) {
        self.tasks.drop_schema(&self.schema).await.unwrap();
    }
}

async fn memory_on(store: Arc<dyn MemoryStore>, config: MemoryConfig) -> Memory {
    Memory::open(config, store, Embedder::default())
        .await
        .unwrap()
}

/// Every kind of task that must never become memory, and one that must.
fn excluded_and_kept() -> (Vec<TaskRecord>, TaskRecord) {
    let mut web = record(
        "t",
        "今日の千葉県柏市の天気を教えて",
        "柏市は晴れ時々曇、最高31℃",
    );
    web.queue = Lane::Web;
    web.web_search = true;
    let mut rag = record("t", "社内規定の休暇日数は？", "規定では20日です");
    rag.queue = Lane::Rag;
    let mut internal = record("t", "### Task: Generate a title", "{\"title\":\"猫\"}");
    internal.internal_task = Some(InternalTask::TitleGeneration);
    let mut utility = record("t", "tags please", "[\"cats\"]");
    utility.queue = Lane::Utility;
    let mut failed = record("t", "私の猫の名前はタマです", "");
    failed.status = TaskStatus::Failed;
    failed.response = None;
    let mut opted_out = record("t", "私の暗証番号は1234です", "覚えておきます");
    opted_out.remember = false;
    let mut searched = record("t", "latest news", "Here is the news");
    searched.web_search = true;
    let empty = record("t", "hello", "   ");
    let mut tools = record("t", "weather?", "[tool_calls] [{\"name\":\"w\"}]");
    tools.response = Some("[tool_calls] [{\"name\":\"w\"}]".into());
    let kept = record(
        "t",
        "私の猫の名前はミケです",
        "ミケちゃん、かわいい名前ですね。",
    );
    (
        vec![
            web, rag, internal, utility, failed, opted_out, searched, empty, tools,
        ],
        kept,
    )
}

#[tokio::test]
async fn web_rag_internal_failed_and_opted_out_tasks_are_never_written() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    let (excluded, kept) = excluded_and_kept();
    for task in &excluded {
        assert!(eligibility(task).is_err(), "{}", task.prompt);
        assert_eq!(
            memory.remember_task(task).await.unwrap(),
            0,
            "{}",
            task.prompt
        );
    }
    assert!(db.store.list(None, None, 100).await.unwrap().is_empty());
    assert!(memory.is_empty());
    assert_eq!(
        memory.remember_task(&kept).await.unwrap(),
        2,
        "the exchange and the fact it states"
    );
    assert_eq!(memory.len(), 2);
    // Disabled memory writes nothing, even for a task that qualifies.
    let off = MemoryConfig {
        enabled: false,
        ..Default::default()
    };
    let disabled = memory_on(db.store.clone(), off).await;
    let other = record("u", "I live in Lisbon", "Nice city.");
    assert_eq!(disabled.remember_task(&other).await.unwrap(), 0);
    assert!(
        disabled
            .recall("where do I live?", &me(), &thread("u"))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_cat_named_in_thread_a_is_recalled_in_thread_b() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    let noise = [
        ("A", "明日の会議は何時からですか", "10時からです。"),
        ("C", "カレーのレシピを教えて", "玉ねぎを炒めて…"),
        ("D", "What is the capital of Portugal?", "Lisbon."),
    ];
    for (t, p, a) in noise {
        memory.remember_task(&record(t, p, a)).await.unwrap();
    }
    let cat = record(
        "A",
        "私の猫の名前はミケです",
        "ミケちゃん、かわいい名前ですね。",
    );
    memory.remember_task(&cat).await.unwrap();
    let hits = memory
        .recall("私の猫の名前は何でしたっけ？", &me(), &thread("B"))
        .await;
    assert_eq!(
        hits.first().map(|h| h.item.task_id),
        Some(cat.task_id),
        "{hits:?}"
    );
    assert!(!hits[0].same_thread);
    assert_eq!(hits.len(), 1, "one task, one memory: {hits:?}");
    assert_eq!(hits[0].item.kind, ItemKind::Fact);
    assert_eq!(hits[0].item.text, "私の猫の名前はミケです");
    let block = memory.context_block(&hits, Lang::Ja).unwrap();
    assert!(
        block.ends_with("\n<memory>\n- [たった今] 私の猫の名前はミケです\n</memory>"),
        "{block}"
    );
    let ready = memory
        .context_for("私の猫の名前は何でしたっけ？", &me(), &thread("B"), &[])
        .await;
    assert_eq!(ready.as_deref(), Some(block.as_str()));
    assert_eq!(
        memory
            .context_for("Explain quantum entanglement", &me(), &thread("B"), &[])
            .await,
        None
    );
    // Another process's writes show after a reload.
    let other = memory_on(db.store.clone(), MemoryConfig::default()).await;
    other
        .remember_task(&record("E", "I play the cello", "Lovely."))
        .await
        .unwrap();
    // Three questions (one item each), two statements (their exchange and their fact).
    assert_eq!(memory.reload().await.unwrap(), 7);
    assert_eq!(memory.len(), 7);
    // After a restart the index is read from the store on the person's first turn.
    let reopened = memory_on(db.store.clone(), MemoryConfig::default()).await;
    assert_eq!(reopened.len(), 0, "nothing read at start");
    let again = reopened
        .recall("私の猫の名前は何でしたっけ？", &me(), &thread("B"))
        .await;
    assert_eq!(again.first().map(|h| h.item.id), Some(hits[0].item.id));
    assert_eq!(reopened.len(), memory.len());
}

#[tokio::test]
async fn a_repeated_exchange_in_a_thread_is_stored_once() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    let first = memory
        .remember_task(&record("A", "hello", "hi there"))
        .await
        .unwrap();
    assert!(first > 0);
    assert_eq!(
        memory
            .remember_task(&record("A", "hello", "hi there"))
            .await
            .unwrap(),
        0
    );
    assert_eq!(memory.len(), first);
    // Another thread, or another answer, is a new memory.
    assert!(
        memory
            .remember_task(&record("B", "hello", "hi there"))
            .await
            .unwrap()
            > 0
    );
    assert!(
        memory
            .remember_task(&record("A", "hello", "good morning"))
            .await
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn scope_rules_thread_global_and_auto() {
    let db = sqlite().await;
    let config = |scope, cross| MemoryConfig {
        scope,
        cross_thread_min_score: cross,
        ..Default::default()
    };
    let memory = memory_on(db.store.clone(), config(Scope::Auto, 0.3)).await;
    let own = record("A", "私の犬の名前はポチです", "ポチ、いい名前ですね。");
    let other = record("B", "私の犬の名前はポチです", "ポチ、いい名前ですね。");
    let weak = record("C", "犬の散歩は一日二回です", "健康的ですね。");
    for r in [&own, &other, &weak] {
        memory.remember_task(r).await.unwrap();
    }
    let ask = "私の犬の名前は？";
    let tasks = |hits: Vec<MemoryHit>| hits.into_iter().map(|h| h.item.task_id).collect::<Vec<_>>();
    let store: Arc<dyn MemoryStore> = db.store.clone();

    let scoped = memory_on(store.clone(), config(Scope::Thread, 0.3)).await;
    assert_eq!(
        tasks(scoped.recall(ask, &me(), &thread("A")).await),
        vec![own.task_id]
    );
    assert!(scoped.recall(ask, &me(), &thread("Z")).await.is_empty());

    // From another thread only facts are recalled, and B's fact is A's told again:
    // stored once, so B's turn is in memory as its exchange alone.
    let global = memory_on(store.clone(), config(Scope::Global, 0.3)).await;
    let found = tasks(global.recall(ask, &me(), &thread("Z")).await);
    assert!(
        found.contains(&own.task_id) && !found.contains(&other.task_id),
        "{found:?}"
    );

    // Auto: the thread's own memory first; another thread's exchange never.
    let auto = tasks(memory.recall(ask, &me(), &thread("A")).await);
    assert_eq!(auto.first(), Some(&own.task_id));
    assert!(!auto.contains(&other.task_id), "{auto:?}");
    let strict = memory_on(store.clone(), config(Scope::Auto, 0.99)).await;
    assert_eq!(
        tasks(strict.recall(ask, &me(), &thread("A")).await),
        vec![own.task_id]
    );
    let lenient = memory_on(store, config(Scope::Auto, -1.0)).await;
    assert_eq!(
        tasks(lenient.recall(ask, &me(), &thread("A")).await),
        vec![own.task_id, weak.task_id],
        "the thread's own, then C's fact; never B's exchange"
    );
}

/// Backfill twice: the second run adds nothing; excluded tasks are never written.
async fn backfill_is_idempotent(tasks: &dyn TaskStore, store: Arc<dyn MemoryStore>) {
    let memory = memory_on(store.clone(), MemoryConfig::default()).await;
    let (excluded, kept) = excluded_and_kept();
    let long = "長い答えです。".repeat(300);
    let also = record("t2", "長い話をして", &long);
    for t in excluded.iter().chain([&kept, &also]) {
        tasks.insert(new_task(t)).await.unwrap().await.unwrap();
    }
    let mut calls = Vec::new();
    // Two tasks a page: every page boundary is crossed.
    let first = memory
        .backfill_in_pages(tasks, 2, &mut |done, total| calls.push((done, total)))
        .await
        .unwrap();
    assert_eq!(first.remembered, 2, "{first:?}");
    assert_eq!(
        first.items,
        2 + 4,
        "a fact makes two items, a long answer four: {first:?}"
    );
    assert_eq!(first.scanned, calls.len());
    assert_eq!(
        first.scanned,
        excluded
            .iter()
            .filter(|t| t.status == TaskStatus::Done)
            .count()
            + 2,
        "every finished task once: {first:?}"
    );
    assert_eq!(calls.last(), Some(&(first.scanned, first.scanned)));
    let stored = store.list(None, None, 100).await.unwrap();
    assert_eq!(stored.len(), 6);
    assert!(
        stored
            .iter()
            .all(|i| i.task_id == kept.task_id || i.task_id == also.task_id)
    );
    let second = memory.backfill(tasks, &mut |_, _| {}).await.unwrap();
    assert_eq!(
        (second.remembered, second.items, second.already),
        (0, 0, 2),
        "{second:?}"
    );
    assert_eq!(store.list(None, None, 100).await.unwrap().len(), 6);
    // The producer writing a task the backfill already wrote adds nothing either.
    assert_eq!(memory.remember_task(&kept).await.unwrap(), 0);
    assert_eq!(memory.len(), 6);

    // Forgotten memories stay forgotten, even through a backfill.
    for item in stored.iter().filter(|i| i.task_id == kept.task_id) {
        assert!(memory.forget(item.id, None).await.unwrap());
        assert!(!memory.forget(item.id, None).await.unwrap());
    }
    assert_eq!(memory.forget_thread(None, &thread("t2")).await.unwrap(), 4);
    assert!(memory.is_empty());
    let third = memory.backfill(tasks, &mut |_, _| {}).await.unwrap();
    assert_eq!(third.items, 0, "{third:?}");
    assert!(store.list(None, None, 100).await.unwrap().is_empty());
    assert!(!tasks.get(kept.task_id).await.unwrap().unwrap().remember);
}

#[tokio::test]
async fn backfill_is_idempotent_on_sqlite() {
    let db = sqlite().await;
    backfill_is_idempotent(&db.tasks, db.store.clone()).await;
}

#[tokio::test]
async fn backfill_is_idempotent_on_postgres() {
    let Some(db) = postgres().await else { return };
    backfill_is_idempotent(&db.tasks, db.store.clone()).await;
    db.drop().await;
}

/// Each person's memory is theirs: another person's recall, search, listing and forgetting
/// never reach it, after a reload from the store as before it; an admin (`None`) reaches
/// everyone's.
async fn people_keep_their_own_memories(store: Arc<dyn MemoryStore>) {
    let u1 = Person::parse("webui/u1").unwrap();
    let u2 = Person::parse("webui/u2").unwrap();
    let memory = memory_on(store.clone(), MemoryConfig::default()).await;
    let mut pin = record("c1", "Remember this: my bank PIN is 4321", "Noted, 4321.");
    pin.person = u1.clone();
    memory.remember_task(&pin).await.unwrap();
    let mut own = record("c2", "I like green tea", "A fine choice.");
    own.person = u2.clone();
    memory.remember_task(&own).await.unwrap();
    let ask = "What is my bank PIN?";
    for memory in [
        memory.clone(),
        memory_on(store, MemoryConfig::default()).await,
    ] {
        let hits = memory.recall(ask, &u1, &thread("c9")).await;
        assert_eq!(hits.first().map(|h| h.item.task_id), Some(pin.task_id));
        // The same thread id from the other person changes nothing either.
        for t in ["c9", "c1"] {
            let theirs = memory.recall(ask, &u2, &thread(t)).await;
            assert!(theirs.iter().all(|h| h.item.person == u2), "{theirs:?}");
            assert!(
                memory
                    .context_for(ask, &u2, &thread(t), &[])
                    .await
                    .is_none_or(|c| !c.contains("4321"))
            );
        }
        let found = memory
            .search("bank PIN 4321", Some(&u2), None, 10)
            .await
            .unwrap();
        assert!(found.iter().all(|h| h.item.person == u2), "{found:?}");
        let listed = memory.list(Some(&u2), None, 10).await.unwrap();
        assert!(listed.iter().all(|i| i.person == u2) && !listed.is_empty());
        let everyone = memory
            .search("bank PIN 4321", None, None, 10)
            .await
            .unwrap();
        assert_eq!(everyone.first().map(|h| h.item.task_id), Some(pin.task_id));
    }
    // u2 cannot forget u1's item or thread; u1 can.
    let item = memory.list(Some(&u1), None, 10).await.unwrap()[0].id;
    assert!(!memory.forget(item, Some(&u2)).await.unwrap());
    assert_eq!(
        memory
            .forget_thread(Some(&u2), &thread("c1"))
            .await
            .unwrap(),
        0
    );
    assert!(!memory.recall(ask, &u1, &thread("c9")).await.is_empty());
    assert_eq!(
        memory
            .forget_thread(Some(&u1), &thread("c1"))
            .await
            .unwrap(),
        2,
        "the exchange and its fact"
    );
    assert!(memory.recall(ask, &u1, &thread("c9")).await.is_empty());
}

#[tokio::test]
async fn people_keep_their_own_memories_on_sqlite() {
    let db = sqlite().await;
    people_keep_their_own_memories(db.store.clone()).await;
}

#[tokio::test]
async fn people_keep_their_own_memories_on_postgres() {
    let Some(db) = postgres().await else { return };
    people_keep_their_own_memories(db.store.clone()).await;
    db.drop().await;
}

/// In cluster mode the router picks up what worker processes remembered by reading
/// only the new items. One stamped before the refresh window (a worker whose clock is
/// behind) and a deletion by another process show at the next full reload.
async fn refresh_reads_what_others_wrote_since(store: Arc<dyn MemoryStore>) {
    let router = memory_on(store.clone(), MemoryConfig::default()).await;
    let worker = memory_on(store.clone(), MemoryConfig::default()).await;
    worker
        .remember_task(&record("A", "I play the cello", "Lovely."))
        .await
        .unwrap();
    assert_eq!(
        router.refresh().await.unwrap(),
        2,
        "from empty: everything (an exchange and its fact)"
    );
    worker
        .remember_task(&record("B", "My dog is called Rex", "Good dog."))
        .await
        .unwrap();
    assert_eq!(router.refresh().await.unwrap(), 2);
    assert_eq!(
        router.refresh().await.unwrap(),
        0,
        "nothing new, nothing added twice"
    );
    assert_eq!(router.len(), 4);
    assert!(
        router
            .context_for("what is my dog called?", &me(), &thread("B"), &[])
            .await
            .is_some()
    );

    let mut behind = record("C", "I live in Kashiwa", "A nice city.");
    behind.updated_at = Utc::now() - super::service::REFRESH_OVERLAP - chrono::Duration::minutes(1);
    worker.remember_task(&behind).await.unwrap();
    let gone = store.list(None, Some("A"), 10).await.unwrap();
    assert_eq!(gone.len(), 2);
    for item in &gone {
        assert!(worker.forget(item.id, None).await.unwrap());
    }
    assert_eq!(router.refresh().await.unwrap(), 0, "outside the window");
    assert_eq!(router.len(), 4, "the deletion is not seen by a refresh");
    assert_eq!(router.reload().await.unwrap(), 4, "B and C");
    let threads: HashSet<String> = router
        .list(None, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.thread_id)
        .collect();
    assert_eq!(threads, HashSet::from(["B".to_owned(), "C".to_owned()]));
    assert!(
        router
            .context_for("where do I live?", &me(), &thread("C"), &[])
            .await
            .is_some()
    );
}

#[tokio::test]
async fn refresh_reads_what_others_wrote_since_on_sqlite() {
    let db = sqlite().await;
    refresh_reads_what_others_wrote_since(db.store.clone()).await;
}

#[tokio::test]
async fn refresh_reads_what_others_wrote_since_on_postgres() {
    let Some(db) = postgres().await else { return };
    refresh_reads_what_others_wrote_since(db.store.clone()).await;
    db.drop().await;
}

#[tokio::test]
async fn list_and_search_show_items_without_thresholds() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    memory
        .remember_task(&record("A", "I play the violin", "Lovely."))
        .await
        .unwrap();
    memory
        .remember_task(&record("B", "My bike is red", "Nice."))
        .await
        .unwrap();
    let all = memory.list(None, None, 10).await.unwrap();
    assert_eq!(all.len(), 4, "two exchanges and their facts");
    assert!(
        all.iter().all(|i| i.vector.is_empty()),
        "vectors stay inside"
    );
    assert_eq!(
        memory
            .list(None, Some(&thread("B")), 10)
            .await
            .unwrap()
            .len(),
        2
    );
    let hits = memory
        .search("violin lessons", None, None, 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 4, "no threshold: every item");
    assert!(hits[0].item.text.contains("violin"));
    assert_eq!(
        memory
            .search("violin", None, Some(&thread("B")), 5)
            .await
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn condensing_keeps_the_prompt_and_splits_long_answers() {
    let items = condense("猫の名前は\n  ミケ", "かわいい。とても。");
    assert_eq!(
        items,
        vec![Piece {
            seq: 0,
            kind: ItemKind::Exchange,
            text: "猫の名前は ミケ\nかわいい。とても。".to_owned(),
            subject: None,
        }]
    );
    let long = condense("q", &"This is a sentence. ".repeat(200));
    assert_eq!(long.len(), 4);
    assert!(
        long[1..]
            .iter()
            .all(|p| p.kind == ItemKind::Answer && p.text.ends_with('.'))
    );
    assert!(long.iter().all(|p| p.text.chars().count() <= 402));
    assert_eq!(long.iter().map(|p| p.seq).collect::<Vec<_>>(), [0, 1, 2, 3]);
}

proptest::proptest! {
    /// Flattening by bytes (ASCII) and by characters gives what joining
    /// `split_whitespace` gives.
    #[test]
    fn flattening_is_joining_the_words(text in "[ -~\\t\\n\\r\\x0b\\x0c]{0,200}|\\PC{0,80}") {
        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
        proptest::prop_assert_eq!(crate::memory::producer::flatten(&text), joined);
    }
}

#[test]
fn config_defaults_validation_and_toml() {
    let d = MemoryConfig::default();
    assert!(d.enabled && d.scope == Scope::Auto && d.top_k == 3);
    assert!(d.validate().is_empty());
    let bad = MemoryConfig {
        top_k: 0,
        min_score: 2.0,
        max_context_chars: 1,
        embedding_backend: Some("bad name!".into()),
        ..Default::default()
    };
    assert_eq!(bad.validate().len(), 5, "{:?}", bad.validate());
    let bad = MemoryConfig {
        lexical_weight: 1.5,
        extract_backend: Some("small".into()),
        extract_timeout_ms: 10,
        ..Default::default()
    };
    let problems = bad.validate();
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("memory.extract_backend: set only together"))
    );
    let toml = "[memory]\nscope = \"thread\"\ntop_k = 5\nembedding_model = \"nomic-embed-text\"\n\
                lexical_weight = 0.5\nopenwebui_memory = \"defer\"\nextract_model = \"qwen2.5:0.5b\"\n\
                extract_timeout_ms = 2000\n";
    let c = crate::config::load_str(toml, Vec::new()).unwrap();
    assert_eq!(c.memory.scope, Scope::Thread);
    assert_eq!(c.memory.top_k, 5);
    assert_eq!(c.memory.lexical_weight, 0.5);
    assert_eq!(c.memory.openwebui_memory, OpenWebUiMemory::Defer);
    assert_eq!(c.memory.extract_model.as_deref(), Some("qwen2.5:0.5b"));
    assert_eq!(c.memory.extract_timeout_ms, 2000);
    let err = crate::config::load_str("[memory]\nscope = \"everywhere\"\ntop_k = 0\n", Vec::new());
    assert!(err.is_err());
}

#[tokio::test]
async fn the_shipped_eval_meets_its_thresholds() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/memory.jsonl");
    let cases = eval::load(&path).unwrap();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    assert!(cases.iter().any(|c| c.query.text.contains("この市")));
    let report = eval::run_cases(&cases, &MemoryConfig::default(), &Embedder::default()).await;
    eprintln!("memory eval: {report}");
    // The issue's targets with the built-in embedder and the default settings.
    assert!(report.hit_at_1_rate() >= 0.90, "{report}");
    assert!(report.hit_at_k_rate() >= 0.95, "{report}");
    assert!(report.quiet_rate() >= 0.95, "{report}");
    assert!(
        report.positives >= 130 && report.negatives >= 70,
        "{report}"
    );
    for must in [
        "ja-cat-mike",
        "ja-seed-kono-shi",
        "ja-kono-shi-with-other-city",
    ] {
        assert!(!report.failed.iter().any(|f| f == must), "{must}: {report}");
    }
}

#[test]
fn eval_files_with_mistakes_name_the_line() {
    let ok = r#"{"id":"a","exchanges":[{"thread":"A","user":"u","assistant":"a"}],"query":{"thread":"A","text":"u"},"expect":{"exchange":0}}"#;
    assert_eq!(
        eval::parse(&format!("# comment\n\n{ok}\n")).unwrap().len(),
        1
    );
    let out_of_range = ok.replace("\"exchange\":0", "\"exchange\":3");
    assert!(eval::parse(&out_of_range).unwrap_err().contains("line 1"));
    let unknown = ok.replace("\"id\"", "\"idx\"");
    assert!(
        eval::parse(&format!("{ok}\n{unknown}"))
            .unwrap_err()
            .starts_with("line 2")
    );
}

mod context;
mod facts;
mod load;
