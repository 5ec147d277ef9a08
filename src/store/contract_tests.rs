//! Behaviour every task store must have, run against each implementation by its tests.

use chrono::Utc;

use super::{Claim, ContextNote, NewTask, TaskOutcome, TaskStore};
use crate::domain::{TaskId, TaskStatus, WorkerName};
use crate::testkit::samples::sample_task as new_task;

pub(crate) fn done(response: &str) -> TaskOutcome {
    let mut o = TaskOutcome::done(Utc::now());
    o.response = Some(response.into());
    o.total_ms = Some(12);
    o
}

/// queued → running → done, idempotent against duplicate deliveries; returns the task.
pub(crate) async fn lifecycle(s: &dyn TaskStore) -> NewTask {
    let mut t = new_task("こんにちは");
    t.context = ContextNote {
        history_dropped: Some(2),
        memory_dropped: Some(1),
        estimated_prompt_tokens: Some(5100),
        num_ctx: None,
    };
    t.conversation = Some(r#"[{"role":"user","content":"こんにちは"}]"#.into());
    s.insert(t.clone()).await.unwrap().await.unwrap();
    let w = WorkerName::parse("moon").unwrap();
    assert_eq!(
        s.claim(t.task_id, &w, Utc::now()).await.unwrap(),
        Claim::Claimed
    );
    let got = s.get(t.task_id).await.unwrap().unwrap();
    assert_eq!(got.status, TaskStatus::Running);
    assert_eq!(got.attempts, 1);
    let outcome = TaskOutcome {
        num_ctx: Some(8192),
        ..done("answer")
    };
    assert!(s.finish(t.task_id, &outcome).await.unwrap().await.unwrap());
    // A second finish (duplicate delivery) changes nothing.
    assert!(
        !s.finish(t.task_id, &TaskOutcome::failed(Utc::now(), "late"))
            .await
            .unwrap()
            .await
            .unwrap()
    );
    assert_eq!(
        s.claim(t.task_id, &w, Utc::now()).await.unwrap(),
        Claim::AlreadyFinished
    );
    let got = s.get(t.task_id).await.unwrap().unwrap();
    assert_eq!(got.status, TaskStatus::Done);
    assert_eq!(got.prompt, "こんにちは");
    assert_eq!(got.response.as_deref(), Some("answer"));
    assert_eq!(got.error, None);
    assert_eq!(got.total_ms, Some(12));
    assert_eq!(got.worker_id.as_deref(), Some("moon"));
    assert_eq!(got.job, None, "the job is dropped once the task ends");
    assert_eq!(
        got.conversation, t.conversation,
        "the conversation is kept once the task ends"
    );
    assert_eq!(got.reasons, vec!["auto".to_owned()]);
    // What the window made of the request, and the window sent.
    assert_eq!(
        got.context,
        ContextNote {
            num_ctx: Some(8192),
            ..t.context
        }
    );
    assert_eq!(got.attempts, 1);
    assert_eq!(
        s.claim(TaskId::new(), &w, Utc::now()).await.unwrap(),
        Claim::Missing
    );
    assert_eq!(s.get(TaskId::new()).await.unwrap(), None);
    t
}

/// Ordered writes: a claim made after `insert` returns sees the row before the insert is
/// durable, and a read after `finish` returns sees the outcome.
pub(crate) async fn ordered_writes(s: &dyn TaskStore) {
    let t = new_task("ordered");
    let w = WorkerName::parse("moon").unwrap();
    let recording = s.insert(t.clone()).await.unwrap();
    assert_eq!(
        s.claim(t.task_id, &w, Utc::now()).await.unwrap(),
        Claim::Claimed
    );
    recording.await.unwrap();
    let finished = s.finish(t.task_id, &done("fast")).await.unwrap();
    let got = s.get(t.task_id).await.unwrap().unwrap();
    assert_eq!(got.status, TaskStatus::Done);
    assert_eq!(got.response.as_deref(), Some("fast"));
    assert!(finished.await.unwrap());

    // A failed insert fails its handle (or the call itself), and a later claim finds no row.
    let dup = s.insert(t.clone()).await;
    let failed = match dup {
        Ok(recording) => recording.await,
        Err(e) => Err(e),
    };
    assert!(failed.is_err(), "a second insert of one task id must fail");
    let other = new_task("never stored");
    let mut bad = other.clone();
    bad.task_id = t.task_id;
    let refused = match s.insert(bad).await {
        Ok(recording) => recording.await,
        Err(e) => Err(e),
    };
    assert!(refused.is_err(), "the duplicate is refused");
    assert_eq!(
        s.claim(other.task_id, &w, Utc::now()).await.unwrap(),
        Claim::Missing
    );
}

/// A task handed to a worker with its row: inserted running and claimed once, without a
/// separate claim. `at_once`: whether the store orders the insert at the first poll of
/// `insert` (a local writer with room in its backlog) rather than after a round trip.
pub(crate) async fn inserted_claimed(s: &dyn TaskStore, at_once: bool) {
    let mut t = new_task("handed over");
    t.status = TaskStatus::Running;
    t.worker_id = Some(WorkerName::parse("moon").unwrap());
    t.attempts = 1;
    let mut insert = s.insert(t.clone());
    let recording = match futures::poll!(insert.as_mut()) {
        std::task::Poll::Ready(recording) => {
            assert!(at_once, "this store cannot order an insert without waiting");
            recording.unwrap()
        }
        std::task::Poll::Pending => {
            assert!(!at_once, "this store should have taken the insert at once");
            insert.await.unwrap()
        }
    };
    let finished = s.finish(t.task_id, &done("straight")).await.unwrap();
    recording.await.unwrap();
    assert!(finished.await.unwrap());
    let got = s.get(t.task_id).await.unwrap().unwrap();
    assert_eq!(got.status, TaskStatus::Done);
    assert_eq!(got.attempts, 1);
    assert_eq!(got.worker_id.as_deref(), Some("moon"));
    assert_eq!(got.response.as_deref(), Some("straight"));
    assert_eq!(got.job, None);
    assert!(s.unfinished().await.unwrap().is_empty());
}

/// `done_page` walks every finished task once, oldest first, a page at a time, also
/// through tasks made in the same instant; `count` counts by status.
pub(crate) async fn done_pages(s: &dyn TaskStore) {
    let at = Utc::now() - chrono::Duration::hours(1);
    let mut made = Vec::new();
    for i in 0..7 {
        let mut t = new_task(&format!("q{i}"));
        // Three made in one instant, the rest a second apart; one still queued.
        t.created_at = at + chrono::Duration::seconds(i64::from(i.max(2)));
        if i != 4 {
            t.status = TaskStatus::Done;
            t.response = Some(format!("a{i}"));
        }
        s.insert(t.clone()).await.unwrap().await.unwrap();
        made.push(t);
    }
    let mut expected: Vec<_> = made
        .iter()
        .filter(|t| t.status == TaskStatus::Done)
        .map(|t| (t.created_at, t.task_id))
        .collect();
    expected.sort();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = s.done_page(after, 2).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some((last.created_at, last.task_id));
        seen.extend(page.iter().map(|t| (t.created_at, t.task_id)));
    }
    // (PostgreSQL keeps microseconds: the ids say which tasks, in which order.)
    let ids =
        |v: &[(chrono::DateTime<Utc>, TaskId)]| v.iter().map(|(_, id)| *id).collect::<Vec<_>>();
    assert_eq!(ids(&seen), ids(&expected));
    assert_eq!(s.count(TaskStatus::Done).await.unwrap(), 6);
    assert_eq!(s.count(TaskStatus::Queued).await.unwrap(), 1);
    assert_eq!(s.count(TaskStatus::Failed).await.unwrap(), 0);
}

