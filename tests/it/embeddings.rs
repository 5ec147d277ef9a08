//! Embeddings through Coordinator: `POST /api/embed`, `/api/embeddings` and
//! `/v1/embeddings`, routed by model to a machine that serves it (the next one when it
//! fails), in each API's shape (floats or base64), counted in `/metrics`, recorded as a
//! row that keeps none of the input text. And a bad body on every new route: the API's
//! error shape naming the field, and no row.

use coordinator::config::{BackendConfig, BackendKind};
use coordinator::testkit::fake_llm::{Failure, FakeLlm};
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, spawn_app_with};

const EMBEDDER: &str = "nomic-embed-text";

async fn app_with_embedder() -> TestApp {
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model(EMBEDDER)
        .spawn()
        .await
        .unwrap();
    spawn_app_with(fake, |_| {}).await
}

/// No task row was written.
pub async fn assert_no_rows(app: &TestApp) {
    let rows = app.rows().await;
    assert!(rows.is_empty(), "{rows:?}");
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn header(res: &reqwest::Response, name: &str) -> String {
    res.headers()[name].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn ollama_embed_answers_one_vector_per_input_and_records_no_text() {
    let app = app_with_embedder().await;
    let res = app
        .post(
            "/api/embed",
            json!({"model": EMBEDDER, "input": ["私の猫はミケ", "the cat sat"], "truncate": true}),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "x-coordinator-worker"), "moon");
    let id = header(&res, "x-coordinator-task-id");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["model"], EMBEDDER);
    let vectors = body["embeddings"].as_array().unwrap();
    assert_eq!(vectors.len(), 2);
    assert_eq!(vectors[0].as_array().unwrap().len(), 64);
    assert_ne!(vectors[0], vectors[1]);
    assert!(body["prompt_eval_count"].as_u64().unwrap() > 0);
    let sent = app.last_backend_body("/api/embed");
    assert_eq!(sent["input"][0], "私の猫はミケ");

    let row = app.task(&id).await;
    assert_eq!(row["status"], "done", "{row}");
    assert_eq!(row["worker_id"], "moon");
    assert_eq!(row["model"], EMBEDDER);
    assert_eq!(row["prompt"], "[embedding of 2 inputs]");
    assert_eq!(row["remember"], false);
    let text = row.to_string();
    assert!(
        !text.contains("ミケ") && !text.contains("cat sat"),
        "{text}"
    );

    let res = app
        .post(
            "/api/embeddings",
            json!({"model": EMBEDDER, "prompt": "the cat sat"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let legacy: Value = res.json().await.unwrap();
    assert_eq!(legacy["embedding"], vectors[1]);

    // Ollama's `x:latest` is `x`; the machine is asked by the name it lists.
    let res = app
        .post(
            "/api/embed",
            json!({"model": format!("{EMBEDDER}:latest"), "input": "x"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(app.last_backend_body("/api/embed")["model"], EMBEDDER);

    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("coordinator_embeddings_total 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("coordinator_embedded_inputs_total 4\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn openai_embeddings_in_floats_or_base64_with_dimensions_on_an_openai_backend() {
    let fake = FakeLlm::builder().model(EMBEDDER).spawn().await.unwrap();
    let url = fake.openai_base_url();
    let app = spawn_app_with(fake, |c| {
        c.backends[0].kind = BackendKind::Openai;
        c.backends[0].url = url;
    })
    .await;
    let res = app
        .post(
            "/v1/embeddings",
            json!({"model": EMBEDDER, "input": "hello"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], EMBEDDER);
    assert_eq!(body["data"][0]["object"], "embedding");
    assert_eq!(body["data"][0]["index"], 0);
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let full = floats(&body["data"][0]["embedding"]);
    assert_eq!(full.len(), 64);
    assert!(app.fake.requests_to("/v1/embeddings").len() == 1);

    let res = app
        .post(
            "/v1/embeddings",
            json!({"model": EMBEDDER, "input": ["hello", "world"], "encoding_format": "base64",
                   "dimensions": 16}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(app.last_backend_body("/v1/embeddings")["dimensions"], 16);
    let b64 = body["data"][1]["index"].as_u64().unwrap();
    assert_eq!(b64, 1);
    let first = decode_base64_f32(body["data"][0]["embedding"].as_str().unwrap());
    assert_eq!(first.len(), 16);
    let norm: f32 = first.iter().map(|x| x * x).sum();
    assert!(
        (norm - 1.0).abs() < 1e-4,
        "shortened and normalised: {norm}"
    );
}

/// Standard base64 of little-endian `f32`s, decoded the long way (no crate).
fn decode_base64_f32(text: &str) -> Vec<f32> {
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut bytes = Vec::new();
    for c in text.chars().filter(|c| *c != '=') {
        bits = (bits << 6) | alphabet.find(c).unwrap() as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            bytes.push((bits >> n) as u8);
        }
    }
    bytes
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[tokio::test]
async fn an_embedding_fails_over_to_another_machine_and_unknown_models_are_404() {
    let bad = FakeLlm::builder().model(EMBEDDER).spawn().await.unwrap();
    bad.update_knobs(|k| {
        k.fail_next = 1000;
        k.failure = Failure::Status(500);
    });
    let good = FakeLlm::builder().model(EMBEDDER).spawn().await.unwrap();
    let good_url = good.base_url();
    let app = spawn_app_with(bad, |c| {
        let mut sun: BackendConfig = c.backends[0].clone();
        sun.name = "sun".into();
        sun.url = good_url;
        c.backends.push(sun);
    })
    .await;
    for _ in 0..3 {
        let res = app
            .post("/api/embed", json!({"model": EMBEDDER, "input": "x"}))
            .await;
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
        assert_eq!(header(&res, "x-coordinator-worker"), "sun");
    }
    assert_eq!(good.requests_to("/api/embed").len(), 3);
    // Pinned to the failing machine: a 502 naming the task, whose row says why.
    let res = app
        .post(
            "/v1/embeddings",
            json!({"model": format!("{EMBEDDER}@moon"), "input": "x"}),
        )
        .await;
    assert_eq!(res.status(), 502);
    let body: Value = res.json().await.unwrap();
    let id = body["error"]["task_id"].as_str().unwrap();
    let row = app.task(id).await;
    assert_eq!(row["status"], "failed", "{row}");
    assert_eq!(row["worker_id"], "moon");
    assert!(row["error"].as_str().unwrap().contains("500"), "{row}");
    assert!(
        !app.fake.requests_to("/api/embed").is_empty(),
        "the failing machine was asked first"
    );
    for (path, body) in [
        ("/api/embed", json!({"model": "nope", "input": "x"})),
        ("/api/embeddings", json!({"model": "nope", "prompt": "x"})),
        ("/v1/embeddings", json!({"model": "nope", "input": "x"})),
    ] {
        let res = app.post(path, body).await;
        assert_eq!(res.status(), 404, "{path}");
        let body: Value = res.json().await.unwrap();
        let message = match path.starts_with("/api/") {
            true => body["error"].as_str().unwrap().to_owned(),
            false => body["error"]["message"].as_str().unwrap().to_owned(),
        };
        assert!(message.contains("nope"), "{path}: {body}");
    }
}

#[tokio::test]
async fn a_bad_body_on_each_new_route_names_the_field_in_the_apis_shape_and_writes_no_row() {
    let app = app_with_embedder().await;
    let cases = [
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": 5}),
            "prompt",
        ),
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": "x", "raw": true, "system": "s"}),
            "raw",
        ),
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": "x", "options": {"num_ctx": 0}}),
            "options.num_ctx",
        ),
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": "x", "format": 3}),
            "format",
        ),
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": "x", "images": [7]}),
            "images[0]",
        ),
        ("/api/embed", json!({"model": EMBEDDER}), "input"),
        (
            "/api/embed",
            json!({"model": EMBEDDER, "input": ["a", ""]}),
            "input[1]",
        ),
        ("/api/embed", json!({"input": "a"}), "model"),
        (
            "/api/embed",
            json!({"model": EMBEDDER, "input": "a", "dimensions": 0}),
            "dimensions",
        ),
        ("/api/embeddings", json!({"model": EMBEDDER}), "prompt"),
        ("/api/show", json!({}), "model"),
        ("/v1/completions", json!({"model": MODEL}), "prompt"),
        (
            "/v1/completions",
            json!({"model": MODEL, "prompt": [1, 2]}),
            "prompt",
        ),
        (
            "/v1/completions",
            json!({"model": MODEL, "prompt": "x", "n": 2}),
            "n",
        ),
        (
            "/v1/completions",
            json!({"model": MODEL, "prompt": "x", "max_tokens": "many"}),
            "max_tokens",
        ),
        (
            "/v1/embeddings",
            json!({"model": EMBEDDER, "input": "a", "encoding_format": "hex"}),
            "encoding_format",
        ),
        (
            "/v1/embeddings",
            json!({"model": EMBEDDER, "input": 5}),
            "input",
        ),
        (
            "/v1/embeddings",
            json!({"model": "auto", "input": "a"}),
            "model",
        ),
    ];
    for (path, body, field) in cases {
        let res = app.post(path, body.clone()).await;
        assert_eq!(res.status(), 400, "{path} {body}");
        let answer: Value = res.json().await.unwrap();
        let message = if path.starts_with("/api/") {
            assert_eq!(
                answer.as_object().unwrap().len(),
                1,
                "Ollama's shape: {answer}"
            );
            answer["error"].as_str().unwrap().to_owned()
        } else {
            assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");
            answer["error"]["message"].as_str().unwrap().to_owned()
        };
        assert!(message.contains(field), "{path} {body}: {message}");
    }
    assert_no_rows(&app).await;
    assert!(app.fake.requests_to("/api/embed").is_empty());
    assert!(app.fake.requests_to("/api/generate").is_empty());
}
