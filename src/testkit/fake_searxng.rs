//! A fake SearXNG JSON endpoint for tests: `GET /search` and `GET /` on port 0, answering
//! exactly the shape of SearXNG's `webutils.get_json_response`, with modes switchable at
//! runtime (results, zero results, HTTP 500, HTTP 403, malformed JSON, slow) and a
//! [`FakeSearxng::stop`] that takes it down while its URL stays known.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// One result the fake returns.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeResult {
    pub url: String,
    pub title: String,
    pub content: String,
    pub engine: String,
    pub score: f64,
    pub published_date: Option<String>,
}

impl FakeResult {
    pub fn new(url: &str, title: &str, content: &str) -> Self {
        Self {
            url: url.to_owned(),
            title: title.to_owned(),
            content: content.to_owned(),
            engine: "duckduckgo".to_owned(),
            score: 1.0,
            published_date: None,
        }
    }

    pub fn score(mut self, score: f64) -> Self {
        self.score = score;
        self
    }

    pub fn published(mut self, date: &str) -> Self {
        self.published_date = Some(date.to_owned());
        self
    }
}

/// How the fake answers.
#[derive(Debug, Clone, PartialEq)]
pub enum FakeMode {
    /// `200` with these results (in this order; clients rank by score).
    Results(Vec<FakeResult>),
    /// `200` with an empty `results` list.
    Zero,
    /// `200` with an empty `results` list and `brave` listed as unresponsive (timeout).
    ZeroEngineDown,
    /// `500` with an HTML body.
    ServerError,
    /// `403`, as SearXNG answers when `json` is not in `search.formats`.
    Forbidden,
    /// `200` with a body that is not JSON.
    Malformed,
    /// Waits this long, then answers like `Zero`; for client timeouts.
    Slow(Duration),
}

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedQuery {
    /// The `q` parameter, decoded.
    pub q: String,
    /// Every query parameter, decoded (the last value wins).
    pub params: BTreeMap<String, String>,
    /// The raw query string.
    pub raw: String,
}

impl RecordedQuery {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }
}

#[derive(Debug)]
struct Shared {
    mode: FakeMode,
    requests: Vec<RecordedQuery>,
}

type SharedState = Arc<Mutex<Shared>>;

/// A running fake. Dropping it shuts the server down.
#[derive(Debug)]
pub struct FakeSearxng {
    addr: SocketAddr,
    state: SharedState,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl FakeSearxng {
    /// Starts on `127.0.0.1:0`, in `Zero` mode until told otherwise.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let state: SharedState = Arc::new(Mutex::new(Shared {
            mode: FakeMode::Zero,
            requests: Vec::new(),
        }));
        Self::serve(listener, state)
    }

    /// Brings a stopped fake back on the same address, with its mode and records
    /// (as `docker start` after `docker stop`).
    pub async fn restart(&mut self) -> std::io::Result<()> {
        self.stop().await;
        let listener = tokio::net::TcpListener::bind(self.addr).await?;
        *self = Self::serve(listener, self.state.clone())?;
        Ok(())
    }

    fn serve(listener: tokio::net::TcpListener, state: SharedState) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let app = axum::Router::new()
            .route("/", get(search))
            .route("/search", get(search))
            .with_state(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            state,
            shutdown: Some(tx),
            server: Some(server),
        })
    }

    /// The base URL, as `[web] searxng_url` takes it. Still valid after [`Self::stop`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_mode(&self, mode: FakeMode) {
        self.lock().mode = mode;
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedQuery> {
        self.lock().requests.clone()
    }

    /// Every `q` so far, oldest first.
    pub fn queries(&self) -> Vec<String> {
        self.lock().requests.iter().map(|r| r.q.clone()).collect()
    }

    /// Takes the server down; afterwards connections to [`Self::url`] are refused.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            // Open keep-alive connections would hold a graceful shutdown; end them.
            server.abort();
            let _ = server.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for FakeSearxng {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

async fn search(State(state): State<SharedState>, RawQuery(raw): RawQuery) -> Response {
    let raw = raw.unwrap_or_default();
    let params: BTreeMap<String, String> = url_pairs(&raw);
    let q = params.get("q").cloned().unwrap_or_default();
    let mode = {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        s.requests.push(RecordedQuery {
            q: q.clone(),
            params: params.clone(),
            raw,
        });
        s.mode.clone()
    };
    let html = [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")];
    if mode == FakeMode::Forbidden || params.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, html, "<h1>403 Forbidden</h1>").into_response();
    }
    if q.trim().is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "No query"})),
        )
            .into_response();
    }
    match mode {
        FakeMode::ServerError => (
            StatusCode::INTERNAL_SERVER_ERROR,
            html,
            "<h1>Internal Server Error</h1>",
        )
            .into_response(),
        FakeMode::Malformed => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            "{\"query\": \"x\", \"results\": [",
        )
            .into_response(),
        FakeMode::Slow(delay) => {
            tokio::time::sleep(delay).await;
            axum::Json(body(&q, &[], false)).into_response()
        }
        FakeMode::Zero => axum::Json(body(&q, &[], false)).into_response(),
        FakeMode::ZeroEngineDown => axum::Json(body(&q, &[], true)).into_response(),
        FakeMode::Results(results) => axum::Json(body(&q, &results, false)).into_response(),
        FakeMode::Forbidden => (StatusCode::FORBIDDEN, html, "").into_response(),
    }
}

fn url_pairs(raw: &str) -> BTreeMap<String, String> {
    let parsed = reqwest::Url::parse(&format!("http://fake/?{raw}"));
    parsed
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON SearXNG sends (section 6 of the research notes), without `number_of_results`.
fn body(q: &str, results: &[FakeResult], one_engine_down: bool) -> Value {
    let results: Vec<Value> = results
        .iter()
        .enumerate()
        .map(|(i, r)| result_json(r, i + 1))
        .collect();
    let unresponsive: Vec<Value> = if one_engine_down {
        vec![json!(["brave", "timeout"])]
    } else {
        Vec::new()
    };
    json!({
        "query": q,
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": unresponsive,
    })
}

fn result_json(r: &FakeResult, position: usize) -> Value {
    let parsed_url = reqwest::Url::parse(&r.url)
        .map(|u| {
            json!([
                u.scheme(),
                u.host_str().unwrap_or(""),
                u.path(),
                "",
                u.query().unwrap_or(""),
                u.fragment().unwrap_or("")
            ])
        })
        .unwrap_or_else(|_| json!(["", "", "", "", "", ""]));
    json!({
        "url": r.url,
        "engine": r.engine,
        "parsed_url": parsed_url,
        "template": "default.html",
        "title": r.title,
        "content": r.content,
        "img_src": "",
        "iframe_src": "",
        "audio_src": "",
        "thumbnail": "",
        "publishedDate": r.published_date,
        "pubdate": r.published_date.as_ref().map(|d| d.replace('T', " ")),
        "length": null,
        "views": null,
        "author": "",
        "metadata": "",
        "priority": "",
        "engines": [r.engine],
        "open_group": false,
        "close_group": false,
        "positions": [position],
        "score": r.score,
        "category": "general",
    })
}
