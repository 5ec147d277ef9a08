//! Clocks in cluster mode: a worker machine whose clock drifted tells its times on it,
//! and every other process reads them on its own through Redis's clock. Runs when
//! `DATABASE_URL` and `REDIS_URL` are set.

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use coordinator::backend::activity::Running;
use coordinator::cluster::Heartbeat;
use coordinator::domain::ModelName;
use redis::AsyncCommands;
use serde_json::Value;

use crate::cluster::{cleanup, cluster_config, env, get_json, serve_in_process};
use crate::cluster_placement::worker_on;
use crate::helpers::{MODEL, spawn_fake};

/// A worker's heartbeat says how far Redis's clock reads from its own (here none: both
/// are this machine's). A laptop whose clock reads 20 s ahead of Redis's publishes an
/// answer it began 3 s ago by that clock; `serve`'s `/workers` (what placement reads)
/// shows it begun 3 s ago on serve's clock, not 17 s from now, and the laptop's Ollama 20
/// s ahead.
#[tokio::test]
async fn a_worker_whose_clock_is_ahead_is_read_on_serves_clock() {
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    let (moon_stop, moon) = worker_on(&env, "moon", &fake).await;
    let (base, serve_stop, serve) = serve_in_process(cluster_config(&env, &env.redis)).await;
    let mut conn = redis::Client::open(env.redis.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let moon_key = format!("{}worker:moon", env.prefix);
    // Polled: the heartbeat is external state.
    let deadline = Instant::now() + Duration::from_secs(10);
    let beat: String = loop {
        if let Some(beat) = conn.get(&moon_key).await.unwrap() {
            break beat;
        }
        assert!(Instant::now() < deadline, "no heartbeat from moon");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let moon_beat: Value = serde_json::from_str(&beat).unwrap();
    assert_eq!(moon_beat["redis_ahead_ms"], 0, "{moon_beat}");

    let ahead = TimeDelta::seconds(20);
    let now = Utc::now();
    let laptop_now = now + ahead;
    let model = ModelName::parse(MODEL).unwrap();
    let mut status = coordinator::testkit::samples::idle_worker("laptop", &[MODEL]);
    status.running = vec![Running {
        model: model.clone(),
        started_at: laptop_now - TimeDelta::seconds(3),
        first_token_at: Some(laptop_now - TimeDelta::seconds(1)),
        tokens: 12,
        prompt_tokens: 200,
        cold: false,
        cached: false,
        priority: Default::default(),
    }];
    // Its Ollama runs on the laptop, on the laptop's clock.
    status.clock_ahead_ms = Some(0);
    let heartbeat = Heartbeat {
        status,
        tools: vec![(model, Some(false))],
        at: laptop_now,
        redis_ahead_ms: Some(-ahead.num_milliseconds()),
    };
    let _: () = conn
        .set_ex(
            format!("{}worker:laptop", env.prefix),
            serde_json::to_string(&heartbeat).unwrap(),
            30,
        )
        .await
        .unwrap();
    let _: () = conn
        .sadd(format!("{}workers", env.prefix), "laptop")
        .await
        .unwrap();

    let http = reqwest::Client::new();
    let laptop = loop {
        let workers = get_json(&http, &format!("{base}/workers")).await;
        if let Some(w) = workers["workers"]
            .as_array()
            .and_then(|ws| ws.iter().find(|w| w["name"] == "laptop"))
        {
            break w.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no laptop in /workers: {workers}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let time = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .to_utc()
    };
    let started = time(&laptop["running"][0]["started_at"]);
    let begun = started - (now - TimeDelta::seconds(3));
    assert!(begun.abs() < TimeDelta::milliseconds(500), "{laptop}");
    let first = time(&laptop["running"][0]["first_token_at"]);
    assert!(
        (first - (now - TimeDelta::seconds(1))).abs() < TimeDelta::milliseconds(500),
        "{laptop}"
    );
    let found = laptop["clock_ahead_ms"].as_i64().unwrap();
    assert!((found - 20_000).abs() < 500, "{laptop}");

    let _ = serve_stop.send(());
    let _ = moon_stop.send(());
    serve.await.unwrap().unwrap();
    moon.await.unwrap().unwrap();
    cleanup(&env).await;
}
