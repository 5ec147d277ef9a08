//! Tests of [`RedisQueue`] against a real Redis: the shared one at `$REDIS_URL` (skipped
//! with a note when unset), or a private `redis-server` for the restart tests.

use std::time::{Duration, Instant};

use redis::AsyncCommands;

use super::take::id_order;
use super::*;

use crate::testkit::redis_server::{RedisServer, delete_keys, redis_url_or_skip, unique_prefix};

/// A deadline, not a wait: the tests return as soon as the condition holds. Generous,
/// because reconnecting after a restart follows a backoff of up to 5 s on a loaded machine.
pub(super) const PATIENCE: Duration = Duration::from_secs(20);

use crate::testkit::samples::sample_job as job;

pub(super) fn fast() -> RedisQueueOptions {
    RedisQueueOptions {
        lease: Duration::from_millis(200),
        max_deliveries: 3,
        block: Duration::from_millis(50),
        max_avoid_passes: 3,
        aging: Aging::default(),
    }
}

pub(super) fn lane(s: &str) -> Lane {
    Lane::parse(s).unwrap()
}

pub(super) fn worker(s: &str) -> WorkerName {
    WorkerName::parse(s).unwrap()
}

pub(super) async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

pub(super) async fn dequeue_within(
    q: &RedisQueue,
    lanes: &[Lane],
    w: &WorkerName,
    within: Duration,
) -> Option<Delivery> {
    tokio::time::timeout(within, q.dequeue(lanes, w))
        .await
        .ok()
        .map(|d| d.unwrap())
}

#[test]
fn stream_ids_sort_by_time_then_sequence() {
    assert!(id_order("1700000000000-1") < id_order("1700000000000-2"));
    assert!(id_order("999-9") < id_order("1000-0"));
    assert_eq!(id_order("junk"), (u64::MAX, 0));
}

