//! Cluster mode for the text and embedding routes: `serve` with no backend of its own
//! answers `/api/generate` from a worker process (its job through Redis, the text form
//! with it), and `/api/embed`, `/v1/embeddings` and `/api/show` from the machine a
//! worker's heartbeat names. Runs when `DATABASE_URL` and `REDIS_URL` are set.

use std::time::Duration;

use coordinator::startup::WorkerProcess;
use coordinator::testkit::fake_llm::FakeLlm;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::cluster::{
    backend, cleanup, cluster_config, env, eventually, get_json, serve_in_process, worker_names,
};
use crate::helpers::MODEL;

const EMBEDDER: &str = "nomic-embed-text";

#[tokio::test]
async fn serve_answers_text_embeddings_and_show_through_a_worker_process() {
    let Some(env) = env() else { return };
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model(EMBEDDER)
        .spawn()
        .await
        .unwrap();
    let mut wcfg = cluster_config(&env, &env.redis);
    wcfg.backends = vec![backend("ollama", &fake)];
    let worker = WorkerProcess::build(wcfg, Some("gpu-desktop"))
        .await
        .unwrap();
    let (wstop, wrx) = oneshot::channel::<()>();
    let wtask = tokio::spawn(worker.run_until_stopped(async move {
        let _ = wrx.await;
    }));
    let (base, stop, serve) = serve_in_process(cluster_config(&env, &env.redis)).await;
    let http = reqwest::Client::new();
    eventually(Duration::from_secs(10), "the worker shows up", || async {
        worker_names(&http, &base)
            .await
            .contains(&"gpu-desktop".to_owned())
    })
    .await;

    let res = http
        .post(format!("{base}/api/generate"))
        .json(&json!({"model": MODEL, "prompt": "fn main() {", "suffix": "}"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-coordinator-worker"], "gpu-desktop");
    let text: String = res
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|l| l["response"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        text,
        format!("Echo from {MODEL}: fn main() {{ [suffix: }}]")
    );
    let sent = fake
        .requests_to("/api/generate")
        .pop()
        .unwrap()
        .body
        .unwrap();
    assert_eq!(sent["suffix"], "}");

    let res = http
        .post(format!("{base}/api/embed"))
        .json(&json!({"model": EMBEDDER, "input": ["a", "b"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-coordinator-worker"], "gpu-desktop");
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["embeddings"].as_array().unwrap().len(), 2);
    let row = get_json(&http, &format!("{base}/tasks/{id}")).await;
    assert_eq!(row["status"], "done", "{row}");
    assert_eq!(row["prompt"], "[embedding of 2 inputs]");

    let res = http
        .post(format!("{base}/v1/embeddings"))
        .json(&json!({"model": EMBEDDER, "input": "a"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = http
        .post(format!("{base}/api/show"))
        .json(&json!({"model": MODEL}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let shown: Value = res.json().await.unwrap();
    assert!(
        shown["model_info"].is_object() && shown["modelfile"].is_string(),
        "{shown}"
    );

    wstop.send(()).unwrap();
    wtask.await.unwrap().unwrap();
    stop.send(()).unwrap();
    serve.await.unwrap().unwrap();
    cleanup(&env).await;
}
