//! Sharing task times through the Redis at `$REDIS_URL` (skipped with a note when unset),
//! or a private `redis-server` for the restart test.

use std::time::Duration;

use redis::AsyncCommands;

use super::*;
use crate::metrics::Household;
use crate::metrics::timing::TOTAL;
use crate::testkit::redis_server::{RedisServer, delete_keys, redis_url_or_skip, unique_prefix};

const PATIENCE: Duration = Duration::from_secs(10);

fn names(model: &str, machine: &str) -> (ModelName, WorkerName) {
    (
        ModelName::parse(model).unwrap(),
        WorkerName::parse(machine).unwrap(),
    )
}

/// One finished task of `model` on `machine`, as its worker records it.
fn ended(metrics: &Metrics, model: &str, machine: &str) {
    let (model, machine) = names(model, machine);
    metrics.task_ended(&TaskTimes {
        model: &model,
        machine: &machine,
        queue_wait_ms: Some(5),
        first_token_ms: Some(300),
        total_ms: Some(1300),
        completion_tokens: Some(20),
    });
}

/// How many tasks of `model` on `machine` the total-time histogram holds (0 when none).
fn count(metrics: &Metrics, model: &str, machine: &str) -> u64 {
    let series = format!("{TOTAL}_count{{model=\"{model}\",machine=\"{machine}\"}} ");
    let text = metrics.render(&Household::default());
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |n| n.parse().unwrap())
}

async fn conn(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Waits (bounded) until `check` holds: the state under test is changed by a loop
/// running elsewhere.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn entries(url: &str, key: &str) -> usize {
    conn(url).await.xlen(key).await.unwrap()
}

/// A started process: its metrics, and what stops it.
struct Process {
    metrics: Arc<Metrics>,
    tracker: TaskTracker,
    stop: CancellationToken,
    publishing: Publishing,
}

async fn process(url: &str, prefix: &str, follow: bool) -> Process {
    let (metrics, sharing) = Sharing::open(url, prefix, follow).await.unwrap();
    let (tracker, stop) = (TaskTracker::new(), CancellationToken::new());
    let publishing = sharing.start(&tracker, &stop);
    Process {
        metrics,
        tracker,
        stop,
        publishing,
    }
}

impl Process {
    async fn stop(self) {
        self.stop.cancel();
        self.publishing.finish().await;
        self.tracker.close();
        tokio::time::timeout(PATIENCE, self.tracker.wait())
            .await
            .expect("the follower stops");
    }
}

/// `serve` records a worker process's task times, skips what it could not read, counts
/// its own workers' tasks once, and nothing shared before it started.
#[tokio::test]
async fn serve_records_every_other_process_s_task_times_once() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let key = stream_key(&prefix);
    let worker = process(&url, &prefix, false).await;
    ended(&worker.metrics, "qwen3:8b", "early");
    until("the early task is shared", || async {
        entries(&url, &key).await == 1
    })
    .await;

    let serve = process(&url, &prefix, true).await;
    ended(&serve.metrics, "qwen3:8b", "home");
    until("serve's own task is shared", || async {
        entries(&url, &key).await == 2
    })
    .await;
    let _: String = conn(&url)
        .await
        .xadd(&key, "*", &[(FIELD, "not times")])
        .await
        .unwrap();
    ended(&worker.metrics, "qwen3:8b", "laptop");
    // Entries are read in order: once the last one is recorded, the others were seen.
    until("serve records the worker's task", || async {
        count(&serve.metrics, "qwen3:8b", "laptop") == 1
    })
    .await;
    assert_eq!(count(&serve.metrics, "qwen3:8b", "home"), 1);
    assert_eq!(count(&serve.metrics, "qwen3:8b", "early"), 0);
    // The worker process keeps its own, and reads nobody's.
    assert_eq!(count(&worker.metrics, "qwen3:8b", "laptop"), 1);
    assert_eq!(count(&worker.metrics, "qwen3:8b", "home"), 0);

    worker.stop().await;
    serve.stop().await;
    delete_keys(&url, &prefix).await.unwrap();
}

/// A publisher that cannot keep up never holds a task: what does not fit the outbox is
/// dropped, everything is still recorded locally, and a stopping process writes what
/// the outbox holds.
#[tokio::test]
async fn a_full_outbox_drops_task_times_rather_than_wait() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let (metrics, sharing) = Sharing::open(&url, &prefix, false).await.unwrap();
    // Nothing writes yet: the outbox fills, and the tasks after that go on regardless.
    for _ in 0..OUTBOX_SIZE + 10 {
        ended(&metrics, "qwen3:8b", "laptop");
    }
    assert_eq!(
        count(&metrics, "qwen3:8b", "laptop"),
        u64::try_from(OUTBOX_SIZE).unwrap() + 10
    );
    let (tracker, stop) = (TaskTracker::new(), CancellationToken::new());
    sharing.start(&tracker, &stop).finish().await;
    assert_eq!(entries(&url, &stream_key(&prefix)).await, OUTBOX_SIZE);
    delete_keys(&url, &prefix).await.unwrap();
}

/// Redis restarts: the follower reconnects with backoff and records what is shared after.
#[tokio::test]
async fn following_survives_a_redis_restart() {
    if RedisServer::binary().is_none() {
        eprintln!("note: redis-server not found; private Redis test skipped");
        return;
    }
    let mut server = RedisServer::start().await.unwrap();
    let url = server.url();
    let serve = process(&url, "", true).await;
    let worker = process(&url, "", false).await;
    ended(&worker.metrics, "qwen3:8b", "laptop");
    until("the first task is recorded", || async {
        count(&serve.metrics, "qwen3:8b", "laptop") == 1
    })
    .await;
    server.restart().await.unwrap();
    until("Redis is back", || async {
        let Ok(client) = redis::Client::open(url.as_str()) else {
            return false;
        };
        match client.get_multiplexed_async_connection().await {
            Ok(mut c) => redis::cmd("PING")
                .query_async::<String>(&mut c)
                .await
                .is_ok(),
            Err(_) => false,
        }
    })
    .await;
    ended(&worker.metrics, "qwen3:8b", "laptop");
    until("the task after the restart is recorded", || async {
        count(&serve.metrics, "qwen3:8b", "laptop") == 2
    })
    .await;
    worker.stop().await;
    serve.stop().await;
}

#[test]
fn shared_times_read_back_as_they_were() {
    let (model, machine) = names("qwen3:8b", "laptop");
    let times = TaskTimes {
        model: &model,
        machine: &machine,
        queue_wait_ms: None,
        first_token_ms: Some(1),
        total_ms: Some(2),
        completion_tokens: None,
    };
    let shared = Shared::of(Uuid::now_v7(), &times);
    let text = serde_json::to_string(&shared).unwrap();
    let back: Shared = serde_json::from_str(&text).unwrap();
    assert_eq!(back, shared);
    assert_eq!(back.times().total_ms, Some(2));
    // A machine name the domain refuses is not read.
    let bad = text.replace("\"laptop\"", "\"\"");
    assert!(serde_json::from_str::<Shared>(&bad).is_err(), "{bad}");
}