#[tokio::test]
async fn enqueue_dequeue_across_lanes_oldest_first_and_ack_removes() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    q.ping().await.unwrap();
    let (a, b) = (lane("tasks:llm:a"), lane("tasks:web"));
    let w = worker("w");
    let j1 = job(&b);
    let j2 = job(&a);
    q.enqueue(j1.clone()).await.unwrap();
    q.enqueue(j2.clone()).await.unwrap();
    assert_eq!(
        q.depths().await.unwrap(),
        vec![(a.clone(), 1), (b.clone(), 1)]
    );
    let lanes = [a.clone(), b.clone()];
    let d1 = q.dequeue(&lanes, &w).await.unwrap();
    let d2 = q.dequeue(&lanes, &w).await.unwrap();
    assert_eq!(
        d1.job.task_id, j1.task_id,
        "the older job first, whatever its lane"
    );
    assert_eq!(d2.job.task_id, j2.task_id);
    assert_eq!((d1.deliveries, d1.dead_letter.as_deref()), (1, None));
    assert!(
        q.depths().await.unwrap().is_empty(),
        "handed-out jobs are not waiting"
    );
    let mut conn = raw(&url).await;
    let len: usize = conn.xlen(q.stream_key(&b)).await.unwrap();
    assert_eq!(len, 1, "unacknowledged jobs stay in the stream");
    q.ack(&d1).await.unwrap();
    q.ack(&d2).await.unwrap();
    for l in [&a, &b] {
        let len: usize = conn.xlen(q.stream_key(l)).await.unwrap();
        assert_eq!(len, 0, "ack removes the entry");
    }
    let pending: redis::streams::StreamPendingReply =
        conn.xpending(q.stream_key(&a), GROUP).await.unwrap();
    assert_eq!(pending.count(), 0);
    // A worker only gets jobs of its own lanes.
    q.enqueue(job(&a)).await.unwrap();
    assert!(
        dequeue_within(&q, std::slice::from_ref(&b), &w, Duration::from_millis(300))
            .await
            .is_none()
    );
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn a_jobs_position_counts_the_waiting_jobs_of_its_lane_before_it() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let (a, b) = (lane("tasks:llm:a"), lane("tasks:llm:b"));
    let w = worker("w");
    let (a1, b1, a2) = (job(&a), job(&b), job(&a));
    assert_eq!(
        q.position(&a, a1.task_id).await.unwrap(),
        None,
        "no stream yet"
    );
    for j in [&a1, &b1, &a2] {
        q.enqueue(j.clone()).await.unwrap();
    }
    assert_eq!(q.position(&a, a1.task_id).await.unwrap(), Some(1));
    assert_eq!(q.position(&a, a2.task_id).await.unwrap(), Some(2));
    assert_eq!(q.position(&b, b1.task_id).await.unwrap(), Some(1));
    assert_eq!(
        q.position(&b, a1.task_id).await.unwrap(),
        None,
        "other lane"
    );
    // Handed to a worker: no longer waiting, though unacknowledged; the next moves up.
    let d = q.dequeue(std::slice::from_ref(&a), &w).await.unwrap();
    assert_eq!(d.job.task_id, a1.task_id);
    assert_eq!(q.position(&a, a1.task_id).await.unwrap(), None);
    assert_eq!(q.position(&a, a2.task_id).await.unwrap(), Some(1));
    q.ack(&d).await.unwrap();
    assert_eq!(q.position(&a, a2.task_id).await.unwrap(), Some(1));
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn waiting_consumer_is_woken_by_enqueue() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = Arc::new(RedisQueue::connect(&url, &prefix, fast()).await.unwrap());
    let l = lane("tasks:utility");
    let waiter = {
        let (q, l) = (q.clone(), l.clone());
        tokio::spawn(async move { q.dequeue(&[l], &worker("w")).await.unwrap().job })
    };
    let j = job(&l);
    q.enqueue(j.clone()).await.unwrap();
    let got = tokio::time::timeout(PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.task_id, j.task_id);
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn job_of_a_dead_consumer_is_taken_over_after_the_lease() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let l = lane("tasks:llm:m");
    let a = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let j = job(&l);
    a.enqueue(j.clone()).await.unwrap();
    let first = a
        .dequeue(std::slice::from_ref(&l), &worker("w"))
        .await
        .unwrap();
    assert_eq!(first.deliveries, 1);
    let taken_at = Instant::now();
    drop(a); // the process holding the job dies without acknowledging it
    // The same worker name in a new process is a new consumer: it takes the job over
    // only once the lease ran out (dequeue polls for stale entries while it waits).
    let b = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let again = dequeue_within(&b, std::slice::from_ref(&l), &worker("w"), PATIENCE)
        .await
        .expect("the job is delivered again");
    assert!(taken_at.elapsed() >= fast().lease);
    assert_eq!(again.job.task_id, j.task_id);
    assert_eq!(again.receipt, first.receipt, "the same entry, not a copy");
    assert_eq!(again.deliveries, 2);
    assert_eq!(again.dead_letter, None);
    b.ack(&again).await.unwrap();
    let mut conn = raw(&url).await;
    let len: usize = conn.xlen(b.stream_key(&l)).await.unwrap();
    assert_eq!(len, 0);
    delete_keys(&url, &prefix).await.unwrap();
}

/// The consumers in `l`'s group and what each holds.
async fn consumers(url: &str, q: &RedisQueue, l: &Lane) -> HashMap<String, usize> {
    let reply: redis::streams::StreamInfoConsumersReply = raw(url)
        .await
        .xinfo_consumers(q.stream_key(l), GROUP)
        .await
        .unwrap();
    reply
        .consumers
        .into_iter()
        .map(|c| (c.name, c.pending))
        .collect()
}

/// Polls the consumers of `l` until `done` holds of them (a deadline, not a wait).
async fn consumers_until(
    url: &str,
    q: &RedisQueue,
    l: &Lane,
    done: impl Fn(&HashMap<String, usize>) -> bool,
) -> HashMap<String, usize> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let now = consumers(url, q, l).await;
        if done(&now) || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every process names its consumers afresh: the names of gone processes are swept out
