//! Errors in the shape of the route they come from, including axum's own (unknown path,
//! wrong method, body too large): OpenAI's `{"error":{"message","type","code"}}` for
//! `/v1/*` and Coordinator's own routes, Ollama's `{"error":"..."}` for `/api/*`.

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::helpers::{raw, spawn_app};

/// One route of each front door: OpenAI's, Ollama's, and our own.
const ROUTES: [&str; 3] = ["/v1/chat/completions", "/api/chat", "/route"];

fn assert_shape(what: &str, path: &str, body: &Value) {
    if path.starts_with("/api/") {
        assert!(
            body["error"].is_string(),
            "{what}: not Ollama's shape: {body}"
        );
        assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{what}: {body}");
    } else {
        for key in ["message", "type", "code"] {
            assert!(
                body["error"][key].is_string(),
                "{what}: not OpenAI's shape (no error.{key}): {body}"
            );
        }
    }
}

async fn send(req: reqwest::RequestBuilder, what: &str, path: &str) -> (u16, Value) {
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{what} {path}: not JSON ({e}): {text:?}"));
    assert_shape(what, path, &body);
    (status, body)
}

#[tokio::test]
async fn unknown_paths_answer_404_in_the_shape_of_their_front_door() {
    let app = spawn_app().await;
    for path in ["/v1/nothing", "/api/nothing", "/nothing", "/tasks/a/b/c"] {
        let (status, body) = send(app.http.get(app.url(path)), "404", path).await;
        assert_eq!(status, 404, "{path}: {body}");
        if !path.starts_with("/api/") {
            assert_eq!(body["error"]["code"], "not_found");
        }
    }
}

#[tokio::test]
async fn wrong_methods_answer_405_in_the_routes_shape_with_allow() {
    let app = spawn_app().await;
    for path in ROUTES.into_iter().chain(["/healthz"]) {
        let req = app.http.delete(app.url(path));
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 405, "{path}");
        let allow = res
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        assert!(
            allow.is_some_and(|a| !a.is_empty()),
            "{path}: no Allow header"
        );
        let body: Value = res.json().await.unwrap();
        assert_shape("405", path, &body);
    }
}

#[tokio::test]
async fn a_body_over_the_limit_answers_413_in_the_routes_shape() {
    let app = spawn_app().await;
    let limit = coordinator::api::http::BODY_LIMIT;
    for path in ROUTES {
        // Exactly one byte more than the limit is sent, so the server has read all of it
        // when it answers and the answer is not lost to a reset.
        let mut s = raw::connect(app.addr).await;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            limit + 1
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(&vec![b' '; limit + 1]).await.unwrap();
        let res = raw::read_response(&mut s).await;
        assert_eq!(
            res.status,
            413,
            "{path}: {}",
            String::from_utf8_lossy(&res.body)
        );
        assert!(
            res.head.contains("content-type: application/json"),
            "{}",
            res.head
        );
        assert_shape("413", path, &res.json());
    }
}

#[tokio::test]
async fn posts_that_are_not_json_answer_415_in_the_routes_shape() {
    let app = spawn_app().await;
    for path in ROUTES {
        let req = app
            .http
            .post(app.url(path))
            .header("content-type", "text/plain")
            .body(r#"{"prompt":"hi","messages":[{"role":"user","content":"hi"}]}"#);
        let (status, body) = send(req, "415", path).await;
        assert_eq!(status, 415, "{path}: {body}");
    }
}

#[tokio::test]
async fn foreign_origins_answer_403_in_the_routes_shape() {
    let app = spawn_app().await;
    for path in ROUTES {
        let req = app
            .http
            .post(app.url(path))
            .header("origin", "http://evil.example")
            .json(&serde_json::json!({"prompt": "hi", "messages": [{"role": "user", "content": "hi"}]}));
        let (status, body) = send(req, "403", path).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
}

#[tokio::test]
async fn malformed_json_answers_400_in_the_routes_shape() {
    let app = spawn_app().await;
    for path in ROUTES {
        for bad in [
            r#"{"messages": "#,
            "",
            r#"{"prompt": 5, "messages": 5}"#,
            "[]",
        ] {
            let req = app
                .http
                .post(app.url(path))
                .header("content-type", "application/json")
                .body(bad);
            let (status, body) = send(req, "400", path).await;
            assert_eq!(status, 400, "{path} {bad:?}: {body}");
        }
    }
}
