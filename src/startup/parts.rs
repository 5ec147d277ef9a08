//! The pieces both `serve` and `worker` assemble from one config: the task store, the
//! queue and event bus (in-process or Redis), the worker directory, the local backends
//! and their workers.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backend::{Backend, BackendHandle, Registry};
use crate::cluster::RedisDirectory;
use crate::config::{BackendConfig, Config, InternalTasksMode, QueueConfig, StoreConfig};
use crate::dispatch::{CancelChannel, Dispatcher};
use crate::domain::ModelName;
use crate::events::InProcessEvents;
use crate::events::redis::RedisEvents;
use crate::metrics::Metrics;
use crate::metrics::shared::Sharing;
use crate::queue::in_process::InProcessQueue;
use crate::queue::redis::{RedisQueue, RedisQueueOptions};
use crate::store::TaskStore;
use crate::store::postgres::PostgresStore;
use crate::store::sqlite::SqliteStore;
use crate::web::{BackendQueryRewriter, QueryRewriter, WebContext};
use crate::worker::{Directory, Worker};

/// Opens the task store the config names.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn TaskStore>> {
    Ok(match &config.store {
        StoreConfig::Sqlite { path, synchronous } => Arc::new(
            SqliteStore::open_with(path, *synchronous)
                .await
                .with_context(|| format!("opening the SQLite task store at {}", path.display()))?,
        ),
        StoreConfig::Postgres { url, schema } => {
            let store = match schema {
                Some(s) => PostgresStore::connect_with_schema(url.expose(), s).await,
                None => PostgresStore::connect(url.expose()).await,
            };
            Arc::new(store.context("connecting to the PostgreSQL task store")?)
        }
    })
}

