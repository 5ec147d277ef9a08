//! Facts against the real producer, index and stores: supersession, de-duplication,
//! people and pets kept apart, the model extractor, backfill and the eval sets.

use super::*;

/// A record of `person`'s turn in `thread`, ended `minutes_ago`.
fn told(thread: &str, prompt: &str, minutes_ago: i64) -> TaskRecord {
    let mut r = record(
        thread,
        prompt,
        "That is good to know. Let me know if there is anything else I can help with.",
    );
    r.updated_at = Utc::now() - chrono::Duration::minutes(minutes_ago);
    r
}

fn facts_of(items: &[MemoryItem]) -> Vec<&MemoryItem> {
    items.iter().filter(|i| i.kind == ItemKind::Fact).collect()
}

/// "I moved to Osaka" after "I live in Kashiwa": recall answers Osaka, the older fact is
/// listed, marked with the one that supersedes it; after a restart as before; and when the
/// newer is forgotten, the older is current again.
#[tokio::test]
async fn a_newer_fact_on_the_same_subject_supersedes_the_older() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    let kashiwa = told("A", "I live in Kashiwa.", 60);
    let osaka = told("B", "I moved to Osaka last month!", 30);
    memory.remember_task(&kashiwa).await.unwrap();
    memory.remember_task(&osaka).await.unwrap();
    for memory in [
        memory.clone(),
        memory_on(db.store.clone(), MemoryConfig::default()).await,
    ] {
        let hits = memory
            .recall("Where do I live now?", &me(), &thread("C"))
            .await;
        assert_eq!(
            hits.first().map(|h| h.item.task_id),
            Some(osaka.task_id),
            "{hits:?}"
        );
        assert!(
            hits.iter().all(|h| h.item.task_id != kashiwa.task_id),
            "{hits:?}"
        );
        let listed = memory.list(Some(&me()), None, 50).await.unwrap();
        let facts = facts_of(&listed);
        let old = facts.iter().find(|f| f.task_id == kashiwa.task_id).unwrap();
        let new = facts.iter().find(|f| f.task_id == osaka.task_id).unwrap();
        assert_eq!(
            old.superseded_by,
            Some(new.id),
            "the older stays listed, marked"
        );
        assert_eq!(new.superseded_by, None);
        assert_eq!(old.subject.as_deref(), Some("home"));
    }
    // Forgetting the newer makes the older current again.
    let listed = memory
        .list(Some(&me()), Some(&thread("B")), 50)
        .await
        .unwrap();
    for item in &listed {
        memory.forget(item.id, None).await.unwrap();
    }
    let hits = memory
        .recall("Where do I live now?", &me(), &thread("C"))
        .await;
    assert_eq!(
        hits.first().map(|h| h.item.task_id),
        Some(kashiwa.task_id),
        "{hits:?}"
    );
}

/// The same in Japanese, and across languages: "うちのルーター" and "my router" are one
/// subject. A change that names the earlier fact ("ditched the Nighthawk") supersedes it
/// without naming the subject itself.
#[tokio::test]
async fn supersession_works_in_both_languages_and_by_name() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    let aterm = told("A", "うちのルーターはNECのAtermです。", 90);
    let deco = told("B", "ルーターをTP-LinkのDecoに買い替えました。", 60);
    memory.remember_task(&aterm).await.unwrap();
    memory.remember_task(&deco).await.unwrap();
    let hits = memory
        .recall("今うちで使ってるルーターは？", &me(), &thread("Z"))
        .await;
    assert_eq!(
        hits.first().map(|h| h.item.task_id),
        Some(deco.task_id),
        "{hits:?}"
    );
    assert!(hits.iter().all(|h| h.item.task_id != aterm.task_id));

    let desk = told(
        "C",
        "My desktop has an old GTX 1060 that I'm thinking of replacing.",
        50,
    );
    memory.remember_task(&desk).await.unwrap();
    let car = told("D", "My car is a Mazda 3 hatchback.", 40);
    let swap = told("E", "Finally sold the Mazda and got a Kia EV6!", 20);
    memory.remember_task(&car).await.unwrap();
    memory.remember_task(&swap).await.unwrap();
    let hits = memory
        .recall("What do I drive these days?", &me(), &thread("Z"))
        .await;
    assert_eq!(
        hits.first().map(|h| h.item.task_id),
        Some(swap.task_id),
        "{hits:?}"
    );
    assert!(
        hits.iter().all(|h| h.item.task_id != car.task_id),
        "{hits:?}"
    );
}

