//! Tests of the people's turns in the Redis lanes against a real Redis at `$REDIS_URL`
//! (skipped with a note when unset): who is taken next, the places shown while jobs wait,
//! and that a job taken out of turn is leased, taken over and acknowledged like any other.

use redis::AsyncCommands;

use super::tests::{PATIENCE, dequeue_within, fast, lane, raw, worker};
use super::*;
use crate::domain::Person;
use crate::testkit::redis_server::{delete_keys, redis_url_or_skip, unique_prefix};
use crate::testkit::samples::sample_job;

fn of(l: &Lane, person: &str) -> Job {
    Job {
        person: Person::parse(person).unwrap(),
        ..sample_job(l)
    }
}

async fn places(q: &RedisQueue, l: &Lane, jobs: &[&Job]) -> Vec<Option<usize>> {
    let mut out = Vec::new();
    for j in jobs {
        out.push(q.position(l, j.task_id).await.unwrap());
    }
    out
}

/// The Redis at `$REDIS_URL` (`None`, with a note, when unset), a queue under a prefix of
/// the test's own, and a lane.
async fn queue() -> Option<(String, String, RedisQueue, Lane)> {
    let url = redis_url_or_skip()?;
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    Some((url, prefix, q, lane("tasks:llm:m")))
}

/// `person`'s interactive jobs in `l`.
fn depth(l: &Lane, person: &str, waiting: usize, running: usize) -> crate::queue::Depth {
    crate::queue::Depth {
        lane: l.clone(),
        priority: Priority::Interactive,
        person: Person::parse(person).unwrap(),
        waiting,
        running,
    }
}

async fn take(q: &RedisQueue, l: &Lane) -> Delivery {
    dequeue_within(q, std::slice::from_ref(l), &worker("w"), PATIENCE)
        .await
        .expect("a job within the patience")
}