/// Every task keeps its person, and a listing can be limited to one person's tasks.
pub(crate) async fn people(s: &dyn TaskStore) {
    use crate::domain::Person;
    use crate::store::TaskFilter;
    let alice = Person::parse("alice").unwrap();
    let webui_u1 = Person::parse("webui/u1").unwrap();
    let mut a = new_task("alice's");
    a.person = alice.clone();
    let mut u = new_task("u1's");
    u.person = webui_u1.clone();
    let d = new_task("the household's");
    for t in [&a, &u, &d] {
        s.insert(t.clone()).await.unwrap().await.unwrap();
    }
    assert_eq!(s.get(a.task_id).await.unwrap().unwrap().person, alice);
    assert_eq!(s.get(u.task_id).await.unwrap().unwrap().person, webui_u1);
    assert_eq!(
        s.get(d.task_id).await.unwrap().unwrap().person.as_str(),
        Person::DEFAULT
    );
    let of = |person: Option<Person>| TaskFilter {
        person,
        limit: 10,
        ..Default::default()
    };
    let mine = s.list(&of(Some(webui_u1))).await.unwrap();
    assert_eq!(
        mine.iter().map(|t| t.task_id).collect::<Vec<_>>(),
        [u.task_id]
    );
    assert_eq!(s.list(&of(None)).await.unwrap().len(), 3);

    // Each person's queued tasks: a running or finished one is not waiting.
    let mut more = new_task("alice's second");
    more.person = alice.clone();
    s.insert(more.clone()).await.unwrap().await.unwrap();
    let w = WorkerName::parse("moon").unwrap();
    assert_eq!(
        s.claim(u.task_id, &w, Utc::now()).await.unwrap(),
        Claim::Claimed
    );
    assert!(
        s.finish(d.task_id, &done("ok"))
            .await
            .unwrap()
            .await
            .unwrap()
    );
    let mut queued = s.queued_by_person().await.unwrap();
    queued.sort();
    assert_eq!(queued, [(alice, 2)]);
}

