//! Cluster mode's `/metrics`: `serve` shows the task times of every machine, both those
//! its own workers ran (once) and those a `coordinator worker` process ran elsewhere
//! (shared through Redis). Runs when `DATABASE_URL` and `REDIS_URL` are set.

use std::time::Duration;

use redis::AsyncCommands;
use serde_json::json;

use crate::cluster::{
    backend, cleanup, cluster_config, env, eventually, serve_in_process, spawn_worker, worker_names,
};
use crate::helpers::{MODEL, parse_prometheus, spawn_fake};

/// `serve`'s `/metrics` as text.
async fn metrics_text(http: &reqwest::Client, base: &str) -> String {
    http.get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of sample `name{model=MODEL,machine=machine}` in `serve`'s `/metrics`, if any.
async fn sample(http: &reqwest::Client, base: &str, name: &str, machine: &str) -> Option<f64> {
    let text = metrics_text(http, base).await;
    let labels = format!("model=\"{MODEL}\",machine=\"{machine}\"");
    parse_prometheus(&text)
        .into_iter()
        .find(|(n, l, _)| n == name && *l == labels)
        .map(|s| s.2)
}

async fn chat_on(http: &reqwest::Client, base: &str, machine: &str, text: &str) {
    let res = http
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({
            "model": format!("{MODEL}@{machine}"),
            "messages": [{"role": "user", "content": text}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{machine}");
    res.text().await.unwrap();
}

/// Entries in the cluster's stream of shared task times.
async fn shared_entries(redis_url: &str, prefix: &str) -> usize {
    let mut conn = redis::Client::open(redis_url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    conn.xlen(format!("{prefix}metrics")).await.unwrap()
}

#[tokio::test]
async fn serve_s_metrics_carry_a_worker_process_s_task_times() {
    let Some(env) = env() else { return };
    let (home, laptop) = (spawn_fake().await, spawn_fake().await);
    let mut config = cluster_config(&env, &env.redis);
    config.backends = vec![backend("home", &home)];
    let (base, stop, serve) = serve_in_process(config).await;
    let _worker = spawn_worker(&env, "laptop", &laptop);
    let http = reqwest::Client::new();
    eventually(Duration::from_secs(20), "both machines serve", || async {
        let names = worker_names(&http, &base).await;
        names.contains(&"home".to_owned()) && names.contains(&"laptop".to_owned())
    })
    .await;

    // A task on serve's own machine: recorded by serve, and shared for other front doors.
    chat_on(&http, &base, "home", "on this machine").await;
    eventually(Duration::from_secs(10), "serve shares its task", || async {
        shared_entries(&env.redis, &env.prefix).await == 1
    })
    .await;
    // A task on the worker process's machine. The stream is read in order, so once serve
    // shows this one it has read its own entry too (and must not have counted it again).
    chat_on(&http, &base, "laptop", "on the other machine").await;
    let duration = "coordinator_task_duration_seconds_count";
    eventually(
        Duration::from_secs(10),
        "serve's /metrics shows the worker process's task",
        || async { sample(&http, &base, duration, "laptop").await == Some(1.0) },
    )
    .await;
    assert_eq!(shared_entries(&env.redis, &env.prefix).await, 2);
    for name in [
        "coordinator_time_to_first_token_seconds_count",
        "coordinator_queue_wait_seconds_count",
        duration,
    ] {
        assert_eq!(
            sample(&http, &base, name, "laptop").await,
            Some(1.0),
            "{name}"
        );
        assert_eq!(
            sample(&http, &base, name, "home").await,
            Some(1.0),
            "{name}"
        );
    }
    let buckets = "coordinator_task_duration_seconds_bucket";
    let text = metrics_text(&http, &base).await;
    let inf = format!("model=\"{MODEL}\",machine=\"laptop\",le=\"+Inf\"");
    assert!(
        parse_prometheus(&text)
            .iter()
            .any(|(n, l, v)| n == buckets && *l == inf && *v == 1.0),
        "{text}"
    );

    stop.send(()).unwrap();
    serve.await.unwrap().unwrap();
    cleanup(&env).await;
}
