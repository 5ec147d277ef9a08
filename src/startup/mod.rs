//! Building and running the processes: `serve` ([`Application`]: HTTP front doors, router,
//! and the local workers) and `worker` ([`WorkerProcess`]: workers only, cluster mode),
//! wired from one [`Config`].

mod parts;
mod recover;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use parts::{ClusterLink, build_registry, open_store, open_transport, web_context};
pub use recover::{LOST_AFTER, reconcile, recover_unfinished};

use self::parts::{WorkerParts, open_metrics, spawn_workers};
use crate::backend::classify::RegistryClassifier;
use crate::backend::{Backend, Registry};
use crate::config::{Config, QueueConfig};
use crate::memory::Memory;
use crate::metrics::shared::Sharing;
use crate::routing::Decider;
use crate::server;
use crate::service::{AppState, Services};

/// How often cluster mode compares the store with the queue.
const RECONCILE_EVERY: Duration = Duration::from_secs(2);

/// The RAG lane's documents, with the follow-up rewriter the web lane uses (whether or
/// not web search is on).
async fn open_rag(
    config: &Config,
    registry: &Registry,
) -> anyhow::Result<Option<Arc<crate::docs::lane::RagContext>>> {
    let rewriter = parts::query_rewriter(config, registry);
    let ctx = crate::docs::lane::RagContext::open(config, rewriter)
        .await
        .context("opening the documents")?;
    Ok(Some(Arc::new(ctx)))
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

/// A built `serve`: listener bound, store open, backends probed, not yet serving.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    limits: server::Limits,
    coordinator: AppState,
    registry: Registry,
    cluster: Option<ClusterLink>,
    sharing: Option<Sharing>,
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let problems = config.validate();
        if !problems.is_empty() {
            anyhow::bail!("invalid configuration:\n{}", problems.join("\n"));
        }
        if let Some(problem) = config.server.open_port_problem() {
            anyhow::bail!("refusing to start: {problem}");
        }
        if config.server.is_open() {
            tracing::warn!(
                listen = %config.server.listen,
                "serving without API keys on an address other machines can reach ([server] allow_open = true): anyone on the network can use it"
            );
        }
        let mut limits = server::Limits::from_config(&config.server);
        limits.max_connections =
            server::connection_cap(limits.max_connections, server::raise_nofile_limit());
        let config = Arc::new(config);
        let store = open_store(&config).await?;
        let registry = build_registry(&config, None)?;
        crate::placement::learned::restore(&registry, &config.store).await;
        registry.refresh_all().await;
        let transport = open_transport(&config, &registry, store.clone()).await?;
        let (metrics, sharing) = open_metrics(transport.cluster.as_ref(), true).await?;
        let decider = Decider::with_classifier(
            config.routing.clone(),
            config.internal_tasks.clone(),
            Arc::new(RegistryClassifier {
                registry: registry.clone(),
            }),
        );
        let coordinator = AppState::from(Services {
            config: config.clone(),
            store,
            events: transport.dispatch.events().clone(),
            dispatch: transport.dispatch,
            decider,
            directory: transport.directory,
            started_at: Utc::now(),
            metrics,
            keys: Arc::new(
                crate::people::Keys::from_config(&config.server)
                    .map_err(|p| anyhow::anyhow!("invalid configuration:\n{}", p.join("\n")))?,
            ),
            limits: Arc::new(crate::limits::Limits::new(&config.limits)),
            shutdown: CancellationToken::new(),
            memory: open_memory(&config, &registry).await,
            rag: open_rag(&config, &registry).await?,
        });
        let listener = TcpListener::bind(&config.server.listen)
            .await
            .with_context(|| format!("binding {}", config.server.listen))?;
        let addr = listener.local_addr()?;
        Ok(Self {
            listener,
            addr,
            limits,
            coordinator,
            registry,
            cluster: transport.cluster,
            sharing,
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn coordinator(&self) -> &AppState {
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
            limits,
            coordinator,
            registry,
            cluster,
            sharing,
        } = self;
        let config = coordinator.config.clone();
        let stop = coordinator.shutdown.clone();
        let abort = CancellationToken::new();
        let tracker = TaskTracker::new();

        match config.queue {
            QueueConfig::InProcess => {
                recover_unfinished(
                    coordinator.store.as_ref(),
                    coordinator.dispatch.queue().as_ref(),
                )
                .await?;
            }
            QueueConfig::Redis { .. } => {
                if let Some(memory) = coordinator.memory.clone() {
                    tracker.spawn(memory_reload_loop(
                        memory,
                        MEMORY_REFRESH_EVERY,
                        stop.clone(),
                    ));
                }
                tracker.spawn(recover::reconcile_loop(
                    coordinator.store.clone(),
                    coordinator.dispatch.queue(),
                    coordinator.directory.clone(),
                    RECONCILE_EVERY,
                    stop.clone(),
                ));
            }
        }
        let parts = WorkerParts {
            dispatch: coordinator.dispatch.clone(),
            directory: coordinator.directory.clone(),
            web: web_context(&config, &registry)?,
            rag: coordinator.rag.clone(),
            memory: coordinator.memory.clone(),
            metrics: coordinator.metrics.clone(),
        };
        spawn_workers(
            &config,
            &registry,
            parts,
            cluster.as_ref(),
            &tracker,
            &stop,
            &abort,
        );
        let publishing = sharing.map(|s| s.start(&tracker, &stop));

        tracing::info!(addr = %addr, max_connections = limits.max_connections, "coordinator listening");
        let app = crate::api::router(coordinator.clone());
        let mut http = tokio::spawn(server::serve(listener, app, limits, stop.clone()));
        tokio::select! {
            () = shutdown => stop.cancel(),
            res = &mut http => {
                stop.cancel();
                tracker.close();
                tracker.wait().await;
                return res.map_err(|e| anyhow::anyhow!("HTTP server task failed: {e}"));
            }
        }
        drain(
            &tracker,
            &abort,
            Duration::from_secs(config.server.shutdown_grace_s),
        )
        .await;
        if let Some(p) = publishing {
            p.finish().await;
        }
        registry.keep_learned_at_exit().await;
        match tokio::time::timeout(Duration::from_secs(1), &mut http).await {
            Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed"),
            Ok(Ok(())) => {}
            Err(_) => {
                http.abort();
                tracing::info!("open client connections closed at shutdown");
            }
        }
        tracing::info!("coordinator stopped");
        Ok(())
    }
}

/// How often the cluster-mode router reads the memories worker processes wrote since.
const MEMORY_REFRESH_EVERY: Duration = Duration::from_secs(30);
/// Every how many refreshes it re-reads every memory instead (to drop what other
/// processes deleted, and anything a refresh's window missed): every 10 minutes.
const MEMORY_RELOAD_EVERY_REFRESHES: u32 = 20;

/// Cluster mode: workers on other machines write memories to the database; the router's
/// in-memory index picks them up here, reading only the new ones but every
/// [`MEMORY_RELOAD_EVERY_REFRESHES`]th time.
async fn memory_reload_loop(memory: Memory, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut refreshes: u32 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                refreshes += 1;
                let result = if refreshes % MEMORY_RELOAD_EVERY_REFRESHES == 0 {
                    memory.reload().await
                } else {
                    memory.refresh().await
                };
                if let Err(e) = result {
                    tracing::warn!(error = %e, "could not read memory from the store");
                }
            }
            () = stop.cancelled() => return,
        }
    }
}

