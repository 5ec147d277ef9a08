//! The backends this process runs, with their discovered models and health.
//!
//! Model lists are discovered at start and refreshed periodically; a backend that is down
//! is marked unhealthy, never fatal. The registry yields the router's [`Catalog`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::perf::{ModelPerf, Sample};
use super::{Backend, ModelInfo};
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
            })
            .collect();
        Self {
            backend,
            max_concurrency,
            configured_models,
            models: Mutex::new(models),
            loaded: Mutex::new(Vec::new()),
            healthy: AtomicBool::new(false),
            last_error: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            perf: Mutex::new(Vec::new()),
            models_version: tokio::sync::watch::Sender::new(0),
        }
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

    /// Counts `model` as resident: a task for it has started here.
    pub fn note_resident(&self, model: &ModelName) {
        let mut loaded = lock(&self.loaded);
        if !loaded.contains(model) {
            loaded.push(model.clone());
        }
    }

    /// Reads the resident models again (Ollama's `/api/ps`), as after every task.
    pub async fn refresh_loaded(&self) {
        if let Ok(loaded) = self.backend.loaded_models().await {
            *lock(&self.loaded) = loaded;
        }
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
        if let Ok(loaded) = self.backend.loaded_models().await {
            *lock(&self.loaded) = loaded;
        }
    }

    pub fn status(&self) -> WorkerStatus {
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
