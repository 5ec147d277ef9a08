//! Building and running the application: store, queue, events, backends, workers and the
//! HTTP server, wired from one [`Config`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::serve::ListenerExt;
use chrono::Utc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backend::{Backend, BackendHandle, Registry};
use crate::config::{Config, InternalTasksMode, QueueConfig, StoreConfig};
use crate::domain::ModelName;
use crate::events::{EventBus, InProcessEvents};
use crate::memory::Memory;
use crate::queue::in_process::InProcessQueue;
use crate::queue::{Job, Queue};
use crate::routing::Router;
use crate::service::Coordinator;
use crate::store::sqlite::SqliteStore;
use crate::store::{TaskOutcome, TaskStore};
use crate::worker::{MAX_ATTEMPTS, Worker};

/// A built application: listener bound, store open, backends probed, not yet serving.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    coordinator: Coordinator,
    registry: Registry,
}

/// Opens the task store the config names.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn TaskStore>> {
    match &config.store {
        StoreConfig::Sqlite { path } => {
            Ok(Arc::new(SqliteStore::open(path).await.with_context(
                || format!("opening the SQLite task store at {}", path.display()),
            )?))
        }
        StoreConfig::Postgres { .. } => {
            anyhow::bail!("store type \"postgres\" is not available in this build yet")
        }
    }
}

/// Opens conversation memory in the task store's database, with the embedder `[memory]`
/// names (served by one of the registry's backends) or the built-in one. Memory that
/// cannot be opened is logged and left out: chat keeps working without it.
async fn open_memory(config: &Config, registry: &Registry) -> Option<Memory> {
    let backends: Vec<Backend> = registry
        .handles()
        .iter()
        .map(|h| h.backend.clone())
        .collect();
    match Memory::from_config(config, &backends).await {
        Ok(memory) => Some(memory),
        Err(e) => {
            tracing::error!(error = %e, "conversation memory could not be opened; running without it");
            None
        }
    }
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let problems = config.validate();
        if !problems.is_empty() {
            anyhow::bail!("invalid configuration:\n{}", problems.join("\n"));
        }
        let config = Arc::new(config);
        let store = open_store(&config).await?;
        let queue: Arc<dyn Queue> = match &config.queue {
            QueueConfig::InProcess => Arc::new(InProcessQueue::new()),
            QueueConfig::Redis { .. } => {
                anyhow::bail!("queue type \"redis\" is not available in this build yet")
            }
        };
        let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
        let mut handles = Vec::new();
        for b in config.effective_backends() {
            let backend = Backend::from_config(&b, &config.timeouts)
                .with_context(|| format!("backend {}", b.name))?;
            let models = b
                .models
                .as_ref()
                .map(|ms| {
                    ms.iter()
                        .map(|m| ModelName::parse(m))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?;
            handles.push(BackendHandle::new(backend, b.max_concurrency, models));
        }
        let registry = Registry::new(handles);
        registry.refresh_all().await;
        let router = Router::new(config.routing.clone(), config.internal_tasks.clone());
        let memory = open_memory(&config, &registry).await;
        let coordinator = Coordinator {
            config: config.clone(),
            store,
            queue,
            events,
            router,
            directory: Arc::new(registry.clone()),
            started_at: Utc::now(),
            memory,
        };
        let listener = TcpListener::bind(&config.server.listen)
            .await
            .with_context(|| format!("binding {}", config.server.listen))?;
        let addr = listener.local_addr()?;
        Ok(Self {
            listener,
            addr,
            coordinator,
            registry,
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }

    /// Serves until `shutdown` resolves, then stops taking work and lets running tasks
    /// finish up to `[server] shutdown_grace_s`.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            listener,
            addr,
            coordinator,
            registry,
        } = self;
        let config = coordinator.config.clone();
        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let tracker = TaskTracker::new();

        recover_unfinished(&coordinator).await?;

        let utility_model = match config.internal_tasks.mode {
            InternalTasksMode::Model => config
                .internal_tasks
                .model
                .as_deref()
                .and_then(|m| ModelName::parse(m).ok()),
            InternalTasksMode::Rules => None,
        };
        for handle in registry.handles() {
            let worker = Worker {
                handle: handle.clone(),
                queue: coordinator.queue.clone(),
                store: coordinator.store.clone(),
                events: coordinator.events.clone(),
                directory: coordinator.directory.clone(),
                utility_model: utility_model.clone(),
                abort: abort.clone(),
            };
            tracker.spawn(worker.run(stop.clone(), tracker.clone()));
        }
        tracker.spawn(discovery_loop(
            registry.clone(),
            Duration::from_secs(config.timeouts.discovery_interval_s.max(1)),
            stop.clone(),
        ));

        tracing::info!(addr = %addr, "coordinator listening");
        let app = crate::api::router(coordinator.clone());
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY");
            }
        });
        let http_stop = stop.clone();
        let server = axum::serve(listener, app)
            .with_graceful_shutdown(async move { http_stop.cancelled().await });
        let grace = Duration::from_secs(config.server.shutdown_grace_s);
        let mut http = tokio::spawn(async move { server.await });
        tokio::select! {
            () = shutdown => stop.cancel(),
            res = &mut http => {
                stop.cancel();
                tracker.close();
                tracker.wait().await;
                return match res {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(anyhow::anyhow!("HTTP server failed: {e}")),
                    Err(e) => Err(anyhow::anyhow!("HTTP server task failed: {e}")),
                };
            }
        }
        tracing::info!(
            grace_s = grace.as_secs(),
            "shutting down: no new work; waiting for running tasks"
        );
        tracker.close();
        if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
            tracing::warn!(
                "running tasks did not finish within the grace period; they stay recorded and are queued again at the next start"
            );
            abort.cancel();
            tracker.wait().await;
        }
        match tokio::time::timeout(Duration::from_secs(1), &mut http).await {
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "HTTP server ended with an error"),
            Ok(_) => {}
            Err(_) => {
                http.abort();
                tracing::info!("open client connections closed at shutdown");
            }
        }
        tracing::info!("coordinator stopped");
        Ok(())
    }
}

