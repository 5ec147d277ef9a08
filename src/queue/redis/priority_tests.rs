//! Tests of the Redis queue's priorities against a real Redis at `$REDIS_URL` (skipped
//! with a note when unset): the order of classes and ages, aging read from the entry ids,
//! positions, and the inventory across the classes' streams.

use std::time::Duration;

use super::take::now_ms;
use super::tests::{PATIENCE, dequeue_within, fast, lane, raw, worker};
use super::*;
use crate::testkit::redis_server::{delete_keys, redis_url_or_skip, unique_prefix};
use crate::testkit::samples::sample_job;

fn of(l: &Lane, priority: Priority) -> Job {
    Job {
        priority,
        ..sample_job(l)
    }
}

/// Adds `job` to its class's stream as if it had been queued `ago`: the entry id is the
/// enqueue time in ms.
async fn enqueue_as_of(url: &str, q: &RedisQueue, job: &Job, ago: Duration) {
    let key = q.class_stream_key(&job.lane, job.priority);
    let ms = now_ms(chrono::TimeDelta::zero()) - u64::try_from(ago.as_millis()).unwrap();
    q.inner
        .ensure_groups(std::slice::from_ref(&key))
        .await
        .unwrap();
    let mut conn = raw(url).await;
    let _: String = redis::cmd("XADD")
        .arg(&key)
        .arg(format!("{ms}-0"))
        .arg(FIELD_JOB)
        .arg(serde_json::to_string(job).unwrap())
        .arg(FIELD_PASSES)
        .arg(0)
        .query_async(&mut conn)
        .await
        .unwrap();
}

async fn take(q: &RedisQueue, lanes: &[Lane]) -> Delivery {
    let d = dequeue_within(q, lanes, &worker("w"), PATIENCE)
        .await
        .expect("a job within the patience");
    q.ack(&d).await.unwrap();
    d
}

#[tokio::test]
async fn the_best_priority_goes_first_across_lanes_then_the_oldest() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let (a, b) = (lane("tasks:llm:a"), lane("tasks:utility"));
    let batch = of(&a, Priority::Batch);
    let bg1 = of(&b, Priority::Background);
    let bg2 = of(&a, Priority::Background);
    let chat1 = of(&a, Priority::Interactive);
    let chat2 = of(&b, Priority::Interactive);
    for j in [&batch, &bg1, &bg2, &chat1, &chat2] {
        q.enqueue(j.clone()).await.unwrap();
    }
    assert_eq!(
        q.depths().await.unwrap(),
        vec![(a.clone(), 3), (b.clone(), 2)]
    );
    let by_class = vec![
        (a.clone(), Priority::Interactive, 1),
        (a.clone(), Priority::Background, 1),
        (a.clone(), Priority::Batch, 1),
        (b.clone(), Priority::Interactive, 1),
        (b.clone(), Priority::Background, 1),
    ];
    assert_eq!(q.class_depths().await.unwrap(), by_class);
    let ids = q.task_ids().await.unwrap();
    assert_eq!(ids.len(), 5, "every class's stream is in the inventory");
    let mut conn = raw(&url).await;
    let len: usize = redis::AsyncCommands::xlen(&mut conn, q.class_stream_key(&a, Priority::Batch))
        .await
        .unwrap();
    assert_eq!(len, 1, "a batch job waits in its lane's batch stream");
    let lanes = [a, b];
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(take(&q, &lanes).await.job.task_id);
    }
    assert_eq!(order, [chat1, chat2, bg1, bg2, batch].map(|j| j.task_id));
    assert!(q.task_ids().await.unwrap().is_empty());
    delete_keys(&url, &prefix).await.unwrap();
}

