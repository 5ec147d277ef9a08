//! A fake LLM server speaking Ollama's and OpenAI's wire formats, for tests, demos and
//! benchmarks (where it is the "direct" baseline, so the hot path stays cheap).
//!
//! Routes: Ollama `GET /api/tags`, `GET /api/ps`, `POST /api/show`, `GET /api/version`,
//! `POST /api/chat`, `POST /api/generate`, `POST /api/embed`; OpenAI `GET /v1/models`,
//! `POST /v1/chat/completions`, `POST /v1/completions`, `POST /v1/embeddings`.
//!
//! Replies are deterministic (see [`reply`](self) rules below) so tests can predict them:
//! - default: `"Echo from <model>: <last user message>"`, streamed word by word (each word
//!   after the first keeps its leading space); with [`Knobs::tokens`] set, those words repeat
//!   cyclically until exactly that many tokens;
//! - with [`Knobs::answers`] set to [`Answers::Realistic`] (builder:
//!   [`FakeLlm::realistic_answers`]), a plain chat request gets a few sentences of
//!   model-like prose in the prompt's language (Japanese or English) instead of the echo,
//!   deterministic per prompt, still without delays;
//! - a per-model [`Script`] replaces the text (and can add reasoning);
//! - when the request offers tools, the model has the tools capability and the last user
//!   message contains `call tool <name>` naming an offered tool, the answer is a call to it;
//!   a JSON object right after the name becomes the arguments (else `{}`);
//! - when the last message is a tool result, the answer is
//!   `"Tool <name> returned: <content>"`;
//! - `max_tokens` / `options.num_predict` cut the content and report `length`.
//!
//! Timestamps and ids are fixed (`created_at` 2025-01-01T00:00:00Z, `created` 1735689600,
//! `chatcmpl-fake-<n>` with `n` counting chat requests from 1) and durations are synthetic,
//! so whole streams can be compared byte for byte.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use coordinator::testkit::fake_llm::FakeLlm;
//! let server = FakeLlm::builder()
//!     .model("qwen2.5:7b")
//!     .model_with_tools("llama3.1:8b")
//!     .spawn()
//!     .await?;
//! server.update_knobs(|k| k.stall_after = Some(3));
//! let url = server.base_url(); // http://127.0.0.1:PORT
//! # let _ = url;
//! server.shutdown().await
//! # }
//! ```

mod gate;
mod generate;
mod ollama;
mod openai;
mod reply;
mod sim;
mod stream;

pub use sim::{Eviction, Generation, KeepAlive, Realism, SimStats, Speed};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::backend::ClientSettings;
use crate::domain::WorkerName;

/// Largest request body the fake accepts.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// A model the fake serves.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub name: String,
    /// Whether `/api/show` lists the `tools` capability and tool requests are accepted.
    pub tools: bool,
    /// A fixed reply instead of the echo.
    pub script: Option<Script>,
    /// In the realistic mode: this model's speed (else the machine's [`Realism::speed`]).
    pub speed: Option<Speed>,
    /// The model's own context window (`/api/show` `model_info.<arch>.context_length`);
    /// a request's `num_ctx` is capped at it.
    pub context_length: u32,
    /// Bytes in (V)RAM when resident (`/api/ps` `size`, `size_vram`).
    pub size: u64,
}

impl ModelSpec {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tools: false,
            script: None,
            speed: None,
            context_length: 32_768,
            size: 4_683_087_332,
        }
    }

    pub fn with_tools(mut self) -> Self {
        self.tools = true;
        self
    }

    pub fn with_speed(mut self, speed: Speed) -> Self {
        self.speed = Some(speed);
        self
    }

    pub fn with_context_length(mut self, tokens: u32) -> Self {
        self.context_length = tokens;
        self
    }

    pub fn with_size(mut self, bytes: u64) -> Self {
        self.size = bytes;
        self
    }
}

/// A scripted reply: exact content, optionally preceded by reasoning ("thinking").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub content: String,
    pub reasoning: Option<String>,
}

impl Script {
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            reasoning: None,
        }
    }

    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }
}

/// How an injected failure looks to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Answer with this HTTP status and the API's error body.
    Status(u16),
    /// Close the connection without a (complete) response.
    Drop,
}