/// The process's backends, each a worker. `rename` names a single backend (the
/// `worker --name` flag); with several, it prefixes their names.
pub fn build_registry(config: &Config, rename: Option<&str>) -> anyhow::Result<Registry> {
    let configs = config.effective_backends();
    let mut handles = Vec::new();
    for b in &configs {
        let mut b: BackendConfig = b.clone();
        if let Some(name) = rename {
            b.name = if configs.len() == 1 {
                name.to_owned()
            } else {
                format!("{name}-{}", b.name)
            };
        }
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
        let keep_alive = b
            .keep_alive
            .iter()
            .map(|(m, k)| {
                let keep = k.read().with_context(|| {
                    format!(
                        "backend {}: keep_alive for {m}: not a duration Ollama reads",
                        b.name
                    )
                })?;
                Ok((ModelName::parse(m)?, keep))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let windows = crate::backend::registry::ConfiguredWindows::from_config(&b);
        handles.push(
            BackendHandle::new(backend, b.parallel, models)
                .with_windows(windows)
                .with_max_loaded(b.max_loaded)
                .with_keep_alive(keep_alive),
        );
    }
    Ok(Registry::new(handles))
}

/// How tasks are recorded and started and their events travel, and who knows the workers.
pub struct Transport {
    pub dispatch: Dispatcher,
    pub directory: Arc<dyn Directory>,
    /// Cluster mode: Redis URL and key prefix (for heartbeats) and the directory to refresh.
    pub cluster: Option<ClusterLink>,
}

#[derive(Clone)]
pub struct ClusterLink {
    pub url: String,
    pub prefix: String,
    pub directory: RedisDirectory,
    /// The process's one reading of Redis's clock, the queue's.
    pub(crate) clock: Arc<crate::queue::redis::clock::RedisClock>,
}

/// The dispatcher of `config`'s mode over `store`, and the directory of workers.
pub async fn open_transport(
    config: &Config,
    registry: &Registry,
    store: Arc<dyn TaskStore>,
) -> anyhow::Result<Transport> {
    Ok(match &config.queue {
        QueueConfig::InProcess => Transport {
            dispatch: Dispatcher::embedded(
                store,
                Arc::new(InProcessQueue::with_aging(config.scheduler.aging())),
                Arc::new(InProcessEvents::new()),
            ),
            directory: Arc::new(registry.clone()),
            cluster: None,
        },
        QueueConfig::Redis {
            url,
            prefix,
            lease_s,
        } => {
            let url = url.expose();
            let options = RedisQueueOptions {
                lease: Duration::from_secs(*lease_s),
                aging: config.scheduler.aging(),
                ..RedisQueueOptions::default()
            };
            let queue = RedisQueue::connect(url, prefix, options)
                .await
                .context("connecting to the Redis queue")?;
            let clock = queue.clock();
            let events = RedisEvents::connect(url, prefix)
                .await
                .context("connecting to Redis for task events")?;
            let directory = RedisDirectory::connect(url, prefix, Arc::clone(&clock))
                .await
                .context("reading worker heartbeats from Redis")?
                .with_local(registry.clone());
            Transport {
                dispatch: Dispatcher::cluster(
                    store,
                    Arc::new(queue),
                    Arc::new(events),
                    Some(
                        CancelChannel::connect(url, prefix)
                            .await
                            .context("connecting to Redis for cancellations")?,
                    ),
                ),
                directory: Arc::new(directory.clone()),
                cluster: Some(ClusterLink {
                    url: url.to_owned(),
                    prefix: prefix.clone(),
                    clock,
                    directory,
                }),
            }
        }
    })
}

/// This process's metrics: in cluster mode they share its task times through Redis and,
/// for `serve` (`follow`), record every other process's (see [`crate::metrics::shared`]);
/// in embedded mode they are only this process's, with nothing more to do per task.
pub async fn open_metrics(
    cluster: Option<&ClusterLink>,
    follow: bool,
) -> anyhow::Result<(Arc<Metrics>, Option<Sharing>)> {
    let Some(link) = cluster else {
        return Ok((Arc::default(), None));
    };
    let (metrics, sharing) = Sharing::open(&link.url, &link.prefix, follow)
        .await
        .context("connecting to Redis to share task times")?;
    Ok((metrics, Some(sharing)))
}

/// The web lane's context, unless web search is switched off, with [`query_rewriter`].
pub fn web_context(
    config: &Config,
    registry: &Registry,
) -> anyhow::Result<Option<Arc<WebContext>>> {
    if !config.web.enabled {
        return Ok(None);
    }
    let mut ctx = WebContext::new(config.web.clone()).context("setting up the web lane")?;
    if let Some(rewriter) = query_rewriter(config, registry) {
        ctx = ctx.with_rewriter(rewriter);
    }
    Ok(Some(Arc::new(ctx)))
}

/// The model rewrite of follow-ups into standalone queries, for the web and the RAG lanes
/// alike: the utility-lane model (`[internal_tasks] model`) when one of this process's
/// backends serves it; rules alone (`None`) otherwise.
pub fn query_rewriter(config: &Config, registry: &Registry) -> Option<Arc<dyn QueryRewriter>> {
    let model = config
        .internal_tasks
        .model
        .as_deref()
        .and_then(|m| ModelName::parse(m).ok())?;
    let handle = registry.handles().iter().find(|h| h.serves(&model))?;
    tracing::info!(model = %model, worker = %handle.name(), "follow-up queries are rewritten by the utility model");
    Some(Arc::new(BackendQueryRewriter {
        backend: handle.backend.clone(),
        model,
    }))
}

/// Everything a process's workers share.
pub struct WorkerParts {
    /// Where the workers take jobs from and write to; in embedded mode it also hands them
    /// fresh jobs directly.
    pub dispatch: Dispatcher,
    pub directory: Arc<dyn Directory>,
    pub web: Option<Arc<WebContext>>,
    pub rag: Option<Arc<crate::docs::lane::RagContext>>,
    pub memory: Option<crate::memory::Memory>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// Starts one worker per backend, the model discovery loop and (in cluster mode) the
/// heartbeats and the directory refresh, all tracked by `tracker`.
pub fn spawn_workers(
    config: &Config,
    registry: &Registry,
    parts: WorkerParts,
    cluster: Option<&ClusterLink>,
    tracker: &TaskTracker,
    stop: &CancellationToken,
    abort: &CancellationToken,
) {
    let utility_model = match config.internal_tasks.mode {
        InternalTasksMode::Model | InternalTasksMode::Resident => config
            .internal_tasks
            .model
            .as_deref()
            .and_then(|m| ModelName::parse(m).ok()),
        InternalTasksMode::Rules => None,
    };
    let web_model = config
        .web
        .model
        .as_deref()
        .or(config.routing.default_model.as_deref())
        .and_then(|m| ModelName::parse(m).ok());
    for handle in registry.handles() {
        let worker = Worker {
            handle: handle.clone(),
            queue: parts.dispatch.queue(),
            store: parts.dispatch.store().clone(),
            events: parts.dispatch.events().clone(),
            directory: parts.directory.clone(),
            utility_model: utility_model.clone(),
            web: parts.web.clone(),
            web_model: web_model.clone(),
            rag: parts.rag.clone(),
            memory: parts.memory.clone(),
            abort: abort.clone(),
            cancels: parts.dispatch.cancels().clone(),
            metrics: parts.metrics.clone(),
        };
        parts
            .dispatch
            .adopt(worker.clone(), tracker.clone(), stop.clone());
        tracker.spawn(worker.run(stop.clone(), tracker.clone()));
    }
    tracker.spawn(metrics_upkeep_loop(parts.metrics.clone(), stop.clone()));
    if let Some(listener) = parts.dispatch.cancel_listener(stop.clone()) {
        tracker.spawn(listener);
    }
    if !registry.handles().is_empty() {
        tracker.spawn(discovery_loop(
            registry.clone(),
            Duration::from_secs(config.timeouts.discovery_interval_s.max(1)),
            Duration::from_secs(config.timeouts.look_interval_s.max(1)),
            stop.clone(),
        ));
    }
    if let Some(link) = cluster {
        if !registry.handles().is_empty() {
            tracker.spawn(crate::cluster::publish_heartbeats(
                link.url.clone(),
                link.prefix.clone(),
                registry.clone(),
                Arc::clone(&link.clock),
                stop.clone(),
            ));
        }
        tracker.spawn(
            link.directory
                .clone()
                .run(crate::cluster::HEARTBEAT_EVERY, stop.clone()),
        );
    }
}

/// How often the histograms' recent samples are folded into their buckets between
/// scrapes (so that a process nobody scrapes holds no growing list of them).
const METRICS_UPKEEP_EVERY: Duration = Duration::from_secs(5);

async fn metrics_upkeep_loop(metrics: Arc<crate::metrics::Metrics>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(METRICS_UPKEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => metrics.upkeep(),
            () = stop.cancelled() => return,
        }
    }
}

/// Refreshes backends' model lists and health every `every`, and looks at the models
/// each machine holds about every `look_every` (see [`look_phase`]), until `stop`.
async fn discovery_loop(
    registry: Registry,
    every: Duration,
    look_every: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let start = tokio::time::Instant::now();
    let mut looks: u32 = 1;
    let next_look = |n: u32| start + look_every * n + look_phase(n);
    let look = tokio::time::sleep_until(next_look(looks));
    tokio::pin!(look);
    loop {
        tokio::select! {
            _ = tick.tick() => registry.refresh_all().await,
            () = &mut look => {
                registry.look_at_all();
                looks = looks.saturating_add(1);
                look.as_mut().reset(next_look(looks));
            }
            () = stop.cancelled() => return,
        }
    }
}

/// Where within its second the `n`-th periodic look comes, after `n` intervals. Looks at
/// an exact period would read each machine's whole-second `Date` at one fraction of a
/// second for ever, and the clock offset they place would stay a second wide (see
/// [`crate::backend::clock`]); stepped by the golden ratio, the fractions spread evenly
/// and a dozen looks place it to a tenth of a second.
fn look_phase(n: u32) -> Duration {
    Duration::from_millis(u64::from(n) * 618 % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first dozen periodic looks come at twelve fractions of a second, none nearer
    /// another than 50 ms, so that together they read a machine's whole-second `Date`
    /// across its second.
    #[test]
    fn periodic_looks_spread_across_the_second() {
        let mut phases: Vec<u128> = (1..=12).map(|n| look_phase(n).as_millis()).collect();
        phases.sort_unstable();
        assert!(phases.iter().all(|p| *p < 1000), "{phases:?}");
        assert!(phases.windows(2).all(|w| w[1] - w[0] >= 50), "{phases:?}");
    }

    /// A cluster process reads Redis's clock once for all its parts: the directory and
    /// the heartbeats read times through the queue's reading (one `TIME` every few
    /// seconds, and no two readings that disagree by a call's length).
    #[tokio::test]
    async fn a_cluster_process_reads_rediss_clock_once_for_all() {
        let Some(url) = crate::testkit::redis_server::redis_url_or_skip() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn TaskStore> =
            Arc::new(SqliteStore::open(&dir.path().join("c.db")).await.unwrap());
        let config = Config {
            queue: QueueConfig::Redis {
                url: url.into(),
                prefix: crate::testkit::redis_server::unique_prefix(),
                lease_s: 30,
            },
            ..Config::default()
        };
        let transport = open_transport(&config, &Registry::new(Vec::new()), store)
            .await
            .unwrap();
        let link = transport.cluster.unwrap();
        assert!(Arc::ptr_eq(&link.clock, link.directory.clock()));
    }
}
