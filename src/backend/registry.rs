//! The backends this process runs, with their discovered models and health.
//!
//! Model lists are discovered at start and refreshed periodically; a backend that is down
//! is marked unhealthy, never fatal. The registry yields the router's [`Catalog`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use chrono::{DateTime, Utc};

use super::activity::{Activity, Recent, Running};
use super::keep_alive::{KeepAlive, expiry_set_by, rank_from_expiry};
use super::perf::{Began, ModelPerf, Rates, Sample};
use super::slots::Slots;
pub use super::windows::ConfiguredWindows;
use super::{Backend, BackendRequest, Loaded, ModelInfo};
use crate::context::{self, ModelWindow};
use crate::domain::{ModelName, ThreadId, WorkerName};
use crate::placement::learned::{Learned, LearnedStore, SAVE_EVERY};
use crate::queue::priority::Priority;
use crate::routing::{Catalog, CatalogEntry};

/// One backend and what is known about it right now.
#[derive(Debug)]
pub struct BackendHandle {
    pub backend: Backend,
    /// Its slots: `parallel` answers per model, and the answers holding one now (see
    /// [`super::slots`]).
    pub slots: Arc<Slots>,
    /// Models from the config; when set, discovery only checks health.
    configured_models: Option<Vec<ModelName>>,
    models: Mutex<Vec<ModelInfo>>,
    loaded: Mutex<Vec<ModelName>>,
    /// What is known of each resident model: the window it was loaded with (from
    /// `/api/ps`, or the `num_ctx` this process sent it) and when it is unloaded unless
    /// used meanwhile (the last look at `/api/ps`).
    loaded_known: Mutex<Vec<Loaded>>,
    /// Windows from the config (`[[backends]] context_length`, `model_context_length`,
    /// `max_num_ctx`).
    windows: ConfiguredWindows,
    healthy: AtomicBool,
    last_error: Mutex<Option<String>>,
    in_flight: AtomicUsize,
    /// Looks at the resident models asked for by answers' ends and not yet begun (see
    /// [`BackendHandle::look_again`]).
    looks_asked: AtomicUsize,
    /// Models whose load an answer here left before it was done, each until Ollama has
    /// surely given the load up ([`LOAD_GIVEN_UP_WITHIN`]): `/api/ps` may list them until
    /// then, and a look meanwhile does not count them resident.
    loads_left: Mutex<Vec<(ModelName, std::time::Instant)>>,
    /// What its tasks have shown of its speed, per model.
    perf: Mutex<Vec<ModelPerf>>,
    /// What it runs now and served lately, and how many models it keeps resident.
    activity: Mutex<Activity>,
    /// `keep_alive` per model from the config, for requests that set none (read once, at
    /// start).
    keep_alive: Vec<(ModelName, KeepAlive)>,
    /// The server's own keep-alive (Ollama's `OLLAMA_KEEP_ALIVE`), once learned (see
    /// [`super::keep_alive`]), and when.
    default_keep_alive: Mutex<Option<(KeepAlive, DateTime<Utc>)>>,
    /// Per model, the keep-alive its last request here carried (see [`Sent`]).
    sent: Mutex<Vec<Sent>>,
    /// Models loaded here with more than Ollama's default window: their next load gets the
    /// whole limit at once (see [`crate::context::choose_num_ctx`]).
    wide: Mutex<Vec<ModelName>>,
    /// Where what it learned is kept across restarts, and when it was last written.
    learned: std::sync::OnceLock<Arc<dyn LearnedStore>>,
    last_kept: Mutex<Option<tokio::time::Instant>>,
    /// Bumped whenever the model list changes, so workers re-read their lanes.
    models_version: tokio::sync::watch::Sender<u64>,
}

/// What `GET /workers` shows for one backend (and what its heartbeat carries).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct WorkerStatus {
    pub name: WorkerName,
    pub kind: crate::config::BackendKind,
    pub url: String,
    pub models: Vec<ModelName>,
    pub loaded: Vec<ModelName>,
    pub healthy: bool,
    pub in_flight: usize,
    /// Answers per model at once (older heartbeats call it `max_concurrency`).
    #[serde(alias = "max_concurrency")]
    pub parallel: usize,
    pub last_error: Option<String>,
    /// Learned speed per model (placement's figures); older heartbeats carry none.
    #[serde(default)]
    pub perf: Vec<ModelPerf>,
    /// The answers running now, with how far along they are.
    #[serde(default)]
    pub running: Vec<Running>,
    /// The conversations served lately, per model (placement's affinity and what an
    /// eviction would cost).
    #[serde(default)]
    pub recent: Vec<Recent>,
    /// How many models the machine keeps resident at once, configured or learned; `None`
    /// while unknown.
    #[serde(default)]
    pub max_loaded: Option<usize>,
    /// The largest window a request gets here (`[[backends]] max_num_ctx`; Ollama's
    /// default cap when not set).
    #[serde(default)]
    pub max_num_ctx: Option<u32>,
    /// Per model: its window and the one it is resident with.
    #[serde(default)]
    pub windows: Vec<ModelWindow>,
    /// The resident models (those of `loaded`) with when each is unloaded unless used
    /// meanwhile; older heartbeats carry none.
    #[serde(default)]
    pub resident: Vec<Resident>,
    /// Bytes of each model's weights, where the backend says (Ollama's `/api/tags`);
    /// older heartbeats carry none.
    #[serde(default)]
    pub sizes: Vec<ModelSize>,
    /// The server's own keep-alive in seconds (-1: forever), once learned (see
    /// [`super::keep_alive`]); `None` while unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_keep_alive_s: Option<i64>,
    /// How far the machine's clock reads ahead of this process's, in milliseconds
    /// (negative: behind; 0 when they agree as far as its answers' `Date`s tell); `None`
    /// where the backend kind does not tell or before its first look. Its expiries above
    /// are on this process's clock already (see [`super::clock`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_ahead_ms: Option<i64>,
}

impl WorkerStatus {
    /// How many models answer here at once (see [`super::slots::models_at_once`]).
    pub fn models_at_once(&self) -> usize {
        let mut answering: Vec<&ModelName> = Vec::new();
        for r in &self.running {
            if !answering.contains(&&r.model) {
                answering.push(&r.model);
            }
        }
        let seen = self.loaded.len().max(answering.len());
        super::slots::models_at_once(self.kind, self.max_loaded, seen)
    }

    /// How many answers run here at once at most: `parallel` for each model that may
    /// answer at once (no more than it serves).
    pub fn slots(&self) -> usize {
        self.parallel * self.models_at_once().min(self.models.len()).max(1)
    }
}

/// The size of one model's weights on a backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ModelSize {
    pub model: ModelName,
    pub bytes: u64,
}

/// A resident model and its expiry (Ollama's `/api/ps` `expires_at`, in UTC; `None`
/// while unknown, or where the backend does not say).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Resident {
    pub model: ModelName,
    pub expires_at: Option<DateTime<Utc>>,
    /// Where Ollama puts it in its order of models to push out, lowest first: the
    /// stamped keep-alive in nanoseconds that its last request from this process carried
    /// (see [`super::keep_alive`]), while `/api/ps` shows the expiry that set; where none
    /// did (it was resident before this process started, another client loaded it, or it
    /// was loaded with the server's default while that was unknown), or another client's
    /// request has set its keep-alive since, the time its expiry has left
    /// ([`super::keep_alive::rank_from_expiry`]); `None` while neither is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evict_rank: Option<u64>,
}