/// How the fake answers a plain chat request (the last message from the user, no tool call
/// requested, no scripted reply) in the instant mode; the realistic mode ([`Realism`])
/// always writes prose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Answers {
    /// `"Echo from <model>: <last user message>"` (or exactly [`Knobs::tokens`] of its
    /// words): tests can predict the reply from the prompt.
    #[default]
    Echo,
    /// As a real model answers: 3 to 6 sentences (80 to 400 characters) of helpful,
    /// generic prose (an acknowledgement, some advice, a closing offer) that does not
    /// restate the prompt, in the language of the last user message (Japanese when it
    /// holds kana or kanji, [`crate::lang::detect_language`], else English), chosen
    /// deterministically from its text. Japanese is written without spaces, as models
    /// write it, so a Japanese answer is a single token to streaming, usage and
    /// `max_tokens`. An Open WebUI task template (`### Task:`) gets the short JSON it asks
    /// for; with [`Knobs::tokens`] set, the answer is exactly that many tokens of prose
    /// (as in the realistic mode, Japanese clauses then count as tokens).
    Realistic,
}

/// Behaviour switches, changeable while the server runs. Faults apply to the generation
/// routes (chat and embeddings) only, so discovery keeps working.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knobs {
    /// Wait before the response head.
    pub latency: Duration,
    /// Wait before each streamed token.
    pub token_delay: Duration,
    /// Exact length of the default reply (the echo, or the prose of
    /// [`Answers::Realistic`]), in tokens.
    pub tokens: Option<usize>,
    /// How plain chat requests are answered: the echo (default) or model-like prose.
    pub answers: Answers,
    /// Fail this many of the next generation requests (counts down).
    pub fail_next: u32,
    /// Fail this share (0.0–1.0) of generation requests, drawn from an RNG seeded by `seed`.
    pub failure_rate: f64,
    pub seed: u64,
    /// How failures from `fail_next` / `failure_rate` look.
    pub failure: Failure,
    /// Stop sending (keeping the connection open) after this many tokens (at most all).
    pub stall_after: Option<usize>,
    /// Send an in-stream error after this many tokens (at most all).
    pub error_after: Option<usize>,
    /// Whether requests are kept for [`FakeLlmServer::requests`]; they are always counted.
    pub record: bool,
    /// `/api/ps` answers 500 (a machine too busy to answer in time, say).
    pub ps_fails: bool,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            latency: Duration::ZERO,
            token_delay: Duration::ZERO,
            tokens: None,
            answers: Answers::Echo,
            fail_next: 0,
            failure_rate: 0.0,
            seed: 0,
            failure: Failure::Status(500),
            stall_after: None,
            error_after: None,
            record: true,
            ps_fails: false,
        }
    }
}

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// `authorization`, `content-type`, `accept`, `user-agent` and every `x-*` header,
    /// names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body, when it was JSON.
    pub body: Option<Value>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a fake server starts with.
#[derive(Debug, Clone, Default)]
pub struct FakeLlmConfig {
    pub models: Vec<ModelSpec>,
    pub knobs: Knobs,
    /// The realistic mode (see [`Realism`]); `None`: instant answers, unlimited parallelism.
    pub realism: Option<Realism>,
    /// How far the machine's clock reads ahead of the host's (negative: behind): the
    /// expiries in `/api/ps` and every answer's `Date` are on it, as a home machine whose
    /// clock drifted since its last sync tells them.
    pub clock_ahead: chrono::TimeDelta,
}

/// Builds and starts a fake server: `FakeLlm::builder().model("m").spawn().await?`.
#[derive(Debug, Clone)]
pub struct FakeLlm {
    config: FakeLlmConfig,
    addr: SocketAddr,
}