/// Refreshes backends' model lists and health until `stop`.
async fn discovery_loop(registry: Registry, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => registry.refresh_all().await,
            () = stop.cancelled() => return,
        }
    }
}

/// Queues again the tasks a previous run left queued or running, or fails those that
/// cannot run again. Logs each.
pub async fn recover_unfinished(coordinator: &Coordinator) -> anyhow::Result<()> {
    let unfinished = coordinator
        .store
        .unfinished()
        .await
        .context("reading unfinished tasks")?;
    for task in unfinished {
        let job = task
            .job
            .as_deref()
            .and_then(|j| serde_json::from_str::<Job>(j).ok());
        let attempts = u32::try_from(task.attempts).unwrap_or(u32::MAX);
        match job {
            Some(mut job) if attempts < MAX_ATTEMPTS => {
                job.attempt = attempts;
                let text = serde_json::to_string(&job)?;
                coordinator
                    .store
                    .requeue(task.task_id, &text, Utc::now())
                    .await?;
                coordinator.queue.enqueue(job).await?;
                tracing::warn!(task_id = %task.task_id, was = %task.status, attempts, "task left unfinished by the last run was queued again");
            }
            _ => {
                let reason = if attempts >= MAX_ATTEMPTS {
                    format!("interrupted by a restart after {attempts} attempts; not tried again")
                } else {
                    "interrupted by a restart and its job could not be read back".to_owned()
                };
                coordinator
                    .store
                    .finish(
                        task.task_id,
                        &TaskOutcome::failed(Utc::now(), reason.clone()),
                    )
                    .await?;
                tracing::warn!(task_id = %task.task_id, was = %task.status, reason = %reason, "task left unfinished by the last run was failed");
            }
        }
    }
    Ok(())
}
