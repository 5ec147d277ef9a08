//! The documents over HTTP: `POST /docs` uploads a file into a collection (idempotent by
//! content), `GET /docs` lists, `DELETE /docs/{collection}` forgets; what was uploaded is
//! what `rag:<collection>` answers from. Bad input is refused and changes nothing; with
//! keys, listing takes any key and changing takes an admin's.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{BACKUP, ask, messages};
use crate::helpers::{TestApp, spawn_app, spawn_app_with, spawn_fake};
use crate::people::{ADMIN, As, BOB_, U1, household_keys};

async fn send(
    app: &TestApp,
    who: Option<As>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = app.http.request(method, app.url(path));
    if let Some(As(key, user)) = who {
        req = req.bearer_auth(key);
        if let Some(user) = user {
            req = req.header("X-OpenWebUI-User-Id", user);
        }
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let text = res.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn upload(collection: &str, path: &str, content: &str) -> Value {
    json!({"collection": collection, "path": path, "content": content})
}

/// (collection, path, chunks) of every listed document.
fn listed(listing: &Value) -> Vec<(String, String, u64)> {
    listing["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["collection"].as_str().unwrap().to_owned(),
                d["path"].as_str().unwrap().to_owned(),
                d["chunks"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_uploaded_file_is_listed_answered_from_and_forgotten() {
    let app = spawn_app().await;
    let (status, body) = send(
        &app,
        None,
        Method::POST,
        "/docs",
        Some(upload("household", "nas/backup.md", BACKUP)),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["outcome"], "added");
    assert_eq!(body["path"], "upload:nas/backup.md");
    let chunks = body["chunks"].as_u64().unwrap();
    assert!(chunks >= 2, "{body}");

    // The same text again changes nothing; new text replaces the document whole.
    let (status, body) = send(
        &app,
        None,
        Method::POST,
        "/docs",
        Some(upload("household", "nas/backup.md", BACKUP)),
    )
    .await;
    assert_eq!(
        (status, &body["outcome"], &body["chunks"]),
        (StatusCode::OK, &json!("unchanged"), &json!(0))
    );
    let changed = BACKUP.replace("02:00", "03:30");
    let (status, body) = send(
        &app,
        None,
        Method::POST,
        "/docs",
        Some(upload("household", "nas/backup.md", &changed)),
    )
    .await;
    assert_eq!(
        (status, &body["outcome"]),
        (StatusCode::OK, &json!("replaced")),
        "{body}"
    );
    // No collection named: the default one.
    let (status, body) = send(
        &app,
        None,
        Method::POST,
        "/docs",
        Some(json!({"path": "todo.txt", "content": "buy disks\n\ncall the ISP"})),
    )
    .await;
    assert_eq!(
        (status, &body["collection"]),
        (StatusCode::CREATED, &json!("default")),
        "{body}"
    );

    let (status, listing) = send(&app, None, Method::GET, "/docs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        listed(&listing),
        vec![
            ("default".to_owned(), "upload:todo.txt".to_owned(), 1),
            (
                "household".to_owned(),
                "upload:nas/backup.md".to_owned(),
                chunks
            ),
        ]
    );
    assert_eq!(listing["documents"][1]["display"], "nas/backup.md");
    assert_eq!(listing["documents"][1]["title"], "Backup");
    assert_eq!(
        listing["collections"][1],
        json!({"name": "household", "model": "rag:household", "documents": 1, "chunks": chunks})
    );
    let (_, one) = send(&app, None, Method::GET, "/docs?collection=household", None).await;
    assert_eq!(listed(&one).len(), 1);

    // What was uploaded is what the collection's model answers from, with its citation.
    let (text, backend) = ask(&app, "rag:household", "When does the NAS backup run?").await;
    let user = messages(&backend).last().unwrap().1.clone();
    assert!(
        user.contains("The NAS backup runs every night at 03:30"),
        "{user}"
    );
    assert!(
        text.contains("Sources:\n- [1] nas/backup.md › Backup › NAS › Schedule\n"),
        "{text}"
    );

    // One document by its uploaded name (or its listed key), then a whole collection.
    let (status, body) = send(
        &app,
        None,
        Method::DELETE,
        "/docs/household?path=nas/backup.md",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"collection": "household", "path": "upload:nas/backup.md", "forgotten": 1})
    );
    let (status, _) = send(
        &app,
        None,
        Method::DELETE,
        "/docs/household?path=nas/backup.md",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = send(&app, None, Method::DELETE, "/docs/default", None).await;
    assert_eq!(
        (status, &body["forgotten"]),
        (StatusCode::OK, &json!(1)),
        "{body}"
    );
    let (_, listing) = send(&app, None, Method::GET, "/docs", None).await;
    assert_eq!(listing, json!({"collections": [], "documents": []}));
    let (status, body) = send(&app, None, Method::DELETE, "/docs/default", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // And the collection is no model any more.
    let (text, _) = ask(&app, "rag:household", "When does the NAS backup run?").await;
    assert!(
        text.starts_with("※ Nothing in your documents matched"),
        "{text}"
    );
    app.stop().await;
}

#[tokio::test]
async fn bad_uploads_are_refused_by_field_and_change_nothing() {
    let app = spawn_app().await;
    let cases = [
        (
            upload("notes", "manual.pdf", "text"),
            "path",
            "only Markdown",
        ),
        (
            upload("Notes", "a.md", "# A"),
            "collection",
            "not a collection name",
        ),
        (upload("notes", "", "# A"), "path", "the file name is empty"),
        (
            upload("notes", "a.md", "  \n"),
            "content",
            "the file is empty",
        ),
        (
            upload("notes", "a\u{7}.md", "# A"),
            "path",
            "control character",
        ),
        (
            json!({"collection": "notes", "path": "a.md"}),
            "content",
            "missing field",
        ),
        (
            json!({"path": "a.md", "content": "# A", "text": "x"}),
            "text",
            "unknown field",
        ),
    ];
    for (body, param, message) in cases {
        let (status, answer) = send(&app, None, Method::POST, "/docs", Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["error"]["param"], param, "{body}: {answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{body}: {text}");
    }
    // Not JSON: a web page cannot post it behind the user's back.
    let res = app
        .http
        .post(app.url("/docs"))
        .header("content-type", "text/plain")
        .body("# A")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, answer) = send(&app, None, Method::DELETE, "/docs/Bad", None).await;
    assert_eq!(
        (status, &answer["error"]["param"]),
        (StatusCode::BAD_REQUEST, &json!("collection"))
    );
    let (status, _) = send(&app, None, Method::GET, "/docs?colection=notes", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, listing) = send(&app, None, Method::GET, "/docs", None).await;
    assert_eq!(listing, json!({"collections": [], "documents": []}));
    app.stop().await;
}

#[tokio::test]
async fn with_keys_any_key_lists_and_only_an_admin_changes() {
    let app = spawn_app_with(spawn_fake().await, household_keys).await;
    let doc = || Some(upload("notes", "backup.md", BACKUP));
    for (method, path) in [
        (Method::GET, "/docs"),
        (Method::POST, "/docs"),
        (Method::DELETE, "/docs/notes"),
    ] {
        let body = (method == Method::POST).then(|| upload("notes", "backup.md", BACKUP));
        let (status, _) = send(&app, None, method.clone(), path, body).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {path} without a key"
        );
    }
    for who in [BOB_, U1] {
        let (status, body) = send(&app, Some(who), Method::POST, "/docs", doc()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("needs an admin key")
        );
    }
    // Who asks is checked before the body: a bad body from a non-admin is still a 403.
    let bad = Some(json!({"collection": "notes", "nope": true}));
    let (status, body) = send(&app, Some(BOB_), Method::POST, "/docs", bad.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = send(&app, Some(ADMIN), Method::POST, "/docs", bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, listing) = send(&app, Some(BOB_), Method::GET, "/docs", None).await;
    assert_eq!(
        (status, listed(&listing)),
        (StatusCode::OK, vec![]),
        "Bob's refused upload changed nothing"
    );

    let (status, _) = send(&app, Some(ADMIN), Method::POST, "/docs", doc()).await;
    assert_eq!(status, StatusCode::CREATED);
    // Everyone with a key sees the household's documents.
    for who in [BOB_, U1, ADMIN] {
        let (status, listing) = send(&app, Some(who), Method::GET, "/docs", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(listed(&listing).len(), 1);
    }
    let (status, _) = send(&app, Some(BOB_), Method::DELETE, "/docs/notes", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, listing) = send(&app, Some(BOB_), Method::GET, "/docs", None).await;
    assert_eq!(
        listed(&listing).len(),
        1,
        "Bob's refused delete changed nothing"
    );
    let (status, body) = send(&app, Some(ADMIN), Method::DELETE, "/docs/notes", None).await;
    assert_eq!((status, &body["forgotten"]), (StatusCode::OK, &json!(1)));
    app.stop().await;
}