/// The same fact told twice, in two threads and two wordings of punctuation, is stored
/// once; told again after a newer fact superseded it, it is current again.
#[tokio::test]
async fn a_fact_told_twice_is_stored_once() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    memory
        .remember_task(&told("A", "私の猫の名前はミケです。", 90))
        .await
        .unwrap();
    memory
        .remember_task(&told("B", "私の猫の名前はミケです！覚えておいてね", 80))
        .await
        .unwrap();
    let listed = memory.list(Some(&me()), None, 50).await.unwrap();
    assert_eq!(facts_of(&listed).len(), 1, "{listed:?}");

    memory
        .remember_task(&told("C", "I live in Kashiwa", 70))
        .await
        .unwrap();
    memory
        .remember_task(&told("D", "I moved to Osaka", 60))
        .await
        .unwrap();
    let back = told("E", "I live in Kashiwa", 10);
    memory.remember_task(&back).await.unwrap();
    let hits = memory.recall("where do I live?", &me(), &thread("Z")).await;
    assert_eq!(
        hits.first().map(|h| h.item.task_id),
        Some(back.task_id),
        "{hits:?}"
    );
}

/// A question about a dog does not get the cat; about the wife's birthday not the
/// person's own; small talk gets nothing.
#[tokio::test]
async fn recall_keeps_pets_people_and_small_talk_apart() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    memory
        .remember_task(&told("A", "私の猫の名前はミケです", 30))
        .await
        .unwrap();
    memory
        .remember_task(&told("B", "My birthday is March 14", 20))
        .await
        .unwrap();
    memory
        .remember_task(&told("C", "My partner keeps asking what I want, lol", 10))
        .await
        .unwrap();
    let z = thread("Z");
    assert!(
        memory
            .recall("うちの犬の名前って何だっけ？", &me(), &z)
            .await
            .is_empty()
    );
    assert!(
        !memory
            .recall("うちの猫の名前って何だっけ？", &me(), &z)
            .await
            .is_empty()
    );
    assert!(
        memory
            .recall("When is my wife's birthday?", &me(), &z)
            .await
            .is_empty()
    );
    assert!(
        !memory
            .recall("When is my birthday?", &me(), &z)
            .await
            .is_empty()
    );
    assert!(memory.recall("lol nice", &me(), &z).await.is_empty());
}

/// Removing items keeps the lexical index right: the moved slot's terms follow it.
#[test]
fn the_lexical_index_follows_removals() {
    use crate::memory::index::{Index, Query};
    let mut index = Index::new(crate::memory::embed::BUILTIN_DIM);
    let item = |text: &str| MemoryItem {
        id: uuid::Uuid::now_v7(),
        person: me(),
        thread_id: "t".into(),
        task_id: TaskId::new(),
        seq: 4,
        kind: ItemKind::Fact,
        subject: None,
        superseded_by: None,
        text: text.into(),
        embedder: HashEmbedder::ID.into(),
        vector: HashEmbedder.embed(text),
        created_at: Utc::now(),
    };
    let (a, b, c) = (
        item("My cat is Mike"),
        item("My bike is a Trek"),
        item("I play the cello"),
    );
    let (ida, idc) = (a.id, c.id);
    for i in [a, b, c] {
        assert!(index.insert(i));
    }
    assert!(
        index.remove(&ida),
        "the last slot (cello) moves into slot 0"
    );
    let analysis = crate::memory::lexical::analyze("cello");
    let vector = HashEmbedder.embed("cello");
    let q = Query {
        lexical_weight: 1.0,
        ..Query::hybrid(&vector, &analysis, 1.0)
    };
    let top = index.search(&q, 1);
    assert_eq!(index.entry(top[0].slot).unwrap().id, idc);
    assert!((top[0].score - 1.0).abs() < 1e-6, "{top:?}");
}

/// A backfill writes each task's memory as its person's, facts included.
#[tokio::test]
async fn backfill_keeps_the_person_of_each_task() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    let alice = Person::parse("alice").unwrap();
    let mut task = record("t", "私の猫の名前はミケです", "かわいい名前ですね。");
    task.person = alice.clone();
    db.tasks
        .insert(new_task(&task))
        .await
        .unwrap()
        .await
        .unwrap();
    let report = memory.backfill(&db.tasks, &mut |_, _| {}).await.unwrap();
    assert_eq!(report.items, 2, "{report:?}");
    let items = db.store.list(None, None, 10).await.unwrap();
    assert!(items.iter().all(|i| i.person == alice), "{items:?}");
    assert!(
        !memory
            .recall("私の猫の名前は？", &alice, &thread("z"))
            .await
            .is_empty()
    );
    assert!(
        memory
            .recall("私の猫の名前は？", &me(), &thread("z"))
            .await
            .is_empty()
    );
}

