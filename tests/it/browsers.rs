//! Browsers on the home network: a web page someone opens must not be able to submit
//! prompts (no JSON content type, or a foreign `Origin`), listed origins get CORS, and
//! what servers and SDKs send (Open WebUI included) passes as before.

use serde_json::{Value, json};

use crate::helpers::{MODEL, spawn_app, spawn_app_with, spawn_fake};

/// Every POST that takes a JSON body.
const JSON_POSTS: [&str; 4] = [
    "/route",
    "/route/preview",
    "/v1/chat/completions",
    "/api/chat",
];

fn body() -> Value {
    json!({"prompt": "hi", "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": false})
}

/// What a page can send without the browser asking first (and a request with no type)
/// is refused with 415 and reaches no backend; `application/json` with parameters passes.
#[tokio::test]
async fn json_posts_need_the_json_content_type() {
    let app = spawn_app().await;
    let text = body().to_string();
    for path in JSON_POSTS {
        for content_type in [
            Some("text/plain"),
            Some("text/plain;charset=UTF-8"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonp"),
            None,
        ] {
            let mut req = app.http.post(app.url(path)).body(text.clone());
            if let Some(t) = content_type {
                req = req.header("content-type", t);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 415, "{path} {content_type:?}");
            let err: Value = res.json().await.unwrap();
            let message = err["error"]["message"]
                .as_str()
                .or(err["error"].as_str())
                .unwrap_or_default();
            assert!(message.contains("application/json"), "{path}: {err}");
        }
    }
    assert!(
        app.fake.requests_to("/api/chat").is_empty(),
        "a refused request reached the backend"
    );
    for (path, content_type) in [
        ("/v1/chat/completions", "application/json; charset=utf-8"),
        ("/api/chat", "Application/JSON"),
        ("/route/preview", "application/json;charset=utf-8"),
    ] {
        let res = app
            .http
            .post(app.url(path))
            .header("content-type", content_type)
            .body(text.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{path} {content_type}");
    }
}

/// Pages not listed in `allowed_origins` are refused on every route, preflight included;
/// a listed page gets CORS headers; requests without `Origin` get none and pass.
#[tokio::test]
async fn only_listed_origins_may_call_and_only_they_get_cors() {
    let owui = "http://owui.lan:3000";
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.server.allowed_origins = vec![format!("{owui}/")];
    })
    .await;
    for origin in [
        "http://evil.example",
        "null",
        "http://owui.lan:3001",
        "https://owui.lan:3000",
    ] {
        for (method, path) in [
            (reqwest::Method::POST, "/v1/chat/completions"),
            (reqwest::Method::GET, "/healthz"),
            (reqwest::Method::GET, "/v1/models"),
            (reqwest::Method::OPTIONS, "/v1/chat/completions"),
        ] {
            let res = app
                .http
                .request(method.clone(), app.url(path))
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .json(&body())
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 403, "{origin} {method} {path}");
            assert!(res.headers().get("access-control-allow-origin").is_none());
            let err: Value = res.json().await.unwrap();
            assert_eq!(err["error"]["code"], "origin_not_allowed", "{err}");
            assert!(
                err["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("allowed_origins"),
                "{err}"
            );
        }
    }

    let preflight = app
        .http
        .request(reqwest::Method::OPTIONS, app.url("/v1/chat/completions"))
        .header("origin", owui)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let h = preflight.headers();
    assert_eq!(h["access-control-allow-origin"], owui);
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    let allowed_headers = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(allowed_headers.contains("authorization") && allowed_headers.contains("content-type"));

    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("origin", owui)
        .json(&body())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["access-control-allow-origin"], owui);
    let exposed = res.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(exposed.contains("x-coordinator-task-id"), "{exposed}");

    let res = app.post("/v1/chat/completions", body()).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("access-control-allow-origin").is_none());
}

/// What Open WebUI's server sends (research: JSON content type, a bearer key, its
/// `X-OpenWebUI-*` headers, no `Origin`) passes on both front doors, with a key set.
#[tokio::test]
async fn what_open_webui_sends_passes() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.server.api_keys = vec!["sk-home-0123456789".to_owned()];
    })
    .await;
    let owui = |req: reqwest::RequestBuilder| {
        req.header("authorization", "Bearer sk-home-0123456789")
            .header("x-openwebui-user-id", "u-1")
            .header("x-openwebui-chat-id", "c-1")
            .header("x-openwebui-task", "")
    };
    for path in ["/v1/models", "/api/tags", "/api/ps", "/api/version"] {
        let res = owui(app.http.get(app.url(path))).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
    }
    for path in ["/v1/chat/completions", "/api/chat"] {
        let res = owui(app.http.post(app.url(path)))
            .header("content-type", "application/json")
            .body(body().to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{path}");
    }
}

/// DNS rebinding: a page whose own name was made to resolve to this machine reaches a
/// keyless Coordinator as its own origin, where browsers send no `Origin` on a GET. The
/// `Host` it addresses gives it away: without keys only IP addresses, `localhost` and
/// `[server] allowed_hosts` are answered. With keys, a page without one gets nothing anyway.
#[tokio::test]
async fn a_keyless_coordinator_answers_only_its_own_host_names() {
    let app = spawn_app_with(spawn_fake().await, |c| {
        c.server.allowed_hosts = vec!["Coordinator.lan".into()];
    })
    .await;
    let port = app.addr.port();
    let get = |host: String| {
        let req = app.http.get(app.url("/memory")).header("host", host);
        async move { req.send().await.unwrap() }
    };
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "coordinator.lan".to_owned(),
        format!("COORDINATOR.LAN:{port}"),
    ] {
        assert_eq!(get(host.clone()).await.status(), 200, "{host}");
    }
    let res = get(format!("evil.example:{port}")).await;
    assert_eq!(res.status(), 403);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allowed_hosts"),
        "{body}"
    );
    let res = app
        .http
        .get(app.url("/api/tags"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let body: Value = res.json().await.unwrap();
    assert!(body["error"].is_string(), "Ollama's shape: {body}");

    let keyed = spawn_app_with(spawn_fake().await, |c| {
        c.server.api_keys = vec!["sk-home-0123456789".into()];
    })
    .await;
    let res = keyed
        .http
        .get(keyed.url("/memory"))
        .header("host", "evil.example")
        .bearer_auth("sk-home-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "with keys the key decides");
}