impl FakeLlm {
    pub fn builder() -> Self {
        Self {
            config: FakeLlmConfig::default(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }

    /// A model without the tools capability.
    pub fn model(mut self, name: impl Into<String>) -> Self {
        self.config.models.push(ModelSpec::new(name));
        self
    }

    /// A model with the tools capability.
    pub fn model_with_tools(mut self, name: impl Into<String>) -> Self {
        self.config.models.push(ModelSpec::new(name).with_tools());
        self
    }

    pub fn model_spec(mut self, spec: ModelSpec) -> Self {
        self.config.models.push(spec);
        self
    }

    pub fn knobs(mut self, knobs: Knobs) -> Self {
        self.config.knobs = knobs;
        self
    }

    /// Answers plain chat requests as real models do ([`Answers::Realistic`]) instead of
    /// echoing them, without the realistic mode's timing. Sets [`Knobs::answers`], so a
    /// later [`Self::knobs`] overrides it; on a running server:
    /// `server.update_knobs(|k| k.answers = Answers::Realistic)`.
    pub fn realistic_answers(mut self) -> Self {
        self.config.knobs.answers = Answers::Realistic;
        self
    }

    /// Behaves like one Ollama machine: queueing, loading, eviction, speed, context window.
    pub fn realistic(mut self, realism: Realism) -> Self {
        self.config.realism = Some(realism);
        self
    }

    /// A machine whose clock reads `ahead` of the host's (see [`FakeLlmConfig::clock_ahead`]).
    pub fn clock_ahead(mut self, ahead: chrono::TimeDelta) -> Self {
        self.config.clock_ahead = ahead;
        self
    }

    /// Where to listen; `127.0.0.1:0` (a free port) by default.
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Binds and starts serving in a task the returned handle owns.
    pub async fn spawn(self) -> std::io::Result<FakeLlmServer> {
        let listener = TcpListener::bind(self.addr).await?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared::new(self.config, shutdown.clone()));
        let task = tokio::spawn(run(listener, shared.clone()));
        Ok(FakeLlmServer {
            addr,
            shared,
            shutdown,
            task: Some(task),
        })
    }
}

/// Serves the fake on `listener` until `shutdown` is cancelled (for binaries).
pub async fn serve(
    listener: TcpListener,
    config: FakeLlmConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    run(listener, Arc::new(Shared::new(config, shutdown))).await
}

async fn run(listener: TcpListener, shared: Arc<Shared>) -> std::io::Result<()> {
    let shutdown = shared.shutdown.clone();
    let listener = listener.tap_io(|tcp| {
        // Without it small token frames wait for ACKs (Nagle), which distorts latency.
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(shared))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/fake/stats", axum::routing::get(stats))
        .merge(ollama::routes())
        .merge(openai::routes())
        .merge(generate::routes())
        .layer(axum::middleware::from_fn_with_state(shared.clone(), record))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), dated))
        .with_state(shared)
}

/// A running fake server. Dropping it stops the server too; [`Self::shutdown`] also waits.
#[derive(Debug)]
pub struct FakeLlmServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl FakeLlmServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: what an Ollama client is pointed at.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: what an OpenAI client is pointed at.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Settings for an Ollama client of this server (idle timeout 10 s, no API key).
    pub fn ollama_settings(&self, name: WorkerName) -> anyhow::Result<ClientSettings> {
        self.client_settings(name, format!("{}/", self.base_url()))
    }

    /// Settings for an OpenAI-compatible client of this server (`.../v1/`).
    pub fn openai_settings(&self, name: WorkerName) -> anyhow::Result<ClientSettings> {
        self.client_settings(name, format!("{}/", self.openai_base_url()))
    }

    fn client_settings(&self, name: WorkerName, url: String) -> anyhow::Result<ClientSettings> {
        Ok(ClientSettings {
            name,
            base_url: reqwest::Url::parse(&url)?,
            connect_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(10),
            answer_timeout: Duration::from_secs(10),
            look_timeout: Duration::from_secs(10),
            api_key: None,
        })
    }

    /// Every request received so far (while [`Knobs::record`] was on), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The recorded requests to `path`, oldest first.
    pub fn requests_to(&self, path: &str) -> Vec<RecordedRequest> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// How many requests arrived, recorded or not.
    pub fn request_count(&self) -> u64 {
        self.shared.count.load(Ordering::Relaxed)
    }

    /// What the realistic mode's machine did so far (all zero in the instant mode).
    pub fn stats(&self) -> SimStats {
        self.shared
            .sim
            .as_ref()
            .map(|s| s.stats())
            .unwrap_or_default()
    }

    /// The realistic mode's generations, oldest first (the last 10,000).
    pub fn generations(&self) -> Vec<Generation> {
        self.shared
            .sim
            .as_ref()
            .map(|s| s.generations())
            .unwrap_or_default()
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    pub fn knobs(&self) -> Knobs {
        lock(&self.shared.live).knobs
    }

    pub fn set_knobs(&self, knobs: Knobs) {
        self.update_knobs(|k| *k = knobs);
    }

    /// Changes knobs in place; a new `seed` restarts the failure RNG.
    pub fn update_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        let mut live = lock(&self.shared.live);
        let seed = live.knobs.seed;
        change(&mut live.knobs);
        if live.knobs.seed != seed {
            live.rng = live.knobs.seed;
        }
    }

    /// Holds every stream, running or to come, after its first token until [`release`]:
    /// an answer that has started and is in no hurry to end, for as long as a test needs
    /// one, whatever the speed of the machine running the test. A realistic machine's
    /// slot stays taken meanwhile; tokens that fell due are sent at once on release.
    ///
    /// [`release`]: Self::release
    pub fn hold(&self) {
        self.shared.held.send_replace(true);
    }

    /// Lets held streams go on (see [`hold`](Self::hold)).
    pub fn release(&self) {
        self.shared.held.send_replace(false);
    }

    /// Sets (or with `None` clears) the scripted reply of a model.
    pub fn set_script(&self, model: &str, script: Option<Script>) {
        let mut live = lock(&self.shared.live);
        match script {
            Some(s) => live.scripts.insert(model.to_owned(), Arc::new(s)),
            None => live.scripts.remove(model),
        };
    }

    /// Stops accepting, ends open streams (stalled ones included) and waits for the server.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for FakeLlmServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