/// of the group once idle with nothing pending, never one that still holds a job (Redis
/// would drop the job with it); a live consumer that was swept is made again by its next
/// read, and the gone holder is swept once its job was taken over.
#[tokio::test]
async fn consumers_of_gone_processes_are_swept_but_never_one_holding_a_job() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let l = lane("tasks:llm:m");
    let w = worker("w");
    // The live process, which sweeps (its keeper runs every third of the 200 ms lease).
    let live = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    live.enqueue(job(&l)).await.unwrap();
    let first = live.dequeue(std::slice::from_ref(&l), &w).await.unwrap();
    live.ack(&first).await.unwrap();
    // A process that finished its job and exited, and one that died holding a job.
    let finished = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    finished.enqueue(job(&l)).await.unwrap();
    let done = finished
        .dequeue(std::slice::from_ref(&l), &w)
        .await
        .unwrap();
    finished.ack(&done).await.unwrap();
    let finished_name = finished.consumer_name(&w);
    drop(finished);
    let died = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let held = job(&l);
    died.enqueue(held.clone()).await.unwrap();
    died.dequeue(std::slice::from_ref(&l), &w).await.unwrap();
    let died_name = died.consumer_name(&w);
    drop(died);
    let live_name = live.consumer_name(&w);
    let before = consumers(&url, &live, &l).await;
    assert_eq!(before.len(), 3, "{before:?}");

    let after = consumers_until(&url, &live, &l, |c| c.len() == 1).await;
    assert_eq!(
        after,
        HashMap::from([(died_name.clone(), 1)]),
        "idle consumers with nothing pending are swept, the holder stays"
    );
    assert!(!after.contains_key(&finished_name) && !after.contains_key(&live_name));

    // The live worker's next read makes its consumer again and takes the job over.
    let again = dequeue_within(&live, std::slice::from_ref(&l), &w, PATIENCE)
        .await
        .expect("the dead holder's job is delivered again");
    assert_eq!(again.job.task_id, held.task_id);
    assert_eq!(again.deliveries, 2);
    live.ack(&again).await.unwrap();
    let last = consumers_until(&url, &live, &l, |c| !c.contains_key(&died_name)).await;
    assert!(!last.contains_key(&died_name), "{last:?}");
    assert!(last.values().all(|pending| *pending == 0), "{last:?}");
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn a_live_holder_keeps_its_job_past_the_lease() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let l = lane("tasks:llm:m");
    let a = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let b = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    a.enqueue(job(&l)).await.unwrap();
    let held = a
        .dequeue(std::slice::from_ref(&l), &worker("a"))
        .await
        .unwrap();
    // A long generation: five leases pass while `a` runs the job and renews its lease.
    let stolen = dequeue_within(&b, std::slice::from_ref(&l), &worker("b"), fast().lease * 5).await;
    assert!(stolen.is_none(), "a running job must not be taken over");
    a.ack(&held).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn past_the_retry_limit_the_job_comes_out_as_a_dead_letter() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let l = lane("tasks:rag");
    let w = worker("w");
    let j = job(&l);
    {
        let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
        q.enqueue(j.clone()).await.unwrap();
    }
    // Three processes take the job and die with it.
    for n in 1..=3 {
        let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
        let d = dequeue_within(&q, std::slice::from_ref(&l), &w, PATIENCE)
            .await
            .expect("delivered");
        assert_eq!(d.deliveries, n);
        assert_eq!(d.dead_letter, None);
    }
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let d = dequeue_within(&q, std::slice::from_ref(&l), &w, PATIENCE)
        .await
        .expect("reported");
    assert_eq!(d.job.task_id, j.task_id);
    assert_eq!(d.deliveries, 4);
    let reason = d.dead_letter.clone().expect("a dead letter");
    assert!(reason.contains("4 times"), "{reason}");
    // The worker fails the task and acknowledges: the job is gone for good.
    q.ack(&d).await.unwrap();
    assert!(
        dequeue_within(&q, std::slice::from_ref(&l), &w, fast().lease * 3)
            .await
            .is_none()
    );
    let mut conn = raw(&url).await;
    let len: usize = conn.xlen(q.stream_key(&l)).await.unwrap();
    assert_eq!(len, 0);
    delete_keys(&url, &prefix).await.unwrap();
}

