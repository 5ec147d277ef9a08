//! Tests of [`RedisEvents`] against the Redis at `$REDIS_URL` (skipped with a note when
//! unset), or a private `redis-server` for the restart test.

use std::time::Duration;

use futures::StreamExt;
use redis::AsyncCommands;
use tokio::sync::mpsc;

use super::*;
use crate::chat::{Chunk, FinishReason, Usage};
use crate::domain::WorkerName;
use crate::testkit::redis_server::{RedisServer, delete_keys, redis_url_or_skip, unique_prefix};

const PATIENCE: Duration = Duration::from_secs(5);

fn text(t: &str) -> TaskEvent {
    TaskEvent::Chunk {
        chunk: Chunk::Content { text: t.into() },
    }
}

fn done() -> TaskEvent {
    TaskEvent::Chunk {
        chunk: Chunk::Done {
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
        },
    }
}

/// Forwards a subscription's events to a channel, which closes when the stream ends.
fn forward(mut stream: EventStream) -> mpsc::UnboundedReceiver<TaskEvent> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(ev) = stream.next().await {
            if tx.send(ev).is_err() {
                return;
            }
        }
    });
    rx
}

async fn next(rx: &mut mpsc::UnboundedReceiver<TaskEvent>) -> Option<TaskEvent> {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("an event or the end in time")
}

async fn ttl(url: &str, key: &str) -> i64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    conn.ttl(key).await.unwrap()
}

#[tokio::test]
async fn tokens_arrive_one_by_one_as_they_are_published() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let bus = RedisEvents::connect(&url, &prefix).await.unwrap();
    bus.ping().await.unwrap();
    let id = TaskId::new();
    let mut rx = forward(bus.subscribe(id).await);
    let started = TaskEvent::Started {
        worker: WorkerName::parse("moon").unwrap(),
        loading: true,
    };
    // Each event is seen before the next one is published.
    for ev in [started, text("Hel"), text("lo"), done()] {
        bus.publish(id, ev.clone()).await;
        assert_eq!(next(&mut rx).await, Some(ev));
    }
    assert_eq!(next(&mut rx).await, None, "the stream ends after Done");
    let left = ttl(&url, &bus.stream_key(id)).await;
    assert!(
        (1..=3600).contains(&left),
        "a finished task's stream expires within the hour, ttl {left}"
    );
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn a_late_subscriber_gets_every_event_from_the_first() {
    let Some(url) = redis_url_or_skip() else {
        return;
    };
    let prefix = unique_prefix();
    let bus = RedisEvents::connect(&url, &prefix).await.unwrap();
    let id = TaskId::new();
    bus.publish(id, text("a")).await;
    let left = ttl(&url, &bus.stream_key(id)).await;
    assert!(left > 3600, "a running task's stream lives on, ttl {left}");
    bus.publish(id, text("b")).await;
    let failed = TaskEvent::Failed {
        message: "boom".into(),
    };
    bus.publish(id, failed.clone()).await;
    // Published after the terminal event: never seen.
    bus.publish(id, text("late")).await;
    let got: Vec<TaskEvent> = tokio::time::timeout(PATIENCE, bus.subscribe(id).await.collect())
        .await
        .unwrap();
    assert_eq!(got, vec![text("a"), text("b"), failed]);
    // Other tasks' streams are separate.
    let other = TaskId::new();
    bus.publish(other, done()).await;
    let got: Vec<TaskEvent> = tokio::time::timeout(PATIENCE, bus.subscribe(other).await.collect())
        .await
        .unwrap();
    assert_eq!(got, vec![done()]);
    delete_keys(&url, &prefix).await.unwrap();
}

#[tokio::test]
async fn a_subscription_survives_a_redis_restart() {
    if RedisServer::binary().is_none() {
        eprintln!("note: redis-server not found; private Redis test skipped");
        return;
    }
    let mut server = RedisServer::start().await.unwrap();
    let bus = RedisEvents::connect(&server.url(), "").await.unwrap();
    let id = TaskId::new();
    let mut rx = forward(bus.subscribe(id).await);
    bus.publish(id, text("before")).await;
    assert_eq!(next(&mut rx).await, Some(text("before")));
    server.restart().await.unwrap();
    // The subscriber reconnects and keeps reading after the last id it saw; ids are
    // time-based, so what is written to the emptied Redis still comes after it.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while bus.ping().await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Redis did not come back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bus.publish(id, done()).await;
    assert_eq!(next(&mut rx).await, Some(done()));
    assert_eq!(next(&mut rx).await, None);
}