/// Waits for running tasks up to `grace`, then abandons the rest (they stay recorded as
/// running and are queued again later).
async fn drain(tracker: &TaskTracker, abort: &CancellationToken, grace: Duration) {
    tracing::info!(
        grace_s = grace.as_secs(),
        "shutting down: no new work; waiting for running tasks"
    );
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!(
            "running tasks did not finish within the grace period; they stay recorded and are queued again"
        );
        abort.cancel();
        tracker.wait().await;
    }
}

/// A built `coordinator worker`: the machine's backends serving the cluster's lanes.
pub struct WorkerProcess {
    config: Arc<Config>,
    registry: Registry,
    parts: WorkerParts,
    cluster: ClusterLink,
    sharing: Option<Sharing>,
}

impl WorkerProcess {
    /// `name` names this machine's worker (with several backends, it prefixes them).
    pub async fn build(config: Config, name: Option<&str>) -> anyhow::Result<Self> {
        let problems = config.validate();
        if !problems.is_empty() {
            anyhow::bail!("invalid configuration:\n{}", problems.join("\n"));
        }
        if config.queue == QueueConfig::InProcess {
            anyhow::bail!(
                "`coordinator worker` needs the cluster queue: set [queue] type = \"redis\" and url (or --queue redis://...)"
            );
        }
        if config.backends.is_empty() {
            anyhow::bail!(
                "`coordinator worker` needs at least one [[backends]] entry (or --ollama URL / --openai URL)"
            );
        }
        let store = open_store(&config).await?;
        let registry = build_registry(&config, name)?;
        crate::placement::learned::restore(&registry, &config.store).await;
        registry.refresh_all().await;
        let transport = open_transport(&config, &registry, store).await?;
        let cluster = transport
            .cluster
            .context("cluster mode has no Redis link")?;
        let memory = open_memory(&config, &registry).await;
        // Nobody scrapes this process: its task times reach `serve` through Redis.
        let (metrics, sharing) = open_metrics(Some(&cluster), false).await?;
        let parts = WorkerParts {
            dispatch: transport.dispatch,
            memory,
            directory: transport.directory,
            web: web_context(&config, &registry)?,
            metrics,
            rag: open_rag(&config, &registry).await?,
        };
        Ok(Self {
            config: Arc::new(config),
            registry,
            parts,
            cluster,
            sharing,
        })
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Serves the lanes until `shutdown`, then drains like `serve`.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let tracker = TaskTracker::new();
        let names: Vec<String> = self
            .registry
            .handles()
            .iter()
            .map(|h| h.name().to_string())
            .collect();
        // What this process writes is checked against the person's memory (a fact told
        // before, the earlier fact a change names): it reads what other processes wrote,
        // as the router does.
        if let Some(memory) = self.parts.memory.clone() {
            tracker.spawn(memory_reload_loop(
                memory,
                MEMORY_REFRESH_EVERY,
                stop.clone(),
            ));
        }
        spawn_workers(
            &self.config,
            &self.registry,
            self.parts,
            Some(&self.cluster),
            &tracker,
            &stop,
            &abort,
        );
        let publishing = self.sharing.map(|s| s.start(&tracker, &stop));
        tracing::info!(workers = ?names, "worker process running");
        shutdown.await;
        stop.cancel();
        drain(
            &tracker,
            &abort,
            Duration::from_secs(self.config.server.shutdown_grace_s),
        )
        .await;
        if let Some(p) = publishing {
            p.finish().await;
        }
        self.registry.keep_learned_at_exit().await;
        tracing::info!("worker process stopped");
        Ok(())
    }
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM: what `serve`, `worker` and `fake-llm` stop on.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutdown signal received");
}
