//! Browsers. A request with an `Origin` header comes from a script on a web page, and any
//! page a person on the home network opens could send one. Only pages listed in
//! `[server] allowed_origins` may call (others get 403 before any route runs), and only
//! they get CORS headers, preflight included. Requests without `Origin` (Open WebUI's
//! server, SDKs, curl) pass untouched. With the JSON content type that
//! [`super::http::JsonBody`] requires, a page cannot submit prompts behind anyone's back.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::error::{ApiError, ErrorShape};
use crate::config::ServerConfig;
use crate::domain::WebOrigin;

/// The origins whose pages may call: `[server] allowed_origins`, as browsers spell them;
/// and, for a Coordinator without keys, the host names it answers to.
#[derive(Debug, Clone, Default)]
pub struct AllowedOrigins {
    origins: Arc<HashSet<WebOrigin>>,
    /// `None` with keys (a page without a key gets nothing anyway); without keys, the
    /// `[server] allowed_hosts`, lower case, besides IP addresses and `localhost`.
    keyless_hosts: Option<Arc<HashSet<String>>>,
}

impl AllowedOrigins {
    /// The configured origins (the config's validation reports any that do not parse).
    pub fn from_config(server: &ServerConfig) -> Self {
        Self {
            origins: Arc::new(
                server
                    .allowed_origins
                    .iter()
                    .filter_map(|o| WebOrigin::parse(o).ok())
                    .collect(),
            ),
            keyless_hosts: (!server.has_keys()).then(|| {
                Arc::new(
                    server
                        .allowed_hosts
                        .iter()
                        .map(|h| h.trim().to_ascii_lowercase())
                        .collect(),
                )
            }),
        }
    }

    /// Whether a keyless Coordinator answers a request addressed to `host` (the `Host`
    /// header or the URI's authority, with or without a port).
    fn answers_host(&self, host: Option<&str>) -> bool {
        let Some(names) = &self.keyless_hosts else {
            return true;
        };
        let Some(host) = host.map(str::trim) else {
            // HTTP/1.0 without Host: no browser sends that.
            return true;
        };
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        }
        .to_ascii_lowercase();
        name.parse::<std::net::IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || names.contains(&name)
    }

    /// Whether a request's `Origin` is one of them (`null` and malformed ones never are).
    pub fn allows(&self, origin: &HeaderValue) -> bool {
        origin
            .to_str()
            .ok()
            .and_then(|o| WebOrigin::parse(o).ok())
            .is_some_and(|o| self.origins.contains(&o))
    }
}

/// Refuses requests from pages not allowed to call, in the route's error shape.
pub async fn refuse_foreign_origins(
    State(allowed): State<AllowedOrigins>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| req.headers().get(HOST).and_then(|h| h.to_str().ok()));
    if !allowed.answers_host(host) {
        let shown: String = host.unwrap_or("").chars().take(100).collect();
        tracing::warn!(host = %shown, path = %req.uri().path(), "refused a request for a host name this Coordinator does not answer without keys");
        return ApiError::Forbidden(format!(
            "this Coordinator has no API keys and answers only requests addressed to an IP \
             address, localhost or [server] allowed_hosts, not {shown:?}"
        ))
        .into_shaped_response(ErrorShape::for_path(req.uri().path()));
    }
    match req.headers().get(ORIGIN) {
        Some(origin) if !allowed.allows(origin) => {
            let shown: String = String::from_utf8_lossy(origin.as_bytes())
                .chars()
                .take(100)
                .collect();
            tracing::debug!(origin = %shown, path = %req.uri().path(), "refused a request from a web page");
            ApiError::OriginNotAllowed(shown)
                .into_shaped_response(ErrorShape::for_path(req.uri().path()))
        }
        _ => next.run(req).await,
    }
}

/// The headers a page may read from an answer besides the CORS-safelisted ones.
const EXPOSED: [&str; 5] = [
    "x-coordinator-task-id",
    "x-coordinator-domain",
    "x-coordinator-model",
    "x-coordinator-worker",
    "x-coordinator-queue",
];

/// CORS for the allowed origins: they may use every method and header the API takes
/// (bearer keys, not cookies, so no credentials mode).
pub fn cors(allowed: AllowedOrigins) -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| {
            allowed.allows(origin)
        }))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers(EXPOSED.map(HeaderName::from_static))
        .max_age(Duration::from_secs(600))
}
