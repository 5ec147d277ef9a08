//! Placement: among workers that serve a model, the one that has it loaded and a free
//! slot gets the task.

use std::time::{Duration, Instant};

use coordinator::config::{BackendConfig, BackendKind};
use serde_json::{Value, json};

use crate::helpers::{MODEL, spawn_app_with, spawn_fake};

#[tokio::test]
async fn a_worker_with_the_model_loaded_gets_the_task() {
    let cold = spawn_fake().await;
    let warm = spawn_fake().await;
    let warm_url = warm.base_url();
    let app = spawn_app_with(cold, |c| {
        c.backends[0].name = "cold".into();
        c.backends.push(BackendConfig {
            name: "warm".into(),
            kind: BackendKind::Ollama,
            url: warm_url,
            models: None,
            api_key_env: None,
            max_concurrency: 4,
            context_length: None,
            model_context_length: Default::default(),
            max_num_ctx: None,
        });
        c.timeouts.discovery_interval_s = 1;
    })
    .await;
    // Load the model on `warm` only (the fake counts a model as loaded once used).
    let res = app
        .post("/v1/chat/completions", json!({"model": format!("{MODEL}@warm"), "messages": [{"role": "user", "content": "warm up"}]}))
        .await;
    assert_eq!(res.status(), 200);
    // Discovery reads /api/ps every second; wait until the router sees the loaded model.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let workers: Value = app.get("/workers").await.json().await.unwrap();
        let loaded = workers["workers"].as_array().unwrap().iter().any(|w| {
            w["name"] == "warm" && w["loaded"].as_array().unwrap().iter().any(|m| m == MODEL)
        });
        if loaded {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "discovery never saw the loaded model: {workers}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..6 {
        let res = app
            .post("/v1/chat/completions", json!({"model": "auto", "messages": [{"role": "user", "content": format!("q{i}")}]}))
            .await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["x-coordinator-worker"], "warm", "request {i}");
    }
    assert_eq!(
        app.fake.requests_to("/api/chat").len(),
        0,
        "the cold machine ran nothing"
    );
}