/// The keep-alive the last request for a model carried here.
#[derive(Debug, Clone, PartialEq)]
struct Sent {
    model: ModelName,
    /// Its rank in Ollama's eviction order, when known.
    rank: Option<u64>,
    /// Sent with none: the server's default applied (unknown then).
    plain: bool,
    /// When that request ended, once it has, and whether it had loaded the model (the
    /// server's default was then set with the load).
    ended: Option<(DateTime<Utc>, bool)>,
}

/// One answer running on a backend, from its start until the guard is dropped: counted
/// in flight, its progress visible to placement; when it ends, however it ends, its
/// conversation is remembered as served here and the machine's resident models are read
/// again ([`BackendHandle::look_again`]).
#[derive(Debug)]
pub struct InFlight {
    handle: Arc<BackendHandle>,
    id: u64,
    model: ModelName,
    thread: Option<ThreadId>,
    tokens: u32,
    /// Whether a first impression of the machine's speed was taken from this answer.
    sampled: bool,
    /// Whether the model had to be loaded for it.
    pub cold: bool,
    /// Whether the machine's prompt cache may hold most of its prompt (see
    /// [`Running::cached`]).
    pub cached: bool,
    /// Whether nothing else ran on the backend when it started.
    pub alone: bool,
}

/// How long Ollama may take to give up a load whose request left before the model was
/// ready: it notices the closed connection at its next poll of the loading runner (every
/// quarter of a second or so), and lists the model in `/api/ps` until it has unloaded it.
const LOAD_GIVEN_UP_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// How long after a request that carried no keep-alive ended a look at the machine
/// teaches the server's default: Ollama sets the model's expiry as the request's
/// connection closes, and a look before that reads the expiry an earlier request left.
const DEFAULT_KEEP_ALIVE_LOOK: std::time::Duration = std::time::Duration::from_millis(1500);

/// The latest end of a request whose expiry Ollama has surely set by a look at `/api/ps`
/// at `at` ([`DEFAULT_KEEP_ALIVE_LOOK`] before it).
fn expiry_settled_by(at: DateTime<Utc>) -> DateTime<Utc> {
    at - chrono::Duration::from_std(DEFAULT_KEEP_ALIVE_LOOK).unwrap_or_default()
}

/// How long a learned server keep-alive is taken as the server's: after that, the next
/// load of a model that neither the request nor the config keeps carries none again, and
/// teaches it anew. The owner may have changed `OLLAMA_KEEP_ALIVE` and restarted Ollama
/// meanwhile; sent on, an old five minutes would shorten a new day.
pub const RELEARN_KEEP_ALIVE_AFTER: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Tokens into an answer after which its pace so far stands for the machine's generation
/// rate, while nothing else is known of it.
const FIRST_IMPRESSION_TOKENS: u32 = 24;

