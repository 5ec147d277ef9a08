//! Nothing inside leaks into what clients see: a backend that refuses connections and one
//! that answers 500 with its insides in the body give errors on both front doors, in the
//! task's row and in its event stream that name the machine and the kind of failure, in
//! the prompt's language, and never a URL, a port, an address or a transport error.

use axum::Json;
use axum::http::StatusCode;
use axum::routing::get;
use coordinator::testkit::chunks::closed_port;
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, spawn_fake, start, test_config};

/// What a proxy in front of a model might put in its 500: where it sent the request and why
/// that failed.
const INSIDE: &str = "upstream http://10.9.8.7:11434/api/chat: dial tcp 10.9.8.7:11434: connect: Connection refused (os error 111)";

/// An Ollama-shaped backend that lists the model and answers every generation with a
/// 500 whose body holds [`INSIDE`]. Returns its base URL.
async fn leaky_backend() -> String {
    let tags = json!({"models": [{"name": MODEL, "model": MODEL}]});
    let app = axum::Router::new()
        .route("/api/tags", get(move || async move { Json(tags) }))
        .route("/api/ps", get(|| async { Json(json!({"models": []})) }))
        .fallback(|| async {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": INSIDE})),
            )
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// The app with one backend, `moon`, at `url`, serving [`MODEL`].
async fn app_with_backend(url: &str) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir, url);
    config.backends[0].models = Some(vec![MODEL.to_owned()]);
    start(config, dir, spawn_fake().await).await
}

/// `text` shows nothing of the inside of `backend_url`'s machine or of [`INSIDE`]. The
/// task id is taken out first: its hex digits could hold the port by chance.
fn assert_clean(text: &str, task_id: &str, backend_url: &str) {
    let text = text.replace(task_id, "<task>");
    let port = backend_url.rsplit(':').next().unwrap();
    for inside in [
        "http://",
        "127.0.0.1",
        "10.9.8.7",
        "11434",
        port,
        "Connection refused",
        "connection refused",
        "os error",
        "/api/chat",
        "tcp",
    ] {
        assert!(!text.contains(inside), "{inside:?} leaks in {text:?}");
    }
}

/// One chat through `path` (streamed unless `stream` is false): the error message, the
/// task id, the row's error and the event stream's error message.
async fn failed_chat(
    app: &TestApp,
    path: &str,
    prompt: &str,
    stream: bool,
) -> (String, String, String, String) {
    let body = json!({"model": MODEL, "stream": stream, "messages": [{"role": "user", "content": prompt}]});
    let res = app.post(path, body).await;
    assert_eq!(res.status(), 502, "{path}");
    let task_id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = res.json().await.unwrap();
    let message = match &body["error"] {
        Value::String(m) => m.clone(),
        e => e["message"].as_str().unwrap().to_owned(),
    };
    let task = app.finished_task(&task_id).await;
    assert_eq!(task["status"], "failed", "{task}");
    let row = task["error"].as_str().unwrap().to_owned();
    let events = app.events(&task_id).await;
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error", "{events:?}");
    let event = data["message"].as_str().unwrap().to_owned();
    (message, task_id, row, event)
}

async fn check_both_front_doors(url: &str, english: &str, japanese: &str) {
    for (path, stream) in [
        ("/v1/chat/completions", true),
        ("/v1/chat/completions", false),
    ] {
        let app = app_with_backend(url).await;
        let (message, id, row, event) = failed_chat(&app, path, "hello there", stream).await;
        assert_eq!(message, format!("task {id} failed: {english}"), "{path}");
        assert_eq!(row, english);
        assert_eq!(event, english);
        for shown in [&message, &row, &event] {
            assert_clean(shown, &id, url);
        }
    }
    for stream in [true, false] {
        let app = app_with_backend(url).await;
        let (message, id, row, event) = failed_chat(&app, "/api/chat", "こんにちは", stream).await;
        assert_eq!(message, format!("タスク {id} は失敗しました: {japanese}"));
        assert_eq!(row, japanese);
        assert_eq!(event, japanese);
        for shown in [&message, &row, &event] {
            assert_clean(shown, &id, url);
        }
    }
}

#[tokio::test]
async fn a_backend_that_refuses_connections_is_named_and_nothing_else() {
    let url = format!("http://{}", closed_port().unwrap());
    check_both_front_doors(
        &url,
        "moon could not be reached",
        "moon に接続できませんでした",
    )
    .await;
}

#[tokio::test]
async fn a_backend_that_answers_500_is_named_and_nothing_of_its_body() {
    let url = leaky_backend().await;
    check_both_front_doors(&url, "moon answered 500", "moon がエラー 500 を返しました").await;
}