// ---- shared state ----------------------------------------------------------------------

pub(crate) struct Model {
    spec: ModelSpec,
    digest: String,
    loaded: AtomicBool,
    /// When a request last used it (ms since the epoch), for its expiry in `/api/ps`.
    used_at_ms: std::sync::atomic::AtomicI64,
}

/// What changes at run time, behind one lock.
struct Live {
    knobs: Knobs,
    rng: u64,
    scripts: HashMap<String, Arc<Script>>,
}

pub(crate) struct Shared {
    models: Vec<Model>,
    sim: Option<Arc<sim::Sim>>,
    live: Mutex<Live>,
    requests: Mutex<Vec<RecordedRequest>>,
    count: AtomicU64,
    chats: AtomicU64,
    shutdown: CancellationToken,
    /// While `true`, streams send nothing past their first token ([`FakeLlmServer::hold`]).
    held: tokio::sync::watch::Sender<bool>,
    /// See [`FakeLlmConfig::clock_ahead`].
    clock_ahead: chrono::TimeDelta,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("models", &self.models.len())
            .finish_non_exhaustive()
    }
}

/// What one generation request gets to work with.
pub(crate) struct Call {
    pub knobs: Knobs,
    pub script: Option<Arc<Script>>,
    pub fault: Option<Failure>,
    /// 1 for the first chat request of this server, and so on.
    pub seq: u64,
    /// Whether the server holds streams after their first token.
    pub held: tokio::sync::watch::Receiver<bool>,
}

