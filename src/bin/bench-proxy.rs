//! `bench-proxy`: the floor under Coordinator's overhead, for `scripts/bench.sh`.
//!
//! A pass-through built from the same HTTP stack as Coordinator (axum server, reqwest
//! client with a keep-alive pool and `TCP_NODELAY`, tokio's multi-threaded runtime,
//! jemalloc) that does nothing else: no routing, no task store, no queue, no memory, no
//! logging. Every `POST` is forwarded with its body to the same path on `--upstream`,
//! and the answer is streamed back as it arrives. What it adds over the backend alone
//! is what any proxy on this stack adds; what Coordinator adds on top of it is its own.
//!
//! `bench-proxy --listen 127.0.0.1:0 --upstream http://127.0.0.1:11434`

use std::net::SocketAddr;

use anyhow::Context;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use clap::Parser;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(
    name = "bench-proxy",
    about = "A do-nothing HTTP pass-through: the floor under Coordinator's overhead"
)]
struct Args {
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The backend's base URL; request paths are appended to it.
    #[arg(long)]
    upstream: String,
}

#[derive(Clone)]
struct Upstream {
    base: String,
    http: reqwest::Client,
}

async fn forward(
    State(up): State<Upstream>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut req = up.http.post(format!("{}{}", up.base, uri.path()));
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    match req.body(body).send().await {
        Ok(resp) => {
            let status =
                StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
            let mut out = Response::new(Body::from_stream(resp.bytes_stream()));
            *out.status_mut() = status;
            if let Some(ct) = content_type {
                out.headers_mut().insert(header::CONTENT_TYPE, ct);
            }
            out
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .context("building the HTTP client")?;
    let upstream = Upstream {
        base: args.upstream.trim_end_matches('/').to_owned(),
        http,
    };
    let app = axum::Router::new()
        .fallback(axum::routing::post(forward))
        .with_state(upstream);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    println!("bench-proxy listening on http://{}", listener.local_addr()?);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}
