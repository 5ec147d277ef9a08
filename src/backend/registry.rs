//! The backends this process runs, with their discovered models and health.
//!
//! Model lists are discovered at start and refreshed periodically; a backend that is down
//! is marked unhealthy, never fatal. The registry yields the router's [`Catalog`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::perf::{ModelPerf, Sample};
pub use super::windows::ConfiguredWindows;
use super::{Backend, BackendRequest, Loaded, ModelInfo};
use crate::context::{self, ModelWindow};
use crate::domain::{ModelName, WorkerName};
use crate::routing::{Catalog, CatalogEntry};

/// One backend and what is known about it right now.
#[derive(Debug)]
pub struct BackendHandle {
    pub backend: Backend,
    pub max_concurrency: usize,
    /// Models from the config; when set, discovery only checks health.
    configured_models: Option<Vec<ModelName>>,
    models: Mutex<Vec<ModelInfo>>,
    loaded: Mutex<Vec<ModelName>>,
    /// The window each resident model was loaded with, as far as known.
    loaded_num_ctx: Mutex<Vec<(ModelName, u32)>>,
    /// Windows from the config (`[[backends]] context_length`, `model_context_length`,
    /// `max_num_ctx`).
    windows: ConfiguredWindows,
    healthy: AtomicBool,
    last_error: Mutex<Option<String>>,
    in_flight: AtomicUsize,
    /// What its tasks have shown of its speed, per model.
    perf: Mutex<Vec<ModelPerf>>,
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
    pub max_concurrency: usize,
    pub last_error: Option<String>,
    /// Learned speed per model (placement's figures); older heartbeats carry none.
    #[serde(default)]
    pub perf: Vec<ModelPerf>,
    /// The largest window a request gets here (`[[backends]] max_num_ctx`; Ollama's
    /// default cap when not set).
    #[serde(default)]
    pub max_num_ctx: Option<u32>,
    /// Per model: its window and the one it is resident with.
    #[serde(default)]
    pub windows: Vec<ModelWindow>,
}

/// Decrements the in-flight count when dropped.
#[derive(Debug)]
pub struct InFlight(Arc<BackendHandle>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked while holding plain data.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl BackendHandle {
    pub fn new(
        backend: Backend,
        max_concurrency: usize,
        configured_models: Option<Vec<ModelName>>,
    ) -> Self {
        let models = configured_models
            .iter()
            .flatten()
            .map(|m| ModelInfo {
                name: m.clone(),
                tools: None,
                context_length: None,
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
            max_concurrency,
            configured_models,
            models: Mutex::new(models),
            loaded: Mutex::new(Vec::new()),
            loaded_num_ctx: Mutex::new(Vec::new()),
            windows,
            healthy: AtomicBool::new(false),
            last_error: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            perf: Mutex::new(Vec::new()),
            models_version: tokio::sync::watch::Sender::new(0),
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

    pub fn start_request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
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
        let mut perf = lock(&self.perf);
        match perf.iter_mut().find(|p| &p.model == model) {
            Some(p) => p.learn(sample),
            None => {
                let mut p = ModelPerf::new(model.clone());
                p.learn(sample);
                perf.push(p);
            }
        }
    }

    /// Whether the backend reported `model` resident at the last look.
    pub fn has_loaded(&self, model: &ModelName) -> bool {
        lock(&self.loaded).contains(model)
    }

    /// The window an Ollama backend gets for `request` here (see
    /// [`WorkerStatus::num_ctx_for`]).
    pub fn num_ctx_for(&self, request: &BackendRequest) -> Option<u32> {
        self.status().num_ctx_for(request)
    }

    /// Counts `model` as resident: a task for it has started here, with `num_ctx` when
    /// one was sent (the window the model is now loaded with).
    pub fn note_resident(&self, model: &ModelName, num_ctx: Option<u32>) {
        let mut loaded = lock(&self.loaded);
        if !loaded.contains(model) {
            loaded.push(model.clone());
        }
        if let Some(n) = num_ctx {
            let mut sizes = lock(&self.loaded_num_ctx);
            sizes.retain(|(m, _)| m != model);
            sizes.push((model.clone(), n));
        }
    }

    /// Reads the resident models again (Ollama's `/api/ps`), as after every task.
    pub async fn refresh_loaded(&self) {
        if let Ok(loaded) = self.backend.loaded_models().await {
            self.set_loaded(loaded);
        }
    }

    /// What `/api/ps` said: the resident models, and the windows it told.
    fn set_loaded(&self, loaded: Vec<Loaded>) {
        let sizes = loaded
            .iter()
            .filter_map(|l| Some((l.model.clone(), l.num_ctx?)))
            .collect();
        *lock(&self.loaded_num_ctx) = sizes;
        *lock(&self.loaded) = loaded.into_iter().map(|l| l.model).collect();
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
        let sizes = lock(&self.loaded_num_ctx).clone();
        lock(&self.models)
            .iter()
            .map(|m| ModelWindow {
                model: m.name.clone(),
                context_length: self.context_length(m),
                loaded_num_ctx: sizes.iter().find(|(n, _)| n == &m.name).map(|(_, c)| *c),
            })
            .collect()
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

    pub fn status(&self) -> WorkerStatus {
        // Before the others: the literal's lock guards live to its end.
        let windows = self.model_windows();
        WorkerStatus {
            name: self.name().clone(),
            kind: self.backend.kind(),
            url: self.backend.settings().base_url.to_string(),
            models: lock(&self.models).iter().map(|m| m.name.clone()).collect(),
            loaded: lock(&self.loaded).clone(),
            healthy: self.is_healthy(),
            in_flight: self.in_flight(),
            max_concurrency: self.max_concurrency,
            last_error: lock(&self.last_error).clone(),
            perf: lock(&self.perf).clone(),
            max_num_ctx: self.windows.cap,
            windows,
        }
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
            for m in h.models() {
                entries.push(CatalogEntry {
                    worker: h.name().clone(),
                    model: m.name,
                    healthy: h.is_healthy(),
                    tools: m.tools,
                });
            }
        }
        Catalog::new(entries)
    }

    /// The worker expected to give the first token of a task for `model` soonest (see
    /// [`crate::cluster::best_of`]).
    pub fn best_worker_for(&self, model: &ModelName, prompt_tokens: u32) -> Option<WorkerName> {
        crate::cluster::best_of(&self.statuses(), model, prompt_tokens)
    }

    pub fn statuses(&self) -> Vec<WorkerStatus> {
        self.handles.iter().map(|h| h.status()).collect()
    }
}