/// A cancelled task: the cancel ends the row (whatever comes later is refused: a late
/// outcome, a claim, a second cancel), and the worker's partial answer goes onto it without
/// changing its status or reason; in the other order (the worker told first) the row ends
/// the same. A partial answer never changes a row that ended done.
pub(crate) async fn cancelled(s: &dyn TaskStore) {
    use crate::store::TaskFilter;
    let w = WorkerName::parse("moon").unwrap();
    let mut partial = done("Once upon");
    partial.worker_id = Some(w.clone());
    partial.first_token_ms = Some(40);
    partial.completion_tokens = Some(2);
    let reason = "the client went away";
    let check = |got: super::TaskRecord| {
        assert_eq!(got.status, TaskStatus::Cancelled);
        assert_eq!(got.error.as_deref(), Some(reason));
        assert_eq!(got.response.as_deref(), Some("Once upon"));
        assert_eq!(got.first_token_ms, Some(40));
        assert_eq!(got.completion_tokens, Some(2));
        assert_eq!(got.total_ms, Some(12));
        assert_eq!(got.worker_id.as_deref(), Some("moon"));
        assert_eq!(got.job, None);
    };
    let cancel_first = new_task("a long story");
    let worker_first = new_task("another long story");
    for t in [&cancel_first, &worker_first] {
        s.insert(t.clone()).await.unwrap().await.unwrap();
        s.claim(t.task_id, &w, Utc::now()).await.unwrap();
    }
    let id = cancel_first.task_id;
    assert!(
        s.cancel(id, Utc::now(), reason)
            .await
            .unwrap()
            .await
            .unwrap()
    );
    assert!(!s.finish(id, &done("late")).await.unwrap().await.unwrap());
    assert_eq!(
        s.claim(id, &w, Utc::now()).await.unwrap(),
        Claim::AlreadyFinished
    );
    assert!(s.record_partial(id, &partial).await.unwrap().await.unwrap());
    assert!(
        !s.cancel(id, Utc::now(), "again")
            .await
            .unwrap()
            .await
            .unwrap(),
        "a second cancel finds it ended"
    );
    check(s.get(id).await.unwrap().unwrap());

    let id = worker_first.task_id;
    assert!(s.record_partial(id, &partial).await.unwrap().await.unwrap());
    assert_eq!(
        s.claim(id, &w, Utc::now()).await.unwrap(),
        Claim::AlreadyFinished
    );
    assert!(
        s.cancel(id, Utc::now(), reason)
            .await
            .unwrap()
            .await
            .unwrap()
    );
    check(s.get(id).await.unwrap().unwrap());

    // Cancelled while queued: no answer. A done row takes neither.
    let queued = new_task("never mind");
    s.insert(queued.clone()).await.unwrap().await.unwrap();
    assert!(
        s.cancel(queued.task_id, Utc::now(), reason)
            .await
            .unwrap()
            .await
            .unwrap()
    );
    let got = s.get(queued.task_id).await.unwrap().unwrap();
    assert_eq!((got.status, got.response), (TaskStatus::Cancelled, None));
    let finished = new_task("answered");
    s.insert(finished.clone()).await.unwrap().await.unwrap();
    s.finish(finished.task_id, &done("whole"))
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(
        !s.record_partial(finished.task_id, &partial)
            .await
            .unwrap()
            .await
            .unwrap()
    );
    assert!(
        !s.cancel(finished.task_id, Utc::now(), reason)
            .await
            .unwrap()
            .await
            .unwrap()
    );
    let got = s.get(finished.task_id).await.unwrap().unwrap();
    assert_eq!(
        (got.status, got.response.as_deref()),
        (TaskStatus::Done, Some("whole"))
    );
    assert_eq!(got.error, None);
    assert!(
        !s.record_partial(TaskId::new(), &partial)
            .await
            .unwrap()
            .await
            .unwrap()
    );

    assert!(
        s.unfinished().await.unwrap().is_empty(),
        "cancelled is final"
    );
    assert_eq!(s.count(TaskStatus::Cancelled).await.unwrap(), 3);
    let listed = s
        .list(&TaskFilter {
            status: Some(TaskStatus::Cancelled),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut ids: Vec<_> = listed.iter().map(|r| r.task_id).collect();
    ids.sort();
    let mut want = vec![cancel_first.task_id, worker_first.task_id, queued.task_id];
    want.sort();
    assert_eq!(ids, want);
}

/// Every task keeps its priority; `list` shows it.
pub(crate) async fn priorities(s: &dyn TaskStore) {
    use crate::domain::Priority;
    use crate::store::TaskFilter;
    let mut ids = Vec::new();
    for p in Priority::ALL {
        let mut t = new_task(&format!("a {p} task"));
        t.priority = p;
        s.insert(t.clone()).await.unwrap().await.unwrap();
        assert_eq!(s.get(t.task_id).await.unwrap().unwrap().priority, p);
        ids.push((t.task_id, p));
    }
    let listed = s
        .list(&TaskFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    for (id, p) in ids {
        let row = listed.iter().find(|r| r.task_id == id).unwrap();
        assert_eq!(row.priority, p);
    }
}