/// The number of clients blocked in a command, from `INFO clients`.
async fn blocked_clients(url: &str) -> usize {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query_async(&mut raw(url).await)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_dropped_dequeue_cancels_its_read_and_loses_nothing() {
    if RedisServer::binary().is_none() {
        eprintln!("note: redis-server not found; private Redis test skipped");
        return;
    }
    let server = RedisServer::start().await.unwrap();
    let url = server.url();
    // A long lease and block: only the cancelled read could take the job, and the lease
    // would not give it back within this test.
    let options = RedisQueueOptions {
        lease: Duration::from_secs(60),
        block: Duration::from_secs(10),
        ..RedisQueueOptions::default()
    };
    let q = RedisQueue::connect(&url, "", options).await.unwrap();
    let l = lane("tasks:web");
    let w = worker("w");
    assert!(
        dequeue_within(&q, std::slice::from_ref(&l), &w, Duration::from_millis(300))
            .await
            .is_none()
    );
    // The abandoned XREADGROUP is ended on the server well before its 10 s block.
    let deadline = Instant::now() + Duration::from_secs(3);
    while blocked_clients(&url).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the dropped read is still blocked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let j = job(&l);
    q.enqueue(j.clone()).await.unwrap();
    let d = dequeue_within(&q, std::slice::from_ref(&l), &w, PATIENCE)
        .await
        .expect("the job was not lost to the dropped read");
    assert_eq!((d.job.task_id, d.deliveries), (j.task_id, 1));
}

#[tokio::test]
async fn the_queue_recovers_from_a_redis_restart() {
    if RedisServer::binary().is_none() {
        eprintln!("note: redis-server not found; private Redis test skipped");
        return;
    }
    let mut server = RedisServer::start().await.unwrap();
    let url = server.url();
    let q = Arc::new(RedisQueue::connect(&url, "", fast()).await.unwrap());
    let l = lane("tasks:llm:m");
    let w = worker("w");
    q.enqueue(job(&l)).await.unwrap();
    let d = q.dequeue(std::slice::from_ref(&l), &w).await.unwrap();
    q.ack(&d).await.unwrap();

    // A worker is waiting for work when Redis goes away.
    let waiter = {
        let (q, l, w) = (q.clone(), l.clone(), w.clone());
        tokio::spawn(async move { q.dequeue(&[l], &w).await })
    };
    server.stop().await.unwrap();
    assert!(matches!(q.ping().await, Err(QueueError::Backend(_))));
    assert!(matches!(
        q.enqueue(job(&l)).await,
        Err(QueueError::Backend(_))
    ));
    assert!(!waiter.is_finished(), "the waiting worker keeps waiting");

    // Redis comes back empty (no persistence): groups are gone, the queue re-creates them.
    server.restart().await.unwrap();
    let j = job(&l);
    let deadline = Instant::now() + PATIENCE;
    while let Err(e) = q.enqueue(j.clone()).await {
        assert!(Instant::now() < deadline, "enqueue did not recover: {e}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let d = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("the waiting worker got the job")
        .unwrap()
        .unwrap();
    assert_eq!(d.job.task_id, j.task_id);
    q.ping().await.unwrap();
    q.ack(&d).await.unwrap();
    assert!(q.depths().await.unwrap().is_empty());
}

/// An entry says how far Redis's clock read from its writer's, and a reader takes the
/// job's times onto its own clock through it: this process's own entry says they agree;
/// a job queued on a laptop whose clock reads 20 s ahead (made now and left for others
/// for a second, by that clock) comes out made now and left until a second on by this
/// one, not twenty seconds from now.
#[tokio::test]
async fn a_job_from_a_process_whose_clock_is_ahead_is_read_on_this_clock() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let l = lane("tasks:llm:a");
    let key = q.class_stream_key(&l, Priority::Interactive);
    q.enqueue(job(&l)).await.unwrap();
    let mut conn = raw(&url).await;
    let entries: redis::streams::StreamRangeReply = conn.xrange_all(&key).await.unwrap();
    assert_eq!(entries.ids[0].get::<i64>(FIELD_AHEAD), Some(0));
    let w = worker("w");
    let ours = dequeue_within(&q, std::slice::from_ref(&l), &w, PATIENCE)
        .await
        .unwrap();
    q.ack(&ours).await.unwrap();

    let ahead = chrono::TimeDelta::seconds(20);
    let laptop_now = chrono::Utc::now() + ahead;
    let theirs = Job {
        created_at: laptop_now,
        avoid: vec![w.clone()],
        avoid_until: Some(laptop_now + chrono::TimeDelta::seconds(1)),
        ..job(&l)
    };
    let _: String = redis::cmd("XADD")
        .arg(&key)
        .arg("*")
        .arg(FIELD_JOB)
        .arg(serde_json::to_string(&theirs).unwrap())
        .arg(FIELD_PASSES)
        .arg(0)
        .arg(FIELD_AHEAD)
        .arg(-ahead.num_milliseconds())
        .query_async(&mut conn)
        .await
        .unwrap();
    let d = dequeue_within(&q, std::slice::from_ref(&l), &w, Duration::from_secs(5))
        .await
        .expect("left for others a second, not twenty");
    let taken = chrono::Utc::now();
    let made = d.job.created_at - (laptop_now - ahead);
    assert!(made.abs() < chrono::TimeDelta::milliseconds(100), "{made}");
    let until = d.job.avoid_until.unwrap();
    assert!(until <= taken, "taken at {taken}, left until {until}");
    let waiting_since = d.job.waiting_since.unwrap();
    assert!(
        (waiting_since - (laptop_now - ahead)).abs() < chrono::TimeDelta::seconds(1),
        "{waiting_since}"
    );
    q.ack(&d).await.unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}

/// A Redis that does not let this process ask its time (an ACL without `TIME`) still
/// queues and hands out jobs: their times are then read as on this process's clock.
#[tokio::test]
async fn jobs_travel_where_redis_will_not_tell_its_time() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let user = format!("no-time-{}", prefix.trim_end_matches(':'));
    let mut admin = raw(&url).await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-time")
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut as_user = reqwest::Url::parse(&url).unwrap();
    as_user.set_username(&user).unwrap();
    as_user.set_password(Some("secret")).unwrap();
    let q = RedisQueue::connect(as_user.as_str(), &prefix, fast())
        .await
        .unwrap();
    let l = lane("tasks:llm:a");
    let sent = job(&l);
    q.enqueue(sent.clone()).await.unwrap();
    let d = dequeue_within(&q, std::slice::from_ref(&l), &worker("w"), PATIENCE)
        .await
        .expect("the job, though Redis keeps its time to itself");
    assert_eq!(d.job.task_id, sent.task_id);
    assert_eq!(d.job.created_at, sent.created_at);
    q.ack(&d).await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .query_async(&mut admin)
        .await
        .unwrap();
    delete_keys(&url, &prefix).await.unwrap();
}

/// A cancelled task's job leaves its class's streams while it waits (fresh or queued
/// again), but not once a worker took it: that one the worker skips.
#[tokio::test]
async fn a_waiting_job_is_withdrawn_but_not_one_already_taken() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let q = RedisQueue::connect(&url, &prefix, fast()).await.unwrap();
    let a = lane("tasks:llm:a");
    let w = worker("w");
    let (first, second) = (job(&a), job(&a));
    let again = Job {
        waiting_since: Some(chrono::Utc::now() - chrono::Duration::seconds(5)),
        ..job(&a)
    };
    let title = Job {
        priority: Priority::Background,
        ..job(&a)
    };
    for j in [&first, &second, &again, &title] {
        q.enqueue(j.clone()).await.unwrap();
    }
    let withdraw = |j: &Job, p: Priority| q.withdraw(&a, p, j.task_id);
    assert!(withdraw(&second, Priority::Interactive).await.unwrap());
    assert!(
        !withdraw(&second, Priority::Interactive).await.unwrap(),
        "once"
    );
    assert!(withdraw(&again, Priority::Interactive).await.unwrap());
    assert!(
        !withdraw(&title, Priority::Interactive).await.unwrap(),
        "only its class's streams are looked at"
    );
    assert!(withdraw(&title, Priority::Background).await.unwrap());
    let taken = q.dequeue(std::slice::from_ref(&a), &w).await.unwrap();
    assert_eq!(taken.job.task_id, first.task_id);
    assert!(
        !withdraw(&first, Priority::Interactive).await.unwrap(),
        "a job a worker took stays with it"
    );
    q.ack(&taken).await.unwrap();
    assert!(q.depths().await.unwrap().is_empty());
    assert!(
        dequeue_within(&q, std::slice::from_ref(&a), &w, Duration::from_millis(300))
            .await
            .is_none(),
        "nothing withdrawn is handed out"
    );
    delete_keys(&url, &prefix).await.unwrap();
}