impl Shared {
    /// The time on the machine's clock.
    pub(crate) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() + self.clock_ahead
    }

    fn new(config: FakeLlmConfig, shutdown: CancellationToken) -> Self {
        let scripts = config
            .models
            .iter()
            .filter_map(|m| Some((m.name.clone(), Arc::new(m.script.clone()?))))
            .collect();
        let models = config
            .models
            .into_iter()
            .map(|spec| Model {
                digest: format!("{:x}", Sha256::digest(spec.name.as_bytes())),
                spec,
                loaded: AtomicBool::new(false),
                used_at_ms: std::sync::atomic::AtomicI64::new(0),
            })
            .collect();
        Self {
            models,
            sim: config.realism.map(|r| Arc::new(sim::Sim::new(r))),
            live: Mutex::new(Live {
                knobs: config.knobs,
                rng: config.knobs.seed,
                scripts,
            }),
            requests: Mutex::new(Vec::new()),
            count: AtomicU64::new(0),
            chats: AtomicU64::new(0),
            shutdown,
            held: tokio::sync::watch::Sender::new(false),
            clock_ahead: config.clock_ahead,
        }
    }

    /// Finds a model; a name without a tag also matches `<name>:latest`, as in Ollama.
    fn model(&self, name: &str) -> Option<&Model> {
        self.models.iter().find(|m| {
            let n = m.spec.name.as_str();
            n == name || (!name.contains(':') && n.strip_suffix(":latest") == Some(name))
        })
    }

    /// Takes the knobs for one generation request and decides whether it fails.
    fn begin(&self, model: &str, chat: bool) -> Call {
        let seq = if chat {
            self.chats.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            0
        };
        let mut live = lock(&self.live);
        let knobs = live.knobs;
        let fault = if live.knobs.fail_next > 0 {
            live.knobs.fail_next -= 1;
            Some(knobs.failure)
        } else if knobs.failure_rate > 0.0 && next_unit(&mut live.rng) < knobs.failure_rate {
            Some(knobs.failure)
        } else {
            None
        };
        let script = live.scripts.get(model).cloned();
        Call {
            knobs,
            script,
            fault,
            seq,
            held: self.held.subscribe(),
        }
    }

    /// Waits unless shut down first; `false` when the server is stopping.
    async fn pause(&self, time: Duration) -> bool {
        if time.is_zero() {
            return !self.shutdown.is_cancelled();
        }
        tokio::select! {
            () = tokio::time::sleep(time) => true,
            () = self.shutdown.cancelled() => false,
        }
    }
}

impl Model {
    fn mark_loaded(&self) {
        self.loaded.store(true, Ordering::Relaxed);
        self.used_at_ms
            .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
    }

    /// When the plain mode unloads it, as Ollama would: Ollama's default keep-alive (five
    /// minutes) after its last use. The plain mode never does unload it.
    pub(crate) fn expires_at(&self) -> chrono::DateTime<chrono::Utc> {
        let used = self.used_at_ms.load(Ordering::Relaxed);
        chrono::DateTime::from_timestamp_millis(used).unwrap_or_default()
            + chrono::Duration::minutes(5)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a test panicked while holding plain data.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// splitmix64 mapped to [0, 1): deterministic per seed, no wall-clock randomness.
fn next_unit(state: &mut u64) -> f64 {
    (splitmix(state) >> 11) as f64 / (1u64 << 53) as f64
}

/// The next splitmix64 output of `state`.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `GET /fake/stats`: the realistic machine's counters and resident models, for
/// benchmarks that run the fake as a separate process.
async fn stats(State(shared): State<Arc<Shared>>) -> Response {
    let Some(sim) = shared.sim.as_ref() else {
        return axum::Json(serde_json::json!({ "realistic": false })).into_response();
    };
    let resident: Vec<Value> = sim
        .resident()
        .into_iter()
        .map(|r| {
            serde_json::json!({
                "model": r.model,
                "num_ctx": r.num_ctx,
                "expires_in_s": r.expires_in.map(|d| d.as_secs_f64()),
            })
        })
        .collect();
    axum::Json(serde_json::json!({
        "realistic": true,
        "stats": sim.stats(),
        "resident": resident,
    }))
    .into_response()
}

/// Every answer's `Date`, on the machine's clock when it is not the host's (hyper writes
/// the host's otherwise).
async fn dated(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    if shared.clock_ahead != chrono::TimeDelta::zero() {
        let date = shared.now().format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        if let Ok(value) = axum::http::HeaderValue::from_str(&date) {
            resp.headers_mut().insert(axum::http::header::DATE, value);
        }
    }
    resp
}

/// Counts every request and records it (when recording is on) before routing.
async fn record(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    shared.count.fetch_add(1, Ordering::Relaxed);
    if !lock(&shared.live).knobs.record {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        headers: interesting_headers(&parts.headers),
        body: serde_json::from_slice(&bytes).ok(),
    };
    lock(&shared.requests).push(recorded);
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn interesting_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| {
            let n = name.as_str();
            matches!(
                n,
                "authorization" | "content-type" | "accept" | "user-agent"
            ) || n.starts_with("x-")
        })
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect()
}

#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;
