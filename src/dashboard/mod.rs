//! The household's page at `/` (for browsers; Ollama's probe text for everyone else) and
//! what it reads: `GET /dashboard/snapshot` (one picture as JSON, also what `coordinator
//! status` prints) and `GET /dashboard/events` (the same picture as SSE, sent whenever it
//! changes). Off the request path: nothing here runs unless a page or `status` asks.
//!
//! The page's files are compiled into the binary (`assets/`), plain HTML, CSS and JS with
//! nothing fetched from elsewhere. When keys are set the two data routes need an admin
//! key: the page asks for it once, keeps it in the tab's `sessionStorage` and sends it as
//! `Authorization: Bearer` (it reads the SSE with `fetch`, which can send headers, so the
//! key is never in a URL).

pub mod hub;
pub mod snapshot;
pub mod terminal;

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use futures::Stream;

use crate::api::ApiError;
use crate::people::Caller;
use crate::service::AppState;

pub use hub::Hub;
pub use snapshot::Snapshot;

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// The page's own policy: its files only, and the API of the same origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot encode the dashboard snapshot: {0}")]
    Encode(#[from] serde_json::Error),
}

impl From<DashboardError> for ApiError {
    fn from(e: DashboardError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

/// The routes that need a key (and an admin's, when keys are set), for the guarded part
/// of the router.
pub fn guarded_routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/dashboard/snapshot", get(snapshot_json))
        .route("/dashboard/events", get(events))
        .layer(Extension(Arc::new(Hub::new(state.clone()))))
}

/// The page's files, for the open part of the router.
pub fn open_routes() -> Router<AppState> {
    Router::new()
        .route("/", get(root))
        .route(
            "/dashboard/app.js",
            get(|| asset(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route(
            "/dashboard/app.css",
            get(|| asset(STYLE, "text/css; charset=utf-8")),
        )
}

/// `GET /` and `HEAD /`: the page for a browser (its `Accept` names `text/html`), else
/// what Ollama answers there, so that tools probing for an Ollama still find one.
async fn root(headers: HeaderMap) -> Response {
    if !wants_html(&headers) {
        return crate::api::ollama::manage::root().await;
    }
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        PAGE,
    )
        .into_response()
}

/// Whether any of the request's `Accept` values names `text/html` (with any parameters).
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let kind = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            kind.eq_ignore_ascii_case("text/html") && !refused
        })
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// Only an admin sees the whole household (every caller is one without keys).
fn admin_only(caller: &Caller) -> Result<(), ApiError> {
    if caller.admin {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "the dashboard shows every person's tasks: it needs an admin key".to_owned(),
        ))
    }
}

async fn snapshot_json(
    Extension(hub): Extension<Arc<Hub>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    admin_only(&caller)?;
    let picture = hub.current().await?;
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        picture.json.to_string(),
    )
        .into_response())
}

/// The picture as SSE: one `snapshot` event at once, then one whenever it changed
/// (looked at every [`hub::MIN_INTERVAL`]; a new `taken_at` alone is no change), until
/// the client leaves or the process shuts down.
async fn events(
    State(state): State<AppState>,
    Extension(hub): Extension<Arc<Hub>>,
    Extension(caller): Extension<Caller>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    admin_only(&caller)?;
    let first = hub.current().await?;
    let stop = state.shutdown.clone();
    let stream = async_stream::stream! {
        let mut sent = first;
        yield Ok(Event::default().event("snapshot").data(&*sent.json));
        let mut tick = tokio::time::interval(hub::MIN_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => break,
            }
            match hub.current().await {
                Ok(now) if !now.shows_the_same_as(&sent) => {
                    sent = now;
                    yield Ok(Event::default().event("snapshot").data(&*sent.json));
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "dashboard: cannot read the household");
                    yield Ok(Event::default().event("problem").data("the task store cannot be read (see the log)"));
                }
            }
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn browsers_get_the_page_and_tools_the_ollama_text() {
        let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert!(wants_html(&accept(browser)));
        assert!(wants_html(&accept("TEXT/HTML")));
        assert!(!wants_html(&accept("*/*")));
        assert!(!wants_html(&accept("application/json")));
        assert!(!wants_html(&accept("text/html;q=0, */*")));
        assert!(!wants_html(&HeaderMap::new()));
    }
}