#[tokio::test]
async fn a_persons_first_job_is_taken_out_of_turn_past_anothers_running_and_waiting_ones() {
    let Some((url, prefix, q, l)) = queue().await else {
        return;
    };
    let (u1a, u1b, u1c) = (of(&l, "u1"), of(&l, "u1"), of(&l, "u1"));
    let u2 = of(&l, "u2");
    for j in [&u1a, &u1b, &u1c, &u2] {
        q.enqueue(j.clone()).await.unwrap();
    }
    let mut conn = raw(&url).await;
    let queued: redis::streams::StreamRangeReply = conn.xrange_all(q.stream_key(&l)).await.unwrap();
    let u2_queued = queued.ids[3].id.clone();
    assert_eq!(
        places(&q, &l, &[&u1a, &u2, &u1b, &u1c]).await,
        [Some(1), Some(2), Some(3), Some(4)],
        "each person's first job before anyone's second"
    );

    let first = take(&q, &l).await;
    assert_eq!(first.job.task_id, u1a.task_id, "the oldest, nobody running");
    assert_eq!(
        places(&q, &l, &[&u2, &u1b, &u1c]).await,
        [Some(1), Some(2), Some(3)],
        "u1 runs a job: u2 goes first"
    );

    let second = take(&q, &l).await;
    assert_eq!(second.job.task_id, u2.task_id, "u1 runs one, u2 none");
    let taken_key = format!("{prefix}taken:{l}");
    assert!(
        second.receipt.starts_with(&format!("{taken_key} ")),
        "taken out of turn: {}",
        second.receipt
    );
    let (ms, _) = take::id_order(&u2_queued);
    let since = second.job.waiting_since.unwrap().timestamp_millis();
    assert!(
        (since - i64::try_from(ms).unwrap()).abs() < 1000,
        "it keeps the time it was queued: {since} against {ms}"
    );
    assert_eq!(second.job.person.as_str(), "u2");
    let fresh_left: usize = conn.xlen(q.stream_key(&l)).await.unwrap();
    assert_eq!(fresh_left, 3, "u1's first (running) and the two waiting");
    assert_eq!(
        q.class_depths().await.unwrap(),
        [(l.clone(), Priority::Interactive, 2)],
        "the job taken out of turn does not count as waiting"
    );
    assert_eq!(
        q.task_ids().await.unwrap().len(),
        4,
        "running ones included"
    );
    assert_eq!(places(&q, &l, &[&u1b, &u1c]).await, [Some(1), Some(2)]);

    q.ack(&second).await.unwrap();
    let taken_left: usize = conn.xlen(&taken_key).await.unwrap();
    assert_eq!(taken_left, 0, "acknowledged from where it was taken");
    q.ack(&first).await.unwrap();
    for j in [&u1b, &u1c] {
        let d = take(&q, &l).await;
        assert_eq!(
            d.job.task_id, j.task_id,
            "one person's jobs keep their order"
        );
        q.ack(&d).await.unwrap();
    }
    assert!(q.task_ids().await.unwrap().is_empty());
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn people_take_the_lane_in_rounds_when_one_job_runs_at_a_time() {
    let Some((url, prefix, q, l)) = queue().await else {
        return;
    };
    let jobs = [of(&l, "u1"), of(&l, "u1"), of(&l, "u2"), of(&l, "u2")];
    for j in &jobs {
        q.enqueue(j.clone()).await.unwrap();
    }
    let mut order = Vec::new();
    for _ in &jobs {
        let d = take(&q, &l).await;
        order.push(d.job.task_id);
        q.ack(&d).await.unwrap();
    }
    let want: Vec<TaskId> = [0, 2, 1, 3].iter().map(|i| jobs[*i].task_id).collect();
    assert_eq!(
        order, want,
        "u1, u2, u1, u2: the one served longest ago goes"
    );
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn a_household_without_people_is_served_in_order_and_writes_no_person() {
    let Some((url, prefix, q, l)) = queue().await else {
        return;
    };
    let jobs = [sample_job(&l), sample_job(&l), sample_job(&l)];
    for j in &jobs {
        q.enqueue(j.clone()).await.unwrap();
    }
    let mut conn = raw(&url).await;
    let index: bool = conn
        .exists(q.inner.who_key(&q.stream_key(&l)))
        .await
        .unwrap();
    assert!(!index, "nobody is named: no index is written");
    let first = take(&q, &l).await;
    for j in &jobs[1..] {
        let d = take(&q, &l).await;
        assert_eq!(d.job.task_id, j.task_id);
        assert!(!d.receipt.contains("taken:"), "{}", d.receipt);
    }
    assert_eq!(first.job.task_id, jobs[0].task_id);
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn a_job_taken_out_of_turn_is_taken_over_when_its_worker_dies() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let l = lane("tasks:llm:m");
    let a = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let (u1a, u1b, u2) = (of(&l, "u1"), of(&l, "u1"), of(&l, "u2"));
    for j in [&u1a, &u1b, &u2] {
        a.enqueue(j.clone()).await.unwrap();
    }
    let d = take(&a, &l).await;
    assert_eq!(d.job.task_id, u1a.task_id);
    a.ack(&d).await.unwrap();
    let out_of_turn = take(&a, &l).await;
    assert_eq!(out_of_turn.job.task_id, u2.task_id, "u1 was served, u2 not");
    drop(a); // its process dies holding the job
    let b = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let next = take(&b, &l).await;
    assert_eq!(
        next.job.task_id, u1b.task_id,
        "u2's job counts as running until it is taken over"
    );
    b.ack(&next).await.unwrap();
    let again = take(&b, &l).await;
    assert_eq!(again.job.task_id, u2.task_id, "taken over after the lease");
    assert_eq!(again.receipt, out_of_turn.receipt, "the same entry");
    assert_eq!(again.deliveries, 2);
    b.ack(&again).await.unwrap();
    assert!(b.task_ids().await.unwrap().is_empty());
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn each_persons_waiting_and_running_jobs_are_counted_and_what_waits_before_follows_turns() {
    let Some((url, prefix, q, l)) = queue().await else {
        return;
    };
    for j in [of(&l, "u1"), of(&l, "u1"), of(&l, "u1"), of(&l, "u2")] {
        q.enqueue(j).await.unwrap();
    }
    let running = take(&q, &l).await;
    assert_eq!(running.job.person.as_str(), "u1");
    let depth = |person, waiting, running| depth(&l, person, waiting, running);
    assert_eq!(
        q.people_depths().await.unwrap(),
        [depth("u1", 2, 1), depth("u2", 1, 0)]
    );
    assert_eq!(
        q.class_depths().await.unwrap(),
        [(l.clone(), Priority::Interactive, 3)]
    );
    let ahead = async |who: &str| {
        q.ahead(&l, Priority::Interactive, &Person::parse(who).unwrap())
            .await
            .unwrap()
            .jobs
    };
    assert_eq!(ahead("u3").await, 1, "u2's first; u1 has one running");
    assert_eq!(ahead("u1").await, 3, "u1's own two and u2's one");
    assert_eq!(
        q.ahead(&l, Priority::Background, &Person::parse("u3").unwrap())
            .await
            .unwrap()
            .jobs,
        3,
        "background work goes after every person's turn"
    );
    q.ack(&running).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn a_taken_job_is_not_its_own_persons_running_rival() {
    let Some((url, prefix, q, l)) = queue().await else {
        return;
    };
    for j in [of(&l, "u1"), of(&l, "u1"), of(&l, "u1"), of(&l, "u2")] {
        q.enqueue(j).await.unwrap();
    }
    let u1 = take(&q, &l).await;
    let u2 = take(&q, &l).await;
    assert_eq!(u2.job.person.as_str(), "u2");
    // u2's job, held by the worker that asks, has nobody's waiting job before it: u1 has
    // one running. Counted as running, it would have had u1's next one before it.
    assert_eq!(q.ahead_of(&l, &u2.job).await.unwrap().jobs, 0);
    assert_eq!(
        q.ahead(&l, Priority::Interactive, &u2.job.person)
            .await
            .unwrap()
            .jobs,
        1,
        "a fresh job of u2's, with one running"
    );
    q.ack(&u1).await.unwrap();
    q.ack(&u2).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}

/// The indexes of whose the entries are follow the entries: an entry withdrawn, taken
/// out of turn or acknowledged leaves its index, and an index entry a failed write left
/// behind is dropped by the next look. A flood is counted exactly, however deep.
#[tokio::test]
async fn the_index_of_people_follows_the_entries_and_counts_a_flood_exactly() {
    let Some((url, prefix, q, l)) = queue().await else {
        return;
    };
    let mut conn = raw(&url).await;
    let (fresh, taken) = (
        q.inner.who_key(&q.stream_key(&l)),
        q.inner.who_key(&format!("{prefix}taken:{l}")),
    );
    let (u1a, u1b, u1c, u2) = (of(&l, "u1"), of(&l, "u1"), of(&l, "u1"), of(&l, "u2"));
    for j in [&u1a, &u1b, &u1c, &u2] {
        q.enqueue(j.clone()).await.unwrap();
    }
    let lens = async |conn: &mut redis::aio::MultiplexedConnection| -> (usize, usize) {
        (
            conn.xlen(&fresh).await.unwrap(),
            conn.xlen(&taken).await.unwrap(),
        )
    };
    assert_eq!(lens(&mut conn).await, (4, 0));
    assert!(
        q.withdraw(&l, Priority::Interactive, u1b.task_id)
            .await
            .unwrap()
    );
    assert_eq!(lens(&mut conn).await, (3, 0), "withdrawn");
    let first = take(&q, &l).await;
    let second = take(&q, &l).await;
    assert_eq!(
        (first.job.task_id, second.job.task_id),
        (u1a.task_id, u2.task_id)
    );
    assert_eq!(
        lens(&mut conn).await,
        (2, 1),
        "u1's running and waiting ones here, u2's moved with its entry"
    );
    q.ack(&first).await.unwrap();
    q.ack(&second).await.unwrap();
    assert_eq!(lens(&mut conn).await, (1, 0), "acknowledged");
    let last = take(&q, &l).await;
    assert_eq!(last.job.task_id, u1c.task_id);
    q.ack(&last).await.unwrap();
    assert_eq!(lens(&mut conn).await, (0, 0));

    // Another lane, whose index holds an entry a failed write left behind.
    let l = lane("tasks:llm:other");
    let fresh = q.inner.who_key(&q.stream_key(&l));
    let _: String = conn.xadd(&fresh, "1-1", &[("p", "ghost")]).await.unwrap();
    let flood = 300;
    for _ in 0..flood {
        q.enqueue(of(&l, "u1")).await.unwrap();
    }
    q.enqueue(of(&l, "u2")).await.unwrap();
    let running = take(&q, &l).await;
    assert_eq!(
        running.job.person.as_str(),
        "u2",
        "from behind the flood: u2 was served longer ago"
    );
    let depth = |person, waiting, running| depth(&l, person, waiting, running);
    assert_eq!(
        q.people_depths().await.unwrap(),
        [depth("u1", flood, 0), depth("u2", 0, 1)],
        "no ghost: the index entry older than the stream's oldest is gone"
    );
    let len: usize = conn.xlen(&fresh).await.unwrap();
    assert_eq!(len, flood, "u2's moved with its entry");
    q.ack(&running).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}

/// An index entry whose entry is gone (deleted by hand, or a write lost half-way) is
/// dropped by the take that finds it gone: no worker chooses it again and again.
#[tokio::test]
async fn an_index_entry_whose_entry_is_gone_is_dropped_when_a_take_finds_it() {
    let Some((url, prefix, q, l)) = queue().await else {
        return;
    };
    let (u1a, u1b, u2) = (of(&l, "u1"), of(&l, "u1"), of(&l, "u2"));
    for j in [&u1a, &u1b, &u2] {
        q.enqueue(j.clone()).await.unwrap();
    }
    let mut conn = raw(&url).await;
    let queued: redis::streams::StreamRangeReply = conn.xrange_all(q.stream_key(&l)).await.unwrap();
    let _: usize = conn
        .xdel(q.stream_key(&l), &[&queued.ids[2].id])
        .await
        .unwrap();
    let first = take(&q, &l).await;
    assert_eq!(first.job.task_id, u1a.task_id);
    let second = take(&q, &l).await;
    assert_eq!(second.job.task_id, u1b.task_id, "u2's entry is gone");
    let index: redis::streams::StreamRangeReply = conn
        .xrange_all(q.inner.who_key(&q.stream_key(&l)))
        .await
        .unwrap();
    assert_eq!(index.ids.len(), 2, "u1's two, running");
    q.ack(&first).await.unwrap();
    q.ack(&second).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}