impl InFlight {
    /// The answer produced another piece of content (about a token).
    pub fn token(&mut self) {
        self.tokens += 1;
        let now = Utc::now();
        let impression =
            self.tokens == 1 || (!self.sampled && self.tokens >= FIRST_IMPRESSION_TOKENS);
        let mut activity = lock(&self.handle.activity);
        let Some(running) = activity.progress(self.id, self.tokens, now) else {
            return;
        };
        if impression {
            // A copy only for the two tokens that give an impression, outside the lock.
            let running = running.clone();
            drop(activity);
            self.sampled |= self.tokens >= FIRST_IMPRESSION_TOKENS;
            self.handle.first_impression(&self.model, &running, now);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.handle.in_flight.fetch_sub(1, Ordering::Relaxed);
        // An answer that came leaves its conversation in the machine's cache; one that
        // ended before may have left part of its prompt there.
        let answered = self.tokens > 0;
        let unconfirmed =
            lock(&self.handle.activity).end(self.id, self.thread.take(), answered, Utc::now());
        // An answer that waited for a load and ended before its first token (moved,
        // stopped, failed) leaves the load under way or failed, not done: the model is
        // resident here again only once a look at the machine shows it.
        if unconfirmed {
            lock(&self.handle.loaded).retain(|m| m != &self.model);
            // Ollama gives the load up at its next poll of the loading runner, and
            // `/api/ps` lists the model until then: the looks meanwhile leave it out, and
            // one more look comes once Ollama has surely dropped it.
            let until = std::time::Instant::now() + LOAD_GIVEN_UP_WITHIN;
            lock(&self.handle.loads_left).push((self.model.clone(), until));
            self.handle.look_again_after(LOAD_GIVEN_UP_WITHIN);
        }
        self.handle.request_ended(&self.model, self.cold);
        // However the answer ended (done, failed, stopped by its person, moved to another
        // machine), it may have loaded a model and pushed out another: look at the machine
        // again now rather than at the next periodic look (the household's warm row
        // placed a turn on a machine still counted as holding a model that a stopped
        // answer's load had pushed out). Outside a runtime (shutdown, plain tests) the
        // next periodic look does it.
        self.handle.look_again();
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked while holding plain data.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl BackendHandle {
    pub fn new(
        backend: Backend,
        parallel: usize,
        configured_models: Option<Vec<ModelName>>,
    ) -> Self {
        let models = configured_models
            .iter()
            .flatten()
            .map(|m| ModelInfo {
                name: m.clone(),
                tools: None,
                context_length: None,
                size: None,
            })
            .collect();
        let windows = ConfiguredWindows {
            cap: match backend.kind() {
                crate::config::BackendKind::Ollama => Some(context::DEFAULT_MAX_NUM_CTX),
                crate::config::BackendKind::Openai => None,
            },
            ..ConfiguredWindows::default()
        };
        Self {
            backend,
            slots: Slots::new(parallel),
            configured_models,
            models: Mutex::new(models),
            loaded: Mutex::new(Vec::new()),
            loaded_known: Mutex::new(Vec::new()),
            windows,
            healthy: AtomicBool::new(false),
            last_error: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            looks_asked: AtomicUsize::new(0),
            loads_left: Mutex::new(Vec::new()),
            perf: Mutex::new(Vec::new()),
            activity: Mutex::new(Activity::default()),
            keep_alive: Vec::new(),
            default_keep_alive: Mutex::new(None),
            sent: Mutex::new(Vec::new()),
            wide: Mutex::new(Vec::new()),
            learned: std::sync::OnceLock::new(),
            last_kept: Mutex::new(None),
            models_version: tokio::sync::watch::Sender::new(0),
        }
    }

    /// States how many models the machine keeps resident at once (`[[backends]]
    /// max_loaded`), instead of learning it from the first load that evicts one.
    #[must_use]
    pub fn with_max_loaded(self, max_loaded: Option<usize>) -> Self {
        Self {
            activity: Mutex::new(Activity::new(max_loaded)),
            ..self
        }
    }

    /// Keeps these models resident for as long as given (Ollama's `keep_alive`), unless a
    /// request says otherwise.
    #[must_use]
    pub fn with_keep_alive(self, keep_alive: Vec<(ModelName, KeepAlive)>) -> Self {
        Self { keep_alive, ..self }
    }

    /// The configured `keep_alive` for `model`, if any.
    fn keep_alive_for(&self, model: &ModelName) -> Option<KeepAlive> {
        self.keep_alive
            .iter()
            .find(|(m, _)| m == model)
            .map(|(_, k)| *k)
    }

    /// The `keep_alive` a request for `model` carries to this machine, given the one it
    /// asked for (`requested`), stamped so that Ollama pushes out the least recently used
    /// model first (see [`super::keep_alive`]): the request's own, else the config's for
    /// the model, else the server's default once learned; else none. Remembers what was
    /// sent, for placement's view of the eviction order ([`Resident::evict_rank`]).
    /// Other backends get the request's own, as it is.
    pub fn keep_alive_to_send(
        &self,
        model: &ModelName,
        requested: Option<&serde_json::Value>,
    ) -> Option<serde_json::Value> {
        if self.backend.kind() != crate::config::BackendKind::Ollama {
            return requested.cloned();
        }
        let now = Utc::now();
        let resident = self.has_loaded(model);
        let base = match requested {
            Some(v) => KeepAlive::parse(v),
            // A load takes the server's default: one learned long ago is learned again
            // (none sent); a resident model keeps its stamp meanwhile.
            None => self.keep_alive_for(model).or_else(|| {
                self.default_learned_at(now)
                    .filter(|(_, fresh)| *fresh || resident)
                    .map(|(k, _)| k)
            }),
        };
        let sent = base.map(|k| k.stamped(now));
        let mut all = lock(&self.sent);
        let before = all.iter().position(|s| &s.model == model);
        let rank = match sent {
            Some(k) => Some(k.rank()),
            // Ollama keeps the resident model's last keep-alive; a load takes the
            // server's default, unknown here.
            None if resident => before.and_then(|i| all[i].rank),
            None => None,
        };
        let record = Sent {
            model: model.clone(),
            rank,
            plain: requested.is_none() && sent.is_none(),
            ended: None,
        };
        match before {
            Some(i) => all[i] = record,
            None => all.push(record),
        }
        sent.map(KeepAlive::to_json).or_else(|| requested.cloned())
    }

    /// The server's default keep-alive, once learned.
    pub fn default_keep_alive(&self) -> Option<KeepAlive> {
        lock(&self.default_keep_alive).map(|(k, _)| k)
    }

    /// The server's default keep-alive, once learned, and whether it was learned within
    /// [`RELEARN_KEEP_ALIVE_AFTER`] of `now`.
    fn default_learned_at(&self, now: DateTime<Utc>) -> Option<(KeepAlive, bool)> {
        lock(&self.default_keep_alive).map(|(k, at)| (k, now - at < RELEARN_KEEP_ALIVE_AFTER))
    }

    /// Whether the server's default keep-alive is known and not due to be learned again.
    fn default_is_fresh(&self, now: DateTime<Utc>) -> bool {
        self.default_learned_at(now).is_some_and(|(_, fresh)| fresh)
    }

    /// A request for `model` ended now, having loaded it (`cold`) or not: when it loaded
    /// it carrying no keep-alive and the server's default is not known yet, a look at the
    /// machine in a little while teaches it (see [`Self::learn_default_keep_alive`]).
    fn request_ended(self: &Arc<Self>, model: &ModelName, cold: bool) {
        let plain = {
            let mut all = lock(&self.sent);
            let Some(s) = all.iter_mut().find(|s| &s.model == model) else {
                return;
            };
            s.ended = Some((Utc::now(), cold));
            s.plain
        };
        if plain && cold && !self.default_is_fresh(Utc::now()) {
            self.look_again_after(DEFAULT_KEEP_ALIVE_LOOK);
        }
    }

    /// Learns the server's default keep-alive from `/api/ps` (`loaded`, read at `now`): a
    /// model that the last request for it here loaded carrying none (Ollama gives a load
    /// its default; a request without one for a resident model leaves it the keep-alive it
    /// had, perhaps one stamped by an earlier run), that ended at least
    /// [`DEFAULT_KEEP_ALIVE_LOOK`] ago (Ollama has set its expiry by then) and is idle,
    /// unloads that long after it ended.
    fn learn_default_keep_alive(&self, loaded: &[Loaded], now: DateTime<Utc>) {
        if self.default_is_fresh(now) {
            return;
        }
        let settled = expiry_settled_by(now);
        let candidates: Vec<(ModelName, DateTime<Utc>)> = lock(&self.sent)
            .iter()
            .filter(|s| s.plain)
            .filter_map(|s| match s.ended {
                Some((ended, true)) if ended <= settled => Some((s.model.clone(), ended)),
                _ => None,
            })
            .collect();
        for (model, ended) in candidates {
            if lock(&self.activity).runs(&model) {
                continue;
            }
            let Some(expires_at) = loaded
                .iter()
                .find(|l| l.model == model)
                .and_then(|l| l.expires_at)
            else {
                continue;
            };
            if let Some(k) = super::keep_alive::learned_default(ended, expires_at) {
                tracing::info!(backend = %self.name(), keep_alive = ?k, "learned the server's keep-alive");
                *lock(&self.default_keep_alive) = Some((k, now));
                return;
            }
        }
    }

    /// Forgets the keep-alive a model's last request here carried once `/api/ps` (asked
    /// at `asked_at`) shows it no longer holds: the model is not resident (unloaded or
    /// pushed out; whoever loads it next sets its own), or its expiry is not the one that
    /// keep-alive set as the request ended ([`expiry_set_by`]: another client's request
    /// set its own since). The model then ranks by its expiry, like one no request here
    /// set ([`Resident::evict_rank`]). A record stays while an answer of the model runs
    /// here, or when its request ended within [`DEFAULT_KEEP_ALIVE_LOOK`] of the look
    /// (Ollama may not have set the expiry yet).
    fn forget_overtaken_keep_alives(&self, loaded: &[Loaded], asked_at: DateTime<Utc>) {
        let settled = expiry_settled_by(asked_at);
        let activity = lock(&self.activity);
        lock(&self.sent).retain(|s| {
            let (Some(rank), Some((ended, _))) = (s.rank, s.ended) else {
                return true;
            };
            if ended > settled || activity.runs(&s.model) {
                return true;
            }
            match loaded.iter().find(|l| l.model == s.model) {
                None => false,
                Some(l) => l.expires_at.is_none_or(|e| expiry_set_by(rank, ended, e)),
            }
        });
    }

    /// Takes back what was learned of this machine before a restart, and keeps what it
    /// learns from now on in `store`.
    pub fn restore_learned(&self, learned: Option<Learned>, store: Arc<dyn LearnedStore>) {
        if let Some(learned) = learned {
            let mut perf = lock(&self.perf);
            if perf.is_empty() {
                *perf = learned.perf;
            }
            lock(&self.activity).restore_max_loaded(learned.max_loaded);
            let mut wide = lock(&self.wide);
            if wide.is_empty() {
                *wide = learned.wide;
            }
        }
        let _ = self.learned.set(store);
    }

    /// What this machine has shown, as kept across restarts.
    pub fn learned(&self) -> Learned {
        Learned {
            perf: lock(&self.perf).clone(),
            max_loaded: lock(&self.activity).learned_max_loaded(),
            wide: lock(&self.wide).clone(),
        }
    }

    /// Writes what was learned when the last write is [`SAVE_EVERY`] old (or there was
    /// none), after a task taught something. A failure is logged, never fatal.
    pub async fn keep_learned(&self) {
        let now = tokio::time::Instant::now();
        {
            let mut last = lock(&self.last_kept);
            if last.is_some_and(|t| now.duration_since(t) < SAVE_EVERY) {
                return;
            }
            *last = Some(now);
        }
        self.keep_learned_now().await;
    }

    /// Writes what was learned now (at exit, so nothing of the last seconds is lost).
    pub async fn keep_learned_now(&self) {
        let Some(store) = self.learned.get() else {
            return;
        };
        if let Err(e) = store.save(self.name(), &self.learned(), Utc::now()).await {
            tracing::warn!(backend = %self.name(), error = %e, "could not keep what placement learned");
        }
    }

    /// The windows the backend's config gives (else Ollama's default cap only).
    pub fn with_windows(mut self, windows: ConfiguredWindows) -> Self {
        self.windows = windows;
        self
    }

    /// Changes whenever the model list changes.
    pub fn watch_models(&self) -> tokio::sync::watch::Receiver<u64> {
        self.models_version.subscribe()
    }

    pub fn name(&self) -> &WorkerName {
        self.backend.name()
    }

    pub fn models(&self) -> Vec<ModelInfo> {
        lock(&self.models).clone()
    }

    pub fn serves(&self, model: &ModelName) -> bool {
        lock(&self.models).iter().any(|m| &m.name == model)
    }

    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// How many models answer here at once (see [`super::slots::models_at_once`]).
    pub fn models_at_once(&self) -> usize {
        let max_loaded = lock(&self.activity).max_loaded();
        let seen = lock(&self.loaded).len().max(self.slots.models_answering());
        super::slots::models_at_once(self.backend.kind(), max_loaded, seen)
    }

    /// A slot for an answer of `model` now, if one is free (see [`super::slots`]).
    pub fn try_slot(&self, model: &ModelName) -> Option<super::slots::Slot> {
        self.slots.try_take(model, self.models_at_once())
    }

    /// An answer for `model` starts now, of `priority`, for `thread` if known, with a prompt of about
    /// `prompt_tokens` and the window `num_ctx` when one is sent. The model counts as
    /// resident from now on, with that window (the look at `/api/ps` after the task
    /// corrects what its load evicted). It is cold when it was not resident, or resident
    /// with another window (Ollama reloads it).
    pub fn start_request(
        self: &Arc<Self>,
        model: &ModelName,
        thread: Option<&ThreadId>,
        prompt_tokens: u32,
        num_ctx: Option<u32>,
        priority: Priority,
    ) -> InFlight {
        let alone = self.in_flight.fetch_add(1, Ordering::Relaxed) == 0;
        // An answer of the model loads it here again, whatever an earlier one left.
        lock(&self.loads_left).retain(|(m, _)| m != model);
        let pushed_out = self.pushes_out_now(model);
        let cold = {
            let mut loaded = lock(&self.loaded);
            let mut cold = !loaded.contains(model);
            lock(&self.activity).loading(model, &loaded);
            if cold {
                loaded.push(model.clone());
                loaded.retain(|m| Some(m) != pushed_out.as_ref());
            }
            if let Some(n) = num_ctx {
                if n > crate::context::OLLAMA_DEFAULT_NUM_CTX {
                    let mut wide = lock(&self.wide);
                    if !wide.contains(model) {
                        wide.push(model.clone());
                    }
                }
                let mut known = lock(&self.loaded_known);
                match known.iter_mut().find(|l| &l.model == model) {
                    Some(l) => {
                        cold |= l.num_ctx.is_some_and(|was| was != n);
                        l.num_ctx = Some(n);
                    }
                    None => known.push(Loaded {
                        model: model.clone(),
                        num_ctx: Some(n),
                        expires_at: None,
                    }),
                }
            }
            cold
        };
        let (id, cached) = {
            let mut activity = lock(&self.activity);
            let cached = !cold && thread.is_some_and(|t| activity.may_hold(t, model));
            let id = activity.start(Running {
                model: model.clone(),
                started_at: Utc::now(),
                first_token_at: None,
                tokens: 0,
                prompt_tokens,
                cold,
                cached,
                priority,
            });
            (id, cached)
        };
        InFlight {
            handle: self.clone(),
            id,
            model: model.clone(),
            thread: thread.cloned(),
            tokens: 0,
            sampled: false,
            cold,
            cached,
            alone,
        }
    }

    /// The idle model a load of `model` pushes out now, on a machine known to be full
    /// (its room configured or learned): Ollama unloads it as the load begins, and
    /// placement must not count it resident until the next look at the machine says so
    /// (the household's seed 6 placed a turn on a model a load had just pushed out, as
    /// resident and its prompt cached). `None` where the machine has room, its room is not
    /// known, or every resident model is busy (the load waits for the first done).
    fn pushes_out_now(&self, model: &ModelName) -> Option<ModelName> {
        if self.has_loaded(model) || lock(&self.activity).max_loaded().is_none() || !self.is_full()
        {
            return None;
        }
        match crate::placement::pushes_out(&self.status(), model) {
            crate::placement::Pushes::Idle(victim) => Some(victim.clone()),
            _ => None,
        }
    }

    /// What a running answer already shows of the machine's speed, taken only where
    /// nothing better is known yet (see [`ModelPerf::first_impression`]).
    fn first_impression(&self, model: &ModelName, running: &Running, now: DateTime<Utc>) {
        self.with_perf(model, |p| p.first_impression(running, now));
    }

    /// Runs `f` on what this machine has shown of `model`, added when nothing was yet.
    fn with_perf(&self, model: &ModelName, f: impl FnOnce(&mut ModelPerf)) {
        let mut perf = lock(&self.perf);
        let at = match perf.iter().position(|p| &p.model == model) {
            Some(at) => at,
            None => {
                perf.push(ModelPerf::new(model.clone()));
                perf.len() - 1
            }
        };
        f(&mut perf[at]);
    }

    /// Records a failure seen while serving a task.
    pub fn mark_failed(&self, error: &str) {
        self.healthy.store(false, Ordering::Relaxed);
        *lock(&self.last_error) = Some(error.to_owned());
    }

    /// Records that the backend answered.
    pub fn mark_ok(&self) {
        self.healthy.store(true, Ordering::Relaxed);
    }

    /// Folds a finished task into what this machine has shown of `model`'s speed.
    pub fn learn(&self, model: &ModelName, sample: Sample) {
        self.with_perf(model, |p| p.learn(sample));
    }

    /// Folds in what a task that left this machine with no first token after `waited_s`
    /// shows of `model`'s speed here (see [`ModelPerf::left_late`]).
    pub fn left_late(
        &self,
        model: &ModelName,
        began: Began,
        prompt_tokens: u32,
        waited_s: f64,
        assumed: Rates,
    ) {
        self.with_perf(model, |p| {
            p.left_late(began, prompt_tokens, waited_s, assumed)
        });
    }

    /// Whether the backend reported `model` resident at the last look.
    pub fn has_loaded(&self, model: &ModelName) -> bool {
        lock(&self.loaded).contains(model)
    }

    /// The window an Ollama backend gets for `request` here (see
    /// [`WorkerStatus::num_ctx_for`]).
    pub fn num_ctx_for(&self, request: &BackendRequest) -> Option<u32> {
        let model = &request.model;
        let context_length = lock(&self.models)
            .iter()
            .find(|m| &m.name == model)
            .and_then(|m| self.context_length(m));
        let window = crate::context::Window {
            context_length,
            max_num_ctx: self.windows.cap,
        };
        let resident = self
            .known(model)
            .and_then(|l| l.num_ctx)
            .filter(|_| self.has_loaded(model));
        let wide = lock(&self.wide).contains(model);
        super::windows::num_ctx_given(self.backend.kind(), window, resident, wide, request)
    }

    /// Reads the resident models again (Ollama's `/api/ps`), as after every task; whether
    /// the backend answered (else what was known stays).
    pub async fn refresh_loaded(&self) -> bool {
        let asked_at = Utc::now();
        match self.backend.loaded_models().await {
            Ok(loaded) => {
                self.learn_default_keep_alive(&loaded, Utc::now());
                self.forget_overtaken_keep_alives(&loaded, asked_at);
                self.set_loaded(loaded);
                true
            }
            Err(_) => false,
        }
    }

    /// Reads the resident models again soon, off the caller's path, as after every
    /// answer. One look runs at a time: the ends that come while it runs share one more
    /// look, begun after them all (under load an answer ends every few milliseconds, and
    /// each does not need a look of its own). Discovery asks for one every
    /// `[timeouts] look_interval_s` too ([`Registry::look_at_all`]). Outside a runtime
    /// (shutdown, plain tests) it is left to the next periodic look.
    pub fn look_again(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.looks_asked.fetch_add(1, Ordering::AcqRel) > 0 {
            // The running look takes this one too.
            return;
        }
        let handle = Arc::clone(self);
        runtime.spawn(async move {
            loop {
                let asked = handle.looks_asked.load(Ordering::Acquire);
                handle.refresh_loaded().await;
                // Asked for since this look began: one more.
                if handle.looks_asked.fetch_sub(asked, Ordering::AcqRel) == asked {
                    break;
                }
            }
        });
    }

    /// [`Self::look_again`] once `after` has passed.
    fn look_again_after(self: &Arc<Self>, after: std::time::Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let handle = Arc::clone(self);
        runtime.spawn(async move {
            tokio::time::sleep(after).await;
            handle.look_again();
        });
    }

    /// What `/api/ps` said: the resident models, and the windows it told; less a model
    /// whose load an answer here left moments ago (Ollama still lists it until it has
    /// given the load up: see `loads_left`).
    fn set_loaded(&self, mut loaded: Vec<Loaded>) {
        {
            let now = std::time::Instant::now();
            let mut left = lock(&self.loads_left);
            left.retain(|(_, until)| *until > now);
            loaded.retain(|l| !left.iter().any(|(m, _)| m == &l.model));
        }
        let models: Vec<ModelName> = loaded.iter().map(|l| l.model.clone()).collect();
        *lock(&self.loaded_known) = loaded;
        lock(&self.activity).resident_now(&models);
        *lock(&self.loaded) = models;
    }

    /// The window of `model` here: the config's, else what the backend reported.
    fn context_length(&self, model: &ModelInfo) -> Option<u32> {
        let w = &self.windows;
        w.per_model
            .get(model.name.as_str())
            .copied()
            .or(w.all)
            .or(model.context_length)
    }

    fn model_windows(&self) -> Vec<ModelWindow> {
        let known = lock(&self.loaded_known).clone();
        let wide = lock(&self.wide).clone();
        lock(&self.models)
            .iter()
            .map(|m| ModelWindow {
                model: m.name.clone(),
                context_length: self.context_length(m),
                loaded_num_ctx: known
                    .iter()
                    .find(|l| l.model == m.name)
                    .and_then(|l| l.num_ctx),
                wide: wide.contains(&m.name),
            })
            .collect()
    }

    /// What is known of `model` while resident (see `loaded_known`).
    fn known(&self, model: &ModelName) -> Option<Loaded> {
        lock(&self.loaded_known)
            .iter()
            .find(|l| &l.model == model)
            .cloned()
    }

    /// Asks the backend for its models (or only checks it answers, when models are configured).
    pub async fn refresh(&self) {
        match self.backend.list_models().await {
            Ok(found) => {
                if self.configured_models.is_none() {
                    let changed = {
                        let mut models = lock(&self.models);
                        let changed = *models != found;
                        *models = found;
                        changed
                    };
                    if changed {
                        self.models_version.send_modify(|v| *v += 1);
                    }
                } else {
                    // Keep the configured list, but learn capabilities the backend reports.
                    let mut models = lock(&self.models);
                    for m in models.iter_mut() {
                        if let Some(f) = found.iter().find(|f| f.name == m.name) {
                            m.tools = f.tools;
                            m.context_length = f.context_length;
                            m.size = f.size;
                        }
                    }
                }
                let was = self.healthy.swap(true, Ordering::Relaxed);
                *lock(&self.last_error) = None;
                if !was {
                    tracing::info!(backend = %self.name(), models = lock(&self.models).len(), "backend is reachable");
                }
            }
            Err(e) => {
                let was = self.healthy.swap(false, Ordering::Relaxed);
                if was || lock(&self.last_error).is_none() {
                    tracing::warn!(backend = %self.name(), error = %e, "backend is unreachable; marked unhealthy");
                }
                *lock(&self.last_error) = Some(e.to_string());
                return;
            }
        }
        self.refresh_loaded().await;
    }

    /// Whether loading a model here now would push out a resident one: the machine holds
    /// as many as it keeps ([`super::activity::capacity`]). Cheaper than a whole status.
    pub fn is_full(&self) -> bool {
        let max_loaded = lock(&self.activity).max_loaded();
        let resident = lock(&self.loaded).len();
        resident >= super::activity::capacity(max_loaded, resident)
    }

    pub fn status(&self) -> WorkerStatus {
        let (running, recent, max_loaded) = {
            let activity = lock(&self.activity);
            (
                activity.running(),
                activity.recent(Utc::now()),
                activity.max_loaded(),
            )
        };
        // Before the others: the literal's lock guards live to its end.
        let windows = self.model_windows();
        let resident = self.resident();
        let sizes = lock(&self.models)
            .iter()
            .filter_map(|m| {
                Some(ModelSize {
                    model: m.name.clone(),
                    bytes: m.size?,
                })
            })
            .collect();
        WorkerStatus {
            name: self.name().clone(),
            kind: self.backend.kind(),
            url: self.backend.settings().base_url.to_string(),
            models: lock(&self.models).iter().map(|m| m.name.clone()).collect(),
            loaded: lock(&self.loaded).clone(),
            healthy: self.is_healthy(),
            in_flight: self.in_flight(),
            parallel: self.slots.parallel(),
            last_error: lock(&self.last_error).clone(),
            perf: lock(&self.perf).clone(),
            running,
            recent,
            max_loaded,
            max_num_ctx: self.windows.cap,
            windows,
            resident,
            sizes,
            server_keep_alive_s: self.default_keep_alive().map(|k| match k {
                KeepAlive::For(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                KeepAlive::Unload => 0,
                KeepAlive::Forever => -1,
            }),
            clock_ahead_ms: self.backend.clock_ahead().map(|d| d.num_milliseconds()),
        }
    }

    /// The resident models with their expiry, as far as `/api/ps` told it (a model this
    /// process just loaded has none until the next look).
    fn resident(&self) -> Vec<Resident> {
        let now = Utc::now();
        let known = lock(&self.loaded_known).clone();
        let sent = lock(&self.sent).clone();
        lock(&self.loaded)
            .iter()
            .map(|m| {
                let expires_at = known
                    .iter()
                    .find(|l| &l.model == m)
                    .and_then(|l| l.expires_at);
                let from_expiry = || expires_at.map(|e| rank_from_expiry(e, now));
                let evict_rank = sent
                    .iter()
                    .find(|s| &s.model == m)
                    .and_then(|s| s.rank)
                    .or_else(from_expiry);
                Resident {
                    model: m.clone(),
                    expires_at,
                    evict_rank,
                }
            })
            .collect()
    }
}

/// All backends of this process. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    handles: Arc<Vec<Arc<BackendHandle>>>,
}

impl Registry {
    pub fn new(handles: Vec<BackendHandle>) -> Self {
        Self {
            handles: Arc::new(handles.into_iter().map(Arc::new).collect()),
        }
    }

    pub fn handles(&self) -> &[Arc<BackendHandle>] {
        &self.handles
    }

    pub fn get(&self, name: &WorkerName) -> Option<&Arc<BackendHandle>> {
        self.handles.iter().find(|h| h.name() == name)
    }

    /// Asks every reachable Ollama machine which models it holds, off the caller's path
    /// ([`BackendHandle::look_again`]: a look already under way takes this one too).
    /// Discovery notices an unreachable one coming back.
    pub fn look_at_all(&self) {
        for h in self.handles.iter() {
            if h.backend.kind() == crate::config::BackendKind::Ollama && h.is_healthy() {
                h.look_again();
            }
        }
    }

    /// Refreshes every backend concurrently.
    pub async fn refresh_all(&self) {
        futures::future::join_all(self.handles.iter().map(|h| h.refresh())).await;
    }

    pub fn any_healthy(&self) -> bool {
        self.handles.iter().any(|h| h.is_healthy())
    }

    pub fn catalog(&self) -> Catalog {
        let mut entries = Vec::new();
        for h in self.handles.iter() {
            let loaded = lock(&h.loaded).clone();
            for m in h.models() {
                entries.push(CatalogEntry {
                    worker: h.name().clone(),
                    resident: loaded.contains(&m.name),
                    model: m.name,
                    healthy: h.is_healthy(),
                    tools: m.tools,
                });
            }
        }
        Catalog::new(entries)
    }

    /// The worker expected to give the ask's first token soonest (see
    /// [`crate::placement::best_of`]).
    pub fn best_worker_for(&self, ask: &crate::placement::Ask<'_>) -> Option<WorkerName> {
        crate::placement::best_of(&self.statuses(), ask)
    }

    pub fn statuses(&self) -> Vec<WorkerStatus> {
        self.handles.iter().map(|h| h.status()).collect()
    }

    /// Keeps what every backend learned, as the process ends.
    pub async fn keep_learned_at_exit(&self) {
        futures::future::join_all(self.handles.iter().map(|h| h.keep_learned_now())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BackendConfig, TimeoutsConfig};

    fn request(model: &ModelName, text: &str) -> BackendRequest {
        BackendRequest {
            model: model.clone(),
            messages: vec![crate::chat::ChatMessage::user(text)],
            params: Default::default(),
            tools: vec![],
        }
    }

    /// An Ollama backend at `url`, with `parallel` slots, serving `models`.
    fn ollama_at(url: String, parallel: usize, models: Vec<ModelName>) -> Arc<BackendHandle> {
        let config = BackendConfig {
            url,
            ..BackendConfig::default_ollama()
        };
        let backend = Backend::from_config(&config, &TimeoutsConfig::default()).unwrap();
        Arc::new(BackendHandle::new(backend, parallel, Some(models)))
    }

    /// An Ollama backend nobody answers on, with `parallel` slots, serving `models`.
    fn ollama(parallel: usize, models: Vec<ModelName>) -> Arc<BackendHandle> {
        ollama_at("http://127.0.0.1:9".into(), parallel, models)
    }

    /// An Ollama handle on a fresh fake serving the model `m`, with one slot.
    async fn on_fake() -> (
        crate::testkit::fake_llm::FakeLlmServer,
        Arc<BackendHandle>,
        ModelName,
    ) {
        let fake = crate::testkit::fake_llm::FakeLlm::builder()
            .model("m")
            .spawn()
            .await
            .unwrap();
        let m = ModelName::parse("m").unwrap();
        let handle = ollama_at(fake.base_url(), 1, vec![m.clone()]);
        (fake, handle, m)
    }

    /// The fake answers with `m` (and lists it in `/api/ps` from then on).
    async fn fake_answers(fake: &crate::testkit::fake_llm::FakeLlmServer) {
        let answered = reqwest::Client::new()
            .post(format!("{}/api/chat", fake.base_url()))
            .json(&serde_json::json!({"model": "m", "stream": false, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert!(answered.status().is_success());
    }

    /// Waits (bounded) until no look at the machine is asked for or running.
    async fn looks_done(handle: &BackendHandle) {
        let idle = async {
            while handle.looks_asked.load(Ordering::Acquire) > 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), idle)
            .await
            .expect("the looks end");
    }

    /// Every answer's end asks for a look at the machine's resident models; ends that
    /// come together share one look (here fifty, before the first look could begin),
    /// and an end after it gets a look of its own, which shows what changed meanwhile.
    #[tokio::test]
    async fn answers_ending_together_share_one_look_at_the_machine() {
        let (fake, handle, m) = on_fake().await;
        let answer = || {
            let mut answer = handle.start_request(&m, None, 10, None, Priority::Interactive);
            answer.token();
            drop(answer);
        };
        for _ in 0..50 {
            answer();
        }
        looks_done(&handle).await;
        assert_eq!(fake.requests_to("/api/ps").len(), 1);
        assert!(!handle.has_loaded(&m), "the fake has loaded nothing yet");
        fake_answers(&fake).await;
        answer();
        looks_done(&handle).await;
        assert_eq!(fake.requests_to("/api/ps").len(), 2);
        assert!(handle.has_loaded(&m));
    }

    /// An Ollama backend nobody listens at.
    fn unreachable_ollama() -> Backend {
        Backend::from_config(
            &BackendConfig {
                url: "http://127.0.0.1:9".into(),
                ..BackendConfig::default_ollama()
            },
            &TimeoutsConfig::default(),
        )
        .unwrap()
    }

    /// An Ollama backend nobody listens at, and the two models `a` and `b`.
    fn ollama_serving_a_and_b() -> (Backend, ModelName, ModelName) {
        let model = |m: &str| ModelName::parse(m).unwrap();
        (unreachable_ollama(), model("a"), model("b"))
    }

    /// The keep-alive a model's last request here carried ranks it while `/api/ps` shows
    /// the expiry it set; once the model is gone, or another client's request has set its
    /// own, the record is forgotten and the model ranks by its expiry. A running answer
    /// of the model, or one that ended moments before the look, keeps its record.
    #[test]
    fn a_keep_alive_sent_here_is_forgotten_once_the_machine_shows_another() {
        let models: Vec<ModelName> = ["kept", "overtaken", "gone", "settling", "busy"]
            .iter()
            .map(|m| ModelName::parse(m).unwrap())
            .collect();
        let handle = Arc::new(BackendHandle::new(
            unreachable_ollama(),
            2,
            Some(models.clone()),
        ));
        let [kept, overtaken, gone, settling, busy] = &models[..] else {
            unreachable!()
        };
        let now = Utc::now();
        let ten_ago = now - chrono::TimeDelta::seconds(10);
        let ms = |n| chrono::TimeDelta::milliseconds(n);
        let mut ranks = Vec::new();
        for m in &models {
            let sent = handle
                .keep_alive_to_send(m, Some(&serde_json::json!("5m")))
                .unwrap();
            ranks.push(KeepAlive::parse(&sent).unwrap().rank());
            let ended = if m == settling {
                now - ms(500)
            } else {
                ten_ago
            };
            lock(&handle.sent)
                .iter_mut()
                .find(|s| &s.model == m)
                .unwrap()
                .ended = Some((ended, false));
        }
        // An answer of `busy` runs (another ended ten seconds ago): Ollama sets the expiry
        // when both are done.
        let running = handle.start_request(busy, None, 10, None, Priority::Interactive);
        let set_by = |i: usize, ended| {
            ended + chrono::TimeDelta::nanoseconds(i64::try_from(ranks[i]).unwrap())
        };
        let two_hours = now + chrono::TimeDelta::hours(2);
        let listed = |model: &ModelName, expires_at| Loaded {
            model: model.clone(),
            num_ctx: None,
            expires_at: Some(expires_at),
        };
        let look = vec![
            listed(kept, set_by(0, ten_ago) + ms(300)),
            listed(overtaken, two_hours),
            listed(settling, two_hours),
            listed(busy, two_hours),
        ];
        handle.forget_overtaken_keep_alives(&look, now);
        handle.set_loaded(look);
        let remembered: Vec<ModelName> =
            lock(&handle.sent).iter().map(|s| s.model.clone()).collect();
        assert!(!remembered.contains(gone) && !handle.has_loaded(gone));
        assert_eq!(
            remembered,
            [kept.clone(), settling.clone(), busy.clone()],
            "`gone` is not resident; `overtaken` shows another client's two hours"
        );
        let rank_of = |m: &ModelName| {
            handle
                .status()
                .resident
                .into_iter()
                .find(|r| &r.model == m)
                .and_then(|r| r.evict_rank)
                .unwrap()
        };
        assert_eq!(rank_of(kept), ranks[0]);
        assert_eq!(rank_of(settling), ranks[3]);
        assert_eq!(rank_of(busy), ranks[4]);
        // Ranked by its expiry: after the five minutes stamped here, as Ollama ranks it.
        let from_expiry = rank_of(overtaken);
        assert!(from_expiry > ranks[4], "{from_expiry} {ranks:?}");
        assert!(from_expiry <= 7_200_000_000_000, "{from_expiry}");
        drop(running);
    }

    /// A load on a machine known to keep one model pushes the resident one out: from the
    /// load's start placement no longer counts it resident (the household's seed 6 placed
    /// a turn on a model a load had just pushed out, as resident and cached). Where the
    /// machine's room is not known, or the resident model is busy, it stays counted.
    #[test]
    fn a_load_on_a_full_machine_stops_counting_what_it_pushes_out() {
        let (backend, a, b) = ollama_serving_a_and_b();
        let resident_a = || Loaded {
            model: a.clone(),
            num_ctx: None,
            expires_at: None,
        };
        for (max_loaded, a_busy, left) in [
            (Some(1), false, vec![b.clone()]),
            (None, false, vec![a.clone(), b.clone()]),
            (Some(1), true, vec![a.clone(), b.clone()]),
            (Some(2), false, vec![a.clone(), b.clone()]),
        ] {
            let handle = Arc::new(
                BackendHandle::new(backend.clone(), 1, Some(vec![a.clone(), b.clone()]))
                    .with_max_loaded(max_loaded),
            );
            handle.set_loaded(vec![resident_a()]);
            let busy =
                a_busy.then(|| handle.start_request(&a, None, 10, None, Priority::Interactive));
            let load = handle.start_request(&b, None, 10, None, Priority::Interactive);
            assert!(load.cold);
            assert_eq!(
                handle.status().loaded,
                left,
                "max_loaded {max_loaded:?}, a busy: {a_busy}"
            );
            drop((busy, load));
        }
    }

    /// A load an answer here left is given up by Ollama at its next poll, and `/api/ps`
    /// lists the model until then: a look meanwhile does not count it resident. The next
    /// answer of the model here loads it again, and then a look counts it.
    #[tokio::test]
    async fn a_model_whose_load_was_left_is_not_counted_from_a_look_at_once() {
        let (fake, handle, m) = on_fake().await;
        fake_answers(&fake).await;
        // An answer that waited for the load and left before its first token.
        drop(handle.start_request(&m, None, 10, None, Priority::Interactive));
        looks_done(&handle).await;
        handle.refresh_loaded().await;
        assert!(!handle.has_loaded(&m), "listed, but the load was left");
        let again = handle.start_request(&m, None, 10, None, Priority::Interactive);
        handle.refresh_loaded().await;
        assert!(
            handle.has_loaded(&m),
            "an answer of the model loads it again"
        );
        drop(again);
    }

    /// A conversation's next turn on the machine and model that served it last starts
    /// `cached` (its prompt cache may hold the history, so the turn teaches no prompt
    /// rate); its first turn, a turn of another model, and a turn after the model was
    /// loaded again (the cache went with the old runner) do not.
    #[tokio::test]
    async fn a_turn_the_prompt_cache_may_hold_starts_cached() {
        let m = ModelName::parse("m").unwrap();
        let other = ModelName::parse("other").unwrap();
        let handle = ollama(1, vec![m.clone(), other.clone()]);
        let chat = ThreadId::parse("chat").unwrap();
        let turn = |model: &ModelName, thread: Option<&ThreadId>| {
            let mut f = handle.start_request(model, thread, 2000, None, Priority::Interactive);
            let began = (f.cold, f.cached);
            // An answer came: the conversation is in the machine's cache now.
            f.token();
            drop(f);
            began
        };
        assert_eq!(turn(&m, Some(&chat)), (true, false));
        assert_eq!(turn(&m, Some(&chat)), (false, true));
        assert_eq!(turn(&m, None), (false, false));
        let fresh = ThreadId::parse("another chat").unwrap();
        assert_eq!(turn(&m, Some(&fresh)), (false, false));
        assert_eq!(turn(&other, Some(&chat)), (true, false));
        // The chat's last turn was of the other model: this one's cache is not its.
        assert_eq!(turn(&m, Some(&chat)), (false, false));
        assert_eq!(turn(&m, Some(&chat)), (false, true));
        // Unloaded since: loaded again, with an empty cache.
        handle.set_loaded(vec![]);
        assert_eq!(turn(&m, Some(&chat)), (true, false));
    }

    /// A turn whose request ended here before its first token (moved to another machine
    /// once its prompt was under way, stopped) may have left its prompt in the machine's
    /// cache: the conversation's next turn here starts `cached` and teaches no prompt
    /// rate (in the household, such a turn taught the mini PC a prompt rate of about
    /// 23,000 tokens a second, 80 times its own, and placement sent a 3,929-token turn
    /// there to wait 15 s). Placement still does not count on that cache.
    #[tokio::test]
    async fn a_turn_after_one_that_left_before_its_first_token_starts_cached() {
        let m = ModelName::parse("m").unwrap();
        let handle = ollama(1, vec![m.clone()]);
        // Another conversation's answer: the model is resident.
        let mut warm = handle.start_request(&m, None, 10, None, Priority::Interactive);
        warm.token();
        drop(warm);
        let chat = ThreadId::parse("chat").unwrap();
        let left = handle.start_request(&m, Some(&chat), 1800, None, Priority::Interactive);
        assert_eq!((left.cold, left.cached), (false, false));
        drop(left);
        let next = handle.start_request(&m, Some(&chat), 2000, None, Priority::Interactive);
        assert_eq!((next.cold, next.cached), (false, true));
        drop(next);
        assert!(
            handle.status().recent.is_empty(),
            "served nothing: placement counts on no cache"
        );
        let other = ThreadId::parse("another chat").unwrap();
        let fresh = handle.start_request(&m, Some(&other), 2000, None, Priority::Interactive);
        assert!(!fresh.cached);
    }

    /// An answer that needed a load and ended before its first token (it moved to another
    /// machine, or was stopped) does not leave its model counted resident: the load may
    /// still be under way (Ollama goes on after the client left) or have failed, and a
    /// machine that looks loaded looks instant to placement. One that answered does; one
    /// whose model another answer still waits for leaves it to that answer.
    #[tokio::test]
    async fn a_load_left_before_its_first_token_is_not_counted_resident() {
        let m = ModelName::parse("m").unwrap();
        let handle = ollama(2, vec![m.clone()]);
        let start = || handle.start_request(&m, None, 100, None, Priority::Interactive);

        let left = start();
        assert!(left.cold);
        assert!(
            handle.has_loaded(&m),
            "counted from the start, for the next placement"
        );
        drop(left);
        assert!(!handle.has_loaded(&m), "left during its load");
        assert!(start().cold, "the next answer expects the load again");

        let (first, second) = (start(), start());
        assert!(first.cold && !second.cold);
        drop(first);
        assert!(
            handle.has_loaded(&m),
            "the second answer still waits for the load"
        );
        drop(second);
        assert!(!handle.has_loaded(&m));

        let mut answered = start();
        answered.token();
        drop(answered);
        assert!(handle.has_loaded(&m), "a model that answered is resident");
        let warm = start();
        assert!(!warm.cold);
        drop(warm);
        assert!(
            handle.has_loaded(&m),
            "an answer that found it resident changes nothing"
        );
    }

    /// A model once loaded with more than Ollama's default window is loaded with the whole
    /// window next time, even for a short prompt: a household's long chats then cost one
    /// load, not a load and a reload. The status (and so placement, in any process) and what
    /// is kept across restarts say the same.
    #[tokio::test]
    async fn a_model_loaded_wide_is_loaded_wide_again() {
        let config = BackendConfig {
            url: "http://127.0.0.1:9".into(),
            ..BackendConfig::default_ollama()
        };
        let backend = Backend::from_config(&config, &TimeoutsConfig::default()).unwrap();
        let m = ModelName::parse("m").unwrap();
        let handle = Arc::new(
            BackendHandle::new(backend, 1, Some(vec![m.clone()]))
                .with_windows(ConfiguredWindows::from_config(&config)),
        );
        let short = request(&m, "hello");
        let long = request(&m, &"word ".repeat(20_000));
        let limit = crate::context::DEFAULT_MAX_NUM_CTX;
        assert_eq!(
            handle.num_ctx_for(&short),
            Some(crate::context::OLLAMA_DEFAULT_NUM_CTX)
        );
        assert_eq!(
            handle.status().num_ctx_for(&short),
            handle.num_ctx_for(&short)
        );

        let sent = handle.num_ctx_for(&long);
        assert_eq!(sent, Some(limit));
        drop(handle.start_request(&m, None, 20_000, sent, Priority::Interactive));
        // Unloaded since (its keep-alive ended).
        handle.set_loaded(vec![]);
        assert_eq!(handle.num_ctx_for(&short), Some(limit));
        assert_eq!(handle.status().num_ctx_for(&short), Some(limit));
        assert_eq!(handle.learned().wide, vec![m.clone()]);

        // After a restart, from what was kept.
        let backend = Backend::from_config(&config, &TimeoutsConfig::default()).unwrap();
        let restarted = BackendHandle::new(backend, 1, Some(vec![m.clone()]))
            .with_windows(ConfiguredWindows::from_config(&config));
        assert_eq!(
            restarted.num_ctx_for(&short),
            Some(crate::context::OLLAMA_DEFAULT_NUM_CTX)
        );
        restarted.restore_learned(
            Some(handle.learned()),
            Arc::new(crate::placement::learned::SqliteLearned(
                sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap(),
            )),
        );
        assert_eq!(restarted.num_ctx_for(&short), Some(limit));
    }

    #[test]
    fn the_servers_keep_alive_is_learned_again_an_hour_on() {
        use std::time::Duration;
        let (backend, a, b) = ollama_serving_a_and_b();
        let handle = BackendHandle::new(backend, 1, Some(vec![a.clone(), b.clone()]));
        handle.set_loaded(vec![Loaded {
            model: a.clone(),
            num_ctx: None,
            expires_at: None,
        }]);
        let five = KeepAlive::For(Duration::from_secs(300));
        let seconds_sent = |m: &ModelName| {
            handle
                .keep_alive_to_send(m, None)
                .map(|v| match KeepAlive::parse(&v) {
                    Some(KeepAlive::For(d)) => d.as_secs(),
                    other => panic!("{v}: {other:?}"),
                })
        };
        // Learned ten minutes ago: sent, stamped, for a load and a resident model alike.
        *lock(&handle.default_keep_alive) =
            Some((five, Utc::now() - chrono::Duration::minutes(10)));
        assert_eq!(seconds_sent(&b), Some(300));
        assert_eq!(seconds_sent(&a), Some(300));
        // Two hours ago: the load carries none (the server's own applies, and teaches it);
        // the resident model keeps its stamp meanwhile.
        *lock(&handle.default_keep_alive) = Some((five, Utc::now() - chrono::Duration::hours(2)));
        assert_eq!(seconds_sent(&b), None);
        assert_eq!(seconds_sent(&a), Some(300));
        // That load ended ten seconds ago and `b` unloads seven minutes after: the owner
        // has set seven minutes since.
        let now = Utc::now();
        let ended = now - chrono::Duration::seconds(10);
        lock(&handle.sent)
            .iter_mut()
            .find(|s| s.model == b)
            .unwrap()
            .ended = Some((ended, true));
        handle.learn_default_keep_alive(
            &[Loaded {
                model: b.clone(),
                num_ctx: None,
                expires_at: Some(ended + chrono::Duration::seconds(420)),
            }],
            now,
        );
        assert_eq!(
            handle.default_keep_alive(),
            Some(KeepAlive::For(Duration::from_secs(420)))
        );
        assert_eq!(seconds_sent(&b), Some(420));
    }

    #[test]
    fn resident_models_carry_their_expiry_in_the_status_and_the_heartbeat() {
        let (backend, a, b) = ollama_serving_a_and_b();
        let handle = BackendHandle::new(backend, 1, Some(vec![a.clone(), b.clone()]));
        let at = DateTime::parse_from_rfc3339("2026-12-02T14:05:00Z")
            .unwrap()
            .to_utc();
        handle.set_loaded(vec![
            Loaded {
                model: a.clone(),
                num_ctx: None,
                expires_at: Some(at),
            },
            Loaded {
                model: b.clone(),
                num_ctx: None,
                expires_at: None,
            },
        ]);
        // A request for `a` carried a keep-alive: where Ollama puts `a` in its order of
        // models to push out travels too.
        let sent = handle
            .keep_alive_to_send(&a, Some(&serde_json::json!("5m")))
            .unwrap();
        let rank = super::KeepAlive::parse(&sent).unwrap().rank();
        let status = handle.status();
        assert_eq!(
            status.resident,
            [
                Resident {
                    model: a,
                    expires_at: Some(at),
                    evict_rank: Some(rank),
                },
                Resident {
                    model: b,
                    expires_at: None,
                    evict_rank: None,
                },
            ]
        );
        // The heartbeat is the status as JSON: the expiry travels as RFC 3339.
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["resident"][0]["expires_at"], "2026-12-02T14:05:00Z");
        assert_eq!(json["resident"][1]["expires_at"], serde_json::Value::Null);
        let back: WorkerStatus = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, status);
        // A heartbeat of an older version has none.
        let mut older = json;
        older.as_object_mut().unwrap().remove("resident");
        let older: WorkerStatus = serde_json::from_value(older).unwrap();
        assert!(older.resident.is_empty());
    }
}