/// A job is promoted one class per aging step of waiting, read from its entry id: a
/// batch job queued two steps ago goes before a fresh chat; one step ago, after it.
#[tokio::test]
async fn waiting_promotes_a_job_by_the_age_its_entry_id_carries() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let aging = Duration::from_secs(60);
    let options = RedisQueueOptions {
        aging: Aging::every(aging),
        ..fast()
    };
    let q = RedisQueue::connect(&url, &prefix, options).await.unwrap();
    let l = lane("tasks:llm:m");
    let lanes = std::slice::from_ref(&l);

    let batch = of(&l, Priority::Batch);
    enqueue_as_of(&url, &q, &batch, aging + aging / 2).await;
    let chat = of(&l, Priority::Interactive);
    let bg = of(&l, Priority::Background);
    q.enqueue(chat.clone()).await.unwrap();
    q.enqueue(bg.clone()).await.unwrap();
    assert_eq!(q.position(&l, chat.task_id).await.unwrap(), Some(1));
    assert_eq!(q.position(&l, batch.task_id).await.unwrap(), Some(2));
    assert_eq!(q.position(&l, bg.task_id).await.unwrap(), Some(3));
    let order: Vec<TaskId> = [
        take(&q, lanes).await,
        take(&q, lanes).await,
        take(&q, lanes).await,
    ]
    .map(|d| d.job.task_id)
    .into();
    assert_eq!(order, [chat, batch, bg].map(|j| j.task_id));

    // (Another lane: a stream's ids only grow.)
    let l = lane("tasks:llm:m2");
    let lanes = std::slice::from_ref(&l);
    let old_batch = of(&l, Priority::Batch);
    enqueue_as_of(&url, &q, &old_batch, 2 * aging + aging / 2).await;
    let chat = of(&l, Priority::Interactive);
    q.enqueue(chat.clone()).await.unwrap();
    assert_eq!(q.position(&l, old_batch.task_id).await.unwrap(), Some(1));
    assert_eq!(take(&q, lanes).await.job.task_id, old_batch.task_id);
    assert_eq!(take(&q, lanes).await.job.task_id, chat.task_id);
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn positions_count_the_waiting_jobs_of_the_lane_that_go_first() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let (l, other) = (lane("tasks:llm:m"), lane("tasks:llm:n"));
    let bg = of(&l, Priority::Background);
    let elsewhere = of(&other, Priority::Interactive);
    let chat1 = of(&l, Priority::Interactive);
    let chat2 = of(&l, Priority::Interactive);
    for j in [&bg, &elsewhere, &chat1, &chat2] {
        q.enqueue(j.clone()).await.unwrap();
    }
    assert_eq!(q.position(&l, chat1.task_id).await.unwrap(), Some(1));
    assert_eq!(q.position(&l, chat2.task_id).await.unwrap(), Some(2));
    assert_eq!(q.position(&l, bg.task_id).await.unwrap(), Some(3));
    assert_eq!(
        q.position(&other, elsewhere.task_id).await.unwrap(),
        Some(1)
    );
    assert_eq!(q.position(&other, bg.task_id).await.unwrap(), None);
    assert_eq!(q.position(&l, TaskId::new()).await.unwrap(), None);
    // A job handed out (even unacknowledged) no longer waits.
    let d = dequeue_within(&q, std::slice::from_ref(&l), &worker("w"), PATIENCE)
        .await
        .unwrap();
    assert_eq!(d.job.task_id, chat1.task_id);
    assert_eq!(q.position(&l, chat1.task_id).await.unwrap(), None);
    assert_eq!(q.position(&l, chat2.task_id).await.unwrap(), Some(1));
    assert_eq!(q.position(&l, bg.task_id).await.unwrap(), Some(2));
    delete_keys(&url, &prefix).await.unwrap();
}

/// Jobs taken over from a dead consumer (delivered again, or held from the same take-over)
/// do not go before a more urgent job that waits.
#[tokio::test]
async fn a_held_job_does_not_go_before_a_more_urgent_waiting_one() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let (x, y) = (lane("tasks:llm:x"), lane("tasks:llm:y"));
    let lanes = [x.clone(), y.clone()];
    let dead = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let (bx, by) = (of(&x, Priority::Background), of(&y, Priority::Background));
    dead.enqueue(bx.clone()).await.unwrap();
    dead.enqueue(by.clone()).await.unwrap();
    for _ in 0..2 {
        dequeue_within(&dead, &lanes, &worker("w"), PATIENCE)
            .await
            .unwrap();
    }
    drop(dead); // its process dies holding both
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let first = dequeue_within(&q, &lanes, &worker("w"), PATIENCE)
        .await
        .expect("a job taken over after the lease");
    assert_eq!(first.deliveries, 2);
    q.ack(&first).await.unwrap();
    let chat = of(&x, Priority::Interactive);
    q.enqueue(chat.clone()).await.unwrap();
    assert_eq!(
        take(&q, &lanes).await.job.task_id,
        chat.task_id,
        "the chat before the held job"
    );
    let last = take(&q, &lanes).await;
    assert!(
        [bx.task_id, by.task_id].contains(&last.job.task_id)
            && last.job.task_id != first.job.task_id
    );
    delete_keys(&url, &prefix).await.unwrap();
}