/// `[memory] extract_model`: the model's facts (normalised, checked) are stored; when it
/// answers nonsense, fails or is late, the rules decide, and the turn is remembered all
/// the same.
#[tokio::test]
async fn a_model_extracts_facts_and_the_rules_step_in_when_it_fails() {
    use crate::config::{BackendConfig, BackendKind, TimeoutsConfig};
    use crate::testkit::fake_llm::{FakeLlm, Script};
    const SMALL: &str = "qwen2.5:0.5b";
    let fake = FakeLlm::builder().model(SMALL).spawn().await.unwrap();
    let backend = crate::backend::Backend::from_config(
        &BackendConfig {
            name: "small".into(),
            kind: BackendKind::Ollama,
            url: fake.base_url(),
            models: None,
            api_key_env: None,
            parallel: 1,
            max_loaded: None,
            keep_alive: Default::default(),
            context_length: None,
            model_context_length: Default::default(),
            max_num_ctx: None,
        },
        &TimeoutsConfig::default(),
    )
    .unwrap();
    let config = MemoryConfig {
        extract_model: Some(SMALL.into()),
        extract_timeout_ms: 300,
        ..Default::default()
    };
    let extractor = crate::memory::extract::ModelExtractor::from_config(&config, &[backend]);
    assert!(extractor.is_some());
    let db = sqlite().await;
    let memory = Memory::open_with(config, db.store.clone(), Embedder::default(), extractor)
        .await
        .unwrap();
    let fact_texts = |items: Vec<MemoryItem>| -> Vec<String> {
        items
            .into_iter()
            .filter(|i| i.kind == ItemKind::Fact)
            .map(|i| i.text)
            .collect()
    };

    fake.set_script(
        SMALL,
        Some(Script::text(
            r#"{"facts": [{"text": "猫の名前はミケ", "subject": "cat name"}]}"#,
        )),
    );
    memory
        .remember_task(&told("A", "私の猫の名前はミケです。覚えておいてね。", 5))
        .await
        .unwrap();
    let a = memory.list(None, Some(&thread("A")), 10).await.unwrap();
    assert_eq!(fact_texts(a.clone()), ["猫の名前はミケ"]);
    assert!(a.iter().any(|i| i.subject.as_deref() == Some("cat name")));
    let asked = fake.requests_to("/api/chat");
    let body = asked.last().unwrap().body.as_ref().unwrap();
    assert_eq!(body["model"], SMALL);
    let messages = body["messages"].to_string();
    assert!(
        messages.contains("<message>") && messages.contains("覚えておいてね"),
        "{messages}"
    );

    // Not JSON: the rules.
    fake.set_script(SMALL, Some(Script::text("Sorry, I can't help with that.")));
    memory
        .remember_task(&told("B", "うちの犬はポチです。", 4))
        .await
        .unwrap();
    let b = memory.list(None, Some(&thread("B")), 10).await.unwrap();
    assert_eq!(fact_texts(b), ["うちの犬はポチです"]);

    // Late: the rules, within the deadline.
    fake.update_knobs(|k| k.latency = std::time::Duration::from_secs(5));
    let started = std::time::Instant::now();
    memory
        .remember_task(&told("C", "I live in Kashiwa.", 3))
        .await
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    let c = memory.list(None, Some(&thread("C")), 10).await.unwrap();
    assert_eq!(fact_texts(c), ["I live in Kashiwa"]);
}

/// The two sets written without sight of the implementation (`memory-holdout.jsonl`,
/// looked at once for mechanism bugs; `memory-fresh.jsonl`, never) are far from the tuned
/// set's numbers: these are floors at today's level, so that a change that makes recall
/// generalise worse fails here, not in a household.
#[tokio::test]
async fn the_unseen_eval_sets_do_not_regress() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, hit1, hitk, quiet) in [
        ("eval/memory-holdout.jsonl", 0.75, 0.78, 0.88),
        ("eval/memory-fresh.jsonl", 0.60, 0.66, 0.85),
    ] {
        let cases = eval::load(&root.join(file)).unwrap();
        let report = eval::run_cases(&cases, &MemoryConfig::default(), &Embedder::default()).await;
        eprintln!("{file}: {report}");
        assert!(report.hit_at_1_rate() >= hit1, "{file}: {report}");
        assert!(report.hit_at_k_rate() >= hitk, "{file}: {report}");
        assert!(report.quiet_rate() >= quiet, "{file}: {report}");
    }
}

