//! `bench-proxy`: the floor under Coordinator's overhead, for `scripts/bench.sh`.
//!
//! A pass-through built from the same HTTP stack as Coordinator (axum server, reqwest
//! client with a keep-alive pool and `TCP_NODELAY`, tokio's multi-threaded runtime,
//! jemalloc) that does nothing else: no routing, no task store, no queue, no memory, no
//! logging. Every `POST` is forwarded with its body to the same path on `--upstream`,
//! and the answer is streamed back as it arrives. What it adds over the backend alone
//! is what any proxy on this stack adds; what Coordinator adds on top of it is its own.
//!
//! With `--record PATH` it is the *recording floor*: every request is also recorded as a
//! task row in a SQLite store at PATH, through Coordinator's own store (the same writer
//! thread, group commit, schema and indexes): the row inserted as the request arrives,
//! the answer held until that row is durable (as Coordinator holds it), and the answer's
//! bytes written onto the row when they have all passed. What Coordinator adds beyond
//! it is its work other than keeping a durable row per task.
//!
//! `bench-proxy --listen 127.0.0.1:0 --upstream http://127.0.0.1:11434 [--record floor.db]`

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use clap::Parser;
use coordinator::domain::{
    Domain, Lane, ModelName, Person, Priority, TaskId, TaskStatus, ThreadId, WorkerName,
};
use coordinator::store::sqlite::SqliteStore;
use coordinator::store::{NewTask, TaskOutcome, TaskStore};
use futures::StreamExt;

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
    /// Record every request as a task row in a SQLite store at this path (created when
    /// missing): the recording floor.
    #[arg(long)]
    record: Option<PathBuf>,
}

#[derive(Clone)]
struct Upstream {
    base: String,
    http: reqwest::Client,
    record: Option<Arc<Recorder>>,
}

/// The recording floor's store, and the names its rows carry.
struct Recorder {
    store: SqliteStore,
    names: RowNames,
}

/// What a recorded request's row needs besides the request.
struct RowNames {
    thread: ThreadId,
    model: ModelName,
    lane: Lane,
    worker: WorkerName,
}

fn row_names() -> anyhow::Result<RowNames> {
    Ok(RowNames {
        thread: ThreadId::parse("bench-floor")?,
        model: ModelName::parse("bench-floor")?,
        lane: Lane::parse("tasks:llm:bench-floor")?,
        worker: WorkerName::parse("floor")?,
    })
}

/// Inserts `body`'s task row, handed to the worker with it (`running`, as Coordinator
/// records a task it hands straight to its worker); resolves once the row is durable.
async fn insert_row(rec: &Recorder, body: &Bytes) -> anyhow::Result<TaskId> {
    let names = &rec.names;
    let text = String::from_utf8_lossy(body).into_owned();
    let task = NewTask {
        task_id: TaskId::new(),
        created_at: chrono::Utc::now(),
        person: Person::default(),
        thread_id: names.thread.clone(),
        prompt: text.clone(),
        domain: Domain::general(),
        model: names.model.clone(),
        queue: names.lane.clone(),
        status: TaskStatus::Running,
        response: None,
        worker_id: Some(names.worker.clone()),
        attempts: 1,
        internal_task: None,
        web_search: false,
        reasons: Vec::new(),
        job: Some(text),
        remember: false,
        priority: Priority::Interactive,
        context: Default::default(),
        conversation: None,
    };
    let id = task.task_id;
    rec.store.insert(task).await?.await?;
    Ok(id)
}

/// Writes the answer's bytes onto row `id` as its response; the write is ordered before
/// this returns and committed in the background (as Coordinator answers its client once
/// the outcome is ordered).
async fn finish_row(rec: &Recorder, id: TaskId, answer: &[u8]) {
    let mut outcome = TaskOutcome::done(chrono::Utc::now());
    outcome.worker_id = Some(rec.names.worker.clone());
    outcome.response = Some(String::from_utf8_lossy(answer).into_owned());
    match rec.store.finish(id, &outcome).await {
        Ok(durable) => {
            tokio::spawn(async move {
                if let Err(e) = durable.await {
                    eprintln!("bench-proxy: recording an answer failed: {e}");
                }
            });
        }
        Err(e) => eprintln!("bench-proxy: recording an answer failed: {e}"),
    }
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
    let Some(rec) = up.record.clone() else {
        return match req.body(body).send().await {
            Ok(resp) => {
                let head = resp_head(&resp);
                pass_on(head, Body::from_stream(resp.bytes_stream()))
            }
            Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
        };
    };
    // The row is written while the request goes on; the answer waits for it.
    let (row, sent) = tokio::join!(insert_row(&rec, &body), req.body(body.clone()).send());
    let id = match row {
        Ok(id) => id,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    };
    match sent {
        Ok(resp) => {
            let head = resp_head(&resp);
            let passing = (resp.bytes_stream(), Vec::new(), rec);
            // The stream ends once, after its last chunk: the row is finished then.
            let body =
                futures::stream::unfold(passing, move |(mut inner, mut seen, rec)| async move {
                    match inner.next().await {
                        Some(Ok(chunk)) => {
                            seen.extend_from_slice(&chunk);
                            Some((Ok(chunk), (inner, seen, rec)))
                        }
                        Some(Err(e)) => Some((Err(e), (inner, seen, rec))),
                        None => {
                            finish_row(&rec, id, &seen).await;
                            None
                        }
                    }
                });
            pass_on(head, Body::from_stream(body))
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// The status and content type of an upstream answer.
fn resp_head(resp: &reqwest::Response) -> (StatusCode, Option<header::HeaderValue>) {
    (
        StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY),
        resp.headers().get(header::CONTENT_TYPE).cloned(),
    )
}

/// `body` under an upstream answer's status and content type.
fn pass_on(head: (StatusCode, Option<header::HeaderValue>), body: Body) -> Response {
    let (status, content_type) = head;
    let mut out = Response::new(body);
    *out.status_mut() = status;
    if let Some(ct) = content_type {
        out.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    out
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .context("building the HTTP client")?;
    let record = match &args.record {
        Some(path) => Some(Arc::new(Recorder {
            store: SqliteStore::open(path)
                .await
                .with_context(|| format!("opening the recording store {}", path.display()))?,
            names: row_names()?,
        })),
        None => None,
    };
    let upstream = Upstream {
        base: args.upstream.trim_end_matches('/').to_owned(),
        http,
        record,
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