/// A worker that takes only people's jobs from a lane leaves its background work waiting
/// (another worker, or the same one later, takes it), and `awaited` tells which lanes have
/// a person's job waiting.
#[tokio::test]
async fn a_lane_taken_for_people_only_leaves_background_work_waiting() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let (x, y) = (lane("tasks:llm:x"), lane("tasks:llm:y"));
    let background = of(&x, Priority::Background);
    q.enqueue(background.clone()).await.unwrap();
    assert_eq!(q.awaited(&[x.clone(), y.clone()]).await.unwrap(), vec![]);
    let chat = of(&y, Priority::Interactive);
    q.enqueue(chat.clone()).await.unwrap();
    assert_eq!(
        q.awaited(&[x.clone(), y.clone()]).await.unwrap(),
        vec![y.clone()]
    );
    let people_only = Takes {
        lanes: vec![x.clone(), y.clone()],
        interactive_only: vec![x.clone()],
    };
    let took = tokio::time::timeout(PATIENCE, q.dequeue_from(&people_only, &worker("w")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(took.job.task_id, chat.task_id);
    q.ack(&took).await.unwrap();
    let nothing = tokio::time::timeout(
        Duration::from_millis(300),
        q.dequeue_from(&people_only, &worker("w")),
    )
    .await;
    assert!(
        nothing.is_err(),
        "the background job was taken: {nothing:?}"
    );
    assert_eq!(
        take(&q, &[x]).await.job.task_id,
        background.task_id,
        "it waited, not lost"
    );
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn the_jobs_ahead_of_a_fresh_one_count_the_classes_it_does_not_overtake() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let (l, other) = (lane("tasks:llm:m"), lane("tasks:llm:n"));
    let count = |p| {
        let (q, l) = (&q, &l);
        async move {
            q.ahead(l, p, &crate::domain::Person::default())
                .await
                .unwrap()
        }
    };
    assert_eq!(count(Priority::Batch).await, crate::placement::Ahead::NONE);
    let chat = of(&l, Priority::Interactive);
    for j in [
        &chat,
        &of(&l, Priority::Interactive),
        &of(&l, Priority::Background),
        &of(&other, Priority::Interactive),
    ] {
        q.enqueue(j.clone()).await.unwrap();
    }
    assert_eq!(count(Priority::Interactive).await.jobs, 2);
    assert_eq!(count(Priority::Batch).await.jobs, 3);
    // Their prompts are not read from Redis.
    assert_eq!(count(Priority::Batch).await.prompt_tokens, None);
    // A job handed out no longer waits.
    let d = dequeue_within(&q, std::slice::from_ref(&l), &worker("w"), PATIENCE)
        .await
        .unwrap();
    assert_eq!(d.job.task_id, chat.task_id);
    assert_eq!(count(Priority::Interactive).await.jobs, 1);
    delete_keys(&url, &prefix).await.unwrap();
}

/// A job a worker took and queued again (handed on to a sooner worker, held back, retried
/// elsewhere) keeps its age, as in process: it is not put behind the jobs of its class
/// queued after it, and the aging that promoted it still counts. Here a background job
/// that has waited 70 s (more than one aging step of 60 s: it counts as a person's) goes
/// before a chat queued after it, while the background job queued 30 s ago waits for
/// both.
#[tokio::test]
async fn a_job_queued_again_keeps_its_age_and_its_place() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let l = lane("tasks:llm:m");
    let held = of(&l, Priority::Background);
    let later = of(&l, Priority::Background);
    enqueue_as_of(&url, &q, &held, Duration::from_secs(70)).await;
    enqueue_as_of(&url, &q, &later, Duration::from_secs(30)).await;
    let d = take(&q, std::slice::from_ref(&l)).await;
    assert_eq!(d.job.task_id, held.task_id);
    let waited = chrono::Utc::now() - d.job.waiting_since.expect("the delivery carries its age");
    assert!(
        (69..=72).contains(&waited.num_seconds()),
        "waited {waited:?}"
    );
    q.enqueue(d.job.clone()).await.unwrap();
    let chat = of(&l, Priority::Interactive);
    q.enqueue(chat.clone()).await.unwrap();
    let place = |id| {
        let (q, l) = (&q, &l);
        async move { q.position(l, id).await.unwrap() }
    };
    assert_eq!(place(held.task_id).await, Some(1));
    assert_eq!(place(chat.task_id).await, Some(2));
    assert_eq!(place(later.task_id).await, Some(3));
    assert_eq!(
        q.ahead(&l, Priority::Background, &crate::domain::Person::default())
            .await
            .unwrap()
            .jobs,
        3
    );
    let mut conn = raw(&url).await;
    let again: usize =
        redis::AsyncCommands::xlen(&mut conn, q.requeued_stream_key(&l, Priority::Background))
            .await
            .unwrap();
    assert_eq!(again, 1, "it waits among the jobs queued again");
    let lanes = std::slice::from_ref(&l);
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(take(&q, lanes).await.job.task_id);
    }
    assert_eq!(order, [held.task_id, chat.task_id, later.task_id]);
    assert!(
        q.task_ids().await.unwrap().is_empty(),
        "every entry acknowledged"
    );
    delete_keys(&url, &prefix).await.unwrap();
}

/// A job a worker took counts as behind it the jobs of its class queued after it (those
/// a fresh job of its class goes after: it was delivered first), as in process, and not
/// the background work queued after it.
#[tokio::test]
async fn the_jobs_behind_a_taken_job_are_those_of_its_class_still_waiting() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let l = lane("tasks:llm:m");
    let first = of(&l, Priority::Interactive);
    q.enqueue(first.clone()).await.unwrap();
    q.enqueue(of(&l, Priority::Interactive)).await.unwrap();
    q.enqueue(of(&l, Priority::Background)).await.unwrap();
    let d = take(&q, std::slice::from_ref(&l)).await;
    assert_eq!(d.job.task_id, first.task_id);
    assert_eq!(q.behind_of(&l, &d.job).await.unwrap().jobs, 1);
    delete_keys(&url, &prefix).await.unwrap();
}