/// Turns that finish at once (the same question asked again and again in one chat) store
/// the exchange and its fact once, not once per turn.
#[tokio::test]
async fn the_same_exchange_finishing_at_once_is_stored_once() {
    let db = sqlite().await;
    let memory = memory_on(db.store.clone(), MemoryConfig::default()).await;
    let turns: Vec<TaskRecord> = (0..32)
        .map(|_| record("A", "I live in Kashiwa.", "A nice city near Tokyo."))
        .collect();
    let written: usize = futures::future::join_all(turns.iter().map(|t| memory.remember_task(t)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .sum();
    assert_eq!(written, 2, "one exchange and one fact");
    assert_eq!(db.store.list(None, None, 100).await.unwrap().len(), 2);
}

/// A superseded fact is never recalled, so it is counted, not held: after three homes
/// only the newest is held; the list still marks the older two with it, and forgetting it
/// makes the one before current (and held) again, as the store says, not the oldest.
async fn superseded_facts_are_counted_not_held(store: Arc<dyn MemoryStore>) {
    let writer = memory_on(store.clone(), MemoryConfig::default()).await;
    let kashiwa = told("A", "I live in Kashiwa.", 90);
    let osaka = told("B", "I moved to Osaka last month!", 60);
    let kyoto = told("C", "I moved to Kyoto last week!", 30);
    for t in [&kashiwa, &osaka, &kyoto] {
        writer.remember_task(t).await.unwrap();
    }
    let stored = store.load(None).await.unwrap();
    let homes: Vec<&MemoryItem> = facts_of(&stored)
        .into_iter()
        .filter(|f| f.subject.as_deref() == Some("home"))
        .collect();
    assert_eq!(homes.len(), 3, "{stored:?}");
    let fact_of = |task| homes.iter().find(|f| f.task_id == task).unwrap().id;
    let (kashiwa_fact, osaka_fact, kyoto_fact) = (
        fact_of(kashiwa.task_id),
        fact_of(osaka.task_id),
        fact_of(kyoto.task_id),
    );
    let facts = facts_of(&stored).len();

    let memory = memory_on(store.clone(), MemoryConfig::default()).await;
    let ask = "Where do I live now?";
    let hits = memory.recall(ask, &me(), &thread("D")).await;
    assert_eq!(
        hits.first().map(|h| h.item.id),
        Some(kyoto_fact),
        "{hits:?}"
    );
    assert_eq!(memory.held(), facts - 2, "the two older homes are not held");
    assert_eq!(memory.len(), stored.len(), "but counted");
    let listed = memory.list(Some(&me()), None, 50).await.unwrap();
    for old in [kashiwa_fact, osaka_fact] {
        let item = listed.iter().find(|i| i.id == old).unwrap();
        assert_eq!(item.superseded_by, Some(kyoto_fact), "{item:?}");
    }

    assert!(memory.forget(kyoto_fact, None).await.unwrap());
    let hits = memory.recall(ask, &me(), &thread("D")).await;
    assert_eq!(
        hits.first().map(|h| h.item.id),
        Some(osaka_fact),
        "{hits:?}"
    );
    assert_eq!(
        memory.held(),
        facts - 2,
        "Osaka held again, Kashiwa still counted"
    );
    let listed = memory.list(Some(&me()), None, 50).await.unwrap();
    let kashiwa_item = listed.iter().find(|i| i.id == kashiwa_fact).unwrap();
    assert_eq!(kashiwa_item.superseded_by, Some(osaka_fact));
}

#[tokio::test]
async fn superseded_facts_are_counted_not_held_on_sqlite() {
    let db = sqlite().await;
    superseded_facts_are_counted_not_held(db.store.clone()).await;
}

#[tokio::test]
async fn superseded_facts_are_counted_not_held_on_postgres() {
    let Some(db) = postgres().await else { return };
    superseded_facts_are_counted_not_held(db.store.clone()).await;
    db.drop().await;
}

#[tokio::test]
async fn superseded_facts_are_counted_not_held_in_memory() {
    superseded_facts_are_counted_not_held(Arc::new(
        crate::memory::store::in_memory::InMemoryStore::default(),
    ))
    .await;
}
