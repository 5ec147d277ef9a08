//! Tests of the Redis queue's avoid lists against a real Redis at `$REDIS_URL` (skipped
//! with a note when unset): a job that failed on a worker is put back a bounded number of
//! times; one left for a sooner worker waits for it until its time.

use std::time::Duration;

use redis::AsyncCommands;
use redis::streams::StreamRangeReply;

use super::tests::{PATIENCE, dequeue_within, fast, lane, raw, worker};
use super::*;
use crate::testkit::redis_server::{delete_keys, redis_url_or_skip, unique_prefix};
use crate::testkit::samples::sample_job as job;

/// Each entry of a stream: its id and how often it was put back.
fn entry_ids(reply: StreamRangeReply) -> Vec<(String, Option<u32>)> {
    reply
        .ids
        .into_iter()
        .map(|e| (e.id.clone(), e.get::<u32>(FIELD_PASSES)))
        .collect()
}

#[tokio::test]
async fn avoided_worker_passes_the_job_on_a_bounded_number_of_times() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let l = lane("tasks:llm:m");
    let (bad, good) = (worker("bad"), worker("good"));
    let mut conn = raw(&url).await;

    // Another worker takes an avoiding job as it is.
    let mut j = job(&l);
    j.avoid = vec![bad.clone()];
    q.enqueue(j.clone()).await.unwrap();
    let original = entry_ids(conn.xrange_all(q.stream_key(&l)).await.unwrap());
    let d = q.dequeue(std::slice::from_ref(&l), &good).await.unwrap();
    assert_eq!(
        (d.job.task_id, d.receipt.clone()),
        (j.task_id, receipt(&q.stream_key(&l), &original[0].0))
    );
    q.ack(&d).await.unwrap();

    // The avoided worker puts it back (a new entry each time) until the passes run out,
    // then runs it rather than leave it waiting forever.
    q.enqueue(j.clone()).await.unwrap();
    let original = entry_ids(conn.xrange_all(q.stream_key(&l)).await.unwrap());
    let d = q.dequeue(std::slice::from_ref(&l), &bad).await.unwrap();
    assert_eq!(d.job.task_id, j.task_id);
    let now = entry_ids(conn.xrange_all(q.stream_key(&l)).await.unwrap());
    assert_eq!(now.len(), 1, "put back, never copied");
    assert_ne!(now[0].0, original[0].0);
    assert_eq!(receipt(&q.stream_key(&l), &now[0].0), d.receipt);
    assert_eq!(now[0].1, Some(3));
    q.ack(&d).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}

/// A job left for another worker until a time: the avoided worker takes other work and
/// otherwise waits, neither taking the job nor putting it back, while the others may take
/// it; once the time has come it takes the job as it comes.
#[tokio::test]
async fn a_job_left_for_another_worker_waits_for_it_until_its_time() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let mut conn = raw(&url).await;
    let (chat, other) = (lane("tasks:llm:chat"), lane("tasks:llm:other"));
    let lanes = [chat.clone(), other.clone()];
    let (ai_core, moon) = (worker("ai-core"), worker("moon"));
    let left_until = |until: chrono::DateTime<chrono::Utc>| Job {
        avoid: vec![ai_core.clone()],
        avoid_until: Some(until),
        ..job(&chat)
    };
    let in_chat = async |conn: &mut redis::aio::MultiplexedConnection| {
        let ids = entry_ids(conn.xrange_all(q.stream_key(&chat)).await.unwrap());
        let waiting = q
            .ahead(
                &chat,
                Priority::Interactive,
                &crate::domain::Person::default(),
            )
            .await
            .unwrap()
            .jobs;
        (ids, waiting)
    };

    // Left for the others for a minute; a younger job waits in another lane.
    let j = left_until(chrono::Utc::now() + chrono::Duration::seconds(60));
    q.enqueue(j.clone()).await.unwrap();
    let queued = entry_ids(conn.xrange_all(q.stream_key(&chat)).await.unwrap());
    let o = job(&other);
    q.enqueue(o.clone()).await.unwrap();
    let d = q.dequeue(&lanes, &ai_core).await.unwrap();
    assert_eq!(
        d.job.task_id, o.task_id,
        "the avoided worker takes other work"
    );
    q.ack(&d).await.unwrap();
    assert!(
        dequeue_within(&q, &lanes, &ai_core, Duration::from_millis(500))
            .await
            .is_none(),
        "nothing else to take: it waits"
    );
    assert_eq!(
        in_chat(&mut conn).await,
        (queued, 1),
        "the job still waits where it was, never put back"
    );
    let d = q.dequeue(&lanes, &moon).await.unwrap();
    assert_eq!(
        d.job.task_id, j.task_id,
        "the worker it was left for takes it"
    );
    q.ack(&d).await.unwrap();

    // Its time has come: the avoided worker takes it as it comes.
    let j = left_until(chrono::Utc::now() - chrono::Duration::seconds(1));
    q.enqueue(j.clone()).await.unwrap();
    let queued = entry_ids(conn.xrange_all(q.stream_key(&chat)).await.unwrap());
    let d = q.dequeue(&lanes, &ai_core).await.unwrap();
    assert_eq!(d.job.task_id, j.task_id);
    assert_eq!(in_chat(&mut conn).await, (queued, 0), "taken, not put back");
    q.ack(&d).await.unwrap();

    // Its time comes while the avoided worker waits: it takes it then.
    let until = chrono::Utc::now() + chrono::Duration::milliseconds(300);
    let j = left_until(until);
    q.enqueue(j.clone()).await.unwrap();
    let d = dequeue_within(&q, &lanes, &ai_core, PATIENCE)
        .await
        .unwrap();
    assert_eq!(d.job.task_id, j.task_id);
    assert!(chrono::Utc::now() >= until, "not before its time");
    q.ack(&d).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}
