//! The rest of Ollama's API: `GET /` and `HEAD /`, `POST /api/show` answered by a machine
//! that serves the model, and model management refused with where models are managed.

use coordinator::config::BackendKind;
use serde_json::{Value, json};

use crate::helpers::{MODEL, spawn_app, spawn_app_with, spawn_fake};

#[tokio::test]
async fn root_says_ollama_is_running_on_get_and_head() {
    let app = spawn_app().await;
    let res = app.get("/").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "Ollama is running");
    let res = app.http.head(app.url("/")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().is_empty());
}

#[tokio::test]
async fn show_is_answered_by_the_machine_or_from_what_coordinator_knows() {
    let app = spawn_app().await;
    let res = app.post("/api/show", json!({"model": MODEL})).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["capabilities"], json!(["completion"]));
    assert_eq!(body["model_info"]["qwen.context_length"], 32768, "{body}");
    assert_eq!(app.last_backend_body("/api/show")["model"], MODEL);
    let res = app
        .post("/api/show", json!({"name": format!("{MODEL}@moon")}))
        .await;
    assert_eq!(res.status(), 200);
    let res = app.post("/api/show", json!({"model": "nope"})).await;
    assert_eq!(res.status(), 404);
    let body: Value = res.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("nope"), "{body}");

    let fake = spawn_fake().await;
    let url = fake.openai_base_url();
    let app = spawn_app_with(fake, |c| {
        c.backends[0].kind = BackendKind::Openai;
        c.backends[0].url = url;
    })
    .await;
    let res = app.post("/api/show", json!({"model": MODEL})).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["capabilities"], json!(["completion"]));
    assert!(body["details"].is_object() && body["model_info"].is_object());
    assert!(app.fake.requests_to("/api/show").is_empty());
}

#[tokio::test]
async fn model_management_is_refused_saying_where_models_are_managed() {
    let app = spawn_app().await;
    for path in ["/api/pull", "/api/push", "/api/create", "/api/copy"] {
        let res = app.post(path, json!({"model": MODEL})).await;
        assert_eq!(res.status(), 403, "{path}");
        let body: Value = res.json().await.unwrap();
        let message = body["error"].as_str().unwrap();
        assert!(
            message.contains("managed on the machines"),
            "{path}: {message}"
        );
    }
    let res = app
        .http
        .delete(app.url("/api/delete"))
        .json(&json!({"model": MODEL}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert!(app.fake.requests_to("/api/pull").is_empty());
}
