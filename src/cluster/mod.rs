//! Cluster membership: every worker process publishes a heartbeat to Redis, and every
//! process (the router and the workers) reads them into a [`Directory`].
//!
//! A heartbeat is one key per worker, `<prefix>worker:<name>`, holding its status as JSON
//! with a time to live, plus the worker's name in the set `<prefix>workers`. A worker
//! whose heartbeat stops drops out when its key expires. Its times are on its sender's
//! clock, read through Redis's onto the reader's ([`clock`]).

mod clock;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::backend::Registry;
use crate::backend::registry::WorkerStatus;
use crate::domain::{ModelName, WorkerName};
use crate::placement::Ask;
use crate::queue::redis::clock::{RedisClock, tell_apart};
use crate::queue::redis::connection::Redis;
use crate::routing::{Catalog, CatalogEntry};
use crate::worker::Directory;

/// How often a worker publishes its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// How long a heartbeat lives without renewal.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(10);

/// What a worker says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub status: WorkerStatusWire,
    /// Models and whether each takes tools.
    pub tools: Vec<(ModelName, Option<bool>)>,
    pub at: chrono::DateTime<chrono::Utc>,
    /// How far Redis's clock (`TIME`) read ahead of the sender's, in milliseconds (see
    /// [`clock`]); older versions' heartbeats say nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_ahead_ms: Option<i64>,
}

/// [`WorkerStatus`] as it travels through Redis.
pub type WorkerStatusWire = WorkerStatus;

fn worker_key(prefix: &str, name: &WorkerName) -> String {
    format!("{prefix}worker:{name}")
}

fn workers_key(prefix: &str) -> String {
    format!("{prefix}workers")
}

/// Publishes the heartbeats of this process's backends until `stop`.
pub(crate) async fn publish_heartbeats(
    redis_url: String,
    prefix: String,
    registry: Registry,
    clock: Arc<RedisClock>,
    stop: CancellationToken,
) {
    let mut redis = None;
    let mut redis_ahead = None;
    let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => break,
        }
        // Every step is bounded by one tick, so a long outage never holds the next
        // heartbeat behind a reconnect backoff while the time to live runs out.
        if redis.is_none() {
            match tokio::time::timeout(HEARTBEAT_EVERY, Redis::connect(&redis_url)).await {
                Ok(Ok(r)) => redis = Some(r),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot reach Redis to publish heartbeats; retrying");
                    continue;
                }
                Err(_) => {
                    tracing::warn!("connecting to Redis to publish heartbeats timed out; retrying");
                    continue;
                }
            }
        }
        let Some(r) = &redis else { continue };
        let failed = match tokio::time::timeout(
            HEARTBEAT_EVERY,
            beat(r, &prefix, &registry, &clock),
        )
        .await
        {
            Ok(Ok(ahead)) => {
                tell_apart(redis_ahead, ahead);
                redis_ahead = Some(ahead);
                None
            }
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("timed out".to_owned()),
        };
        if let Some(e) = failed {
            tracing::warn!(error = %e, "heartbeat failed; reconnecting");
            redis = None;
        }
    }
    // Leave at once rather than after the time to live.
    if let Some(r) = &redis {
        let mut conn = r.commands();
        for h in registry.handles() {
            let _: Result<(), _> = conn.del(worker_key(&prefix, h.name())).await;
            let _: Result<(), _> = conn.srem(workers_key(&prefix), h.name().as_str()).await;
        }
    }
}

/// Publishes one heartbeat per backend; returns how far Redis's clock reads ahead of
/// this process's.
async fn beat(
    redis: &Redis,
    prefix: &str,
    registry: &Registry,
    clock: &RedisClock,
) -> redis::RedisResult<chrono::TimeDelta> {
    let mut conn = redis.commands();
    let redis_ahead = clock.ask_if_stale(&mut conn).await;
    for h in registry.handles() {
        let hb = Heartbeat {
            status: h.status(),
            tools: h.models().into_iter().map(|m| (m.name, m.tools)).collect(),
            at: chrono::Utc::now(),
            redis_ahead_ms: Some(redis_ahead.num_milliseconds()),
        };
        let json = serde_json::to_string(&hb).unwrap_or_default();
        let ttl = HEARTBEAT_TTL.as_secs();
        let _: () = conn.set_ex(worker_key(prefix, h.name()), json, ttl).await?;
        let _: () = conn.sadd(workers_key(prefix), h.name().as_str()).await?;
    }
    Ok(redis_ahead)
}

/// The workers of the whole cluster, as their heartbeats say. Refreshed in the background.
#[derive(Clone)]
pub struct RedisDirectory {
    redis: Redis,
    prefix: String,
    beats: Arc<RwLock<Vec<Heartbeat>>>,
    /// This process's own workers: known first-hand, whatever Redis says.
    local: Option<Registry>,
    /// This process's clock against Redis's, to read the heartbeats' times on it (the
    /// process's one reading, the queue's).
    clock: Arc<RedisClock>,
}

impl RedisDirectory {
    pub(crate) async fn connect(
        url: &str,
        prefix: &str,
        clock: Arc<RedisClock>,
    ) -> redis::RedisResult<Self> {
        let dir = Self {
            redis: Redis::connect(url).await?,
            prefix: prefix.to_owned(),
            beats: Arc::default(),
            local: None,
            clock,
        };
        dir.refresh().await?;
        Ok(dir)
    }

    /// Reads every live heartbeat, its times on this process's clock; drops the names
    /// whose heartbeat expired.
    pub async fn refresh(&self) -> redis::RedisResult<()> {
        let mut conn = self.redis.commands();
        let redis_ahead = self.clock.ask_if_stale(&mut conn).await;
        let names: Vec<String> = conn.smembers(workers_key(&self.prefix)).await?;
        let mut beats = Vec::new();
        if !names.is_empty() {
            let keys: Vec<String> = names
                .iter()
                .map(|n| format!("{}worker:{n}", self.prefix))
                .collect();
            let values: Vec<Option<String>> =
                redis::cmd("MGET").arg(&keys).query_async(&mut conn).await?;
            for (name, value) in names.iter().zip(values) {
                match value.and_then(|v| serde_json::from_str::<Heartbeat>(&v).ok()) {
                    Some(mut hb) => {
                        hb.onto_this_clock(redis_ahead);
                        beats.push(hb);
                    }
                    None => {
                        let _: () = conn.srem(workers_key(&self.prefix), name).await?;
                        tracing::info!(worker = %name, "worker's heartbeat stopped; it left the cluster");
                    }
                }
            }
        }
        // A heartbeat is good for its time to live from when it was sent, even if Redis
        // lost it (a restart without persistence): keep those until they expire.
        let now = chrono::Utc::now();
        let ttl = chrono::Duration::from_std(HEARTBEAT_TTL).unwrap_or_default();
        let mut cached = self
            .beats
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for old in cached.drain(..) {
            if old.at + ttl > now && !beats.iter().any(|b| b.status.name == old.status.name) {
                beats.push(old);
            }
        }
        beats.sort_by(|a, b| a.status.name.cmp(&b.status.name));
        *cached = beats;
        Ok(())
    }

    /// Refreshes every `every` until `stop`.
    pub async fn run(self, every: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    match tokio::time::timeout(every, self.refresh()).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::warn!(error = %e, "could not read worker heartbeats"),
                        Err(_) => tracing::warn!("reading worker heartbeats timed out"),
                    }
                }
                () = stop.cancelled() => return,
            }
        }
    }

    /// Includes this process's own workers, so they stay routable while Redis is away or
    /// has just restarted empty.
    pub fn with_local(mut self, registry: Registry) -> Self {
        self.local = Some(registry);
        self
    }

    #[cfg(test)]
    pub(crate) fn clock(&self) -> &Arc<RedisClock> {
        &self.clock
    }

    fn beats(&self) -> Vec<Heartbeat> {
        let mut beats = self
            .beats
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(local) = &self.local {
            for h in local.handles() {
                beats.retain(|b| &b.status.name != h.name());
                beats.push(Heartbeat {
                    status: h.status(),
                    tools: h.models().into_iter().map(|m| (m.name, m.tools)).collect(),
                    at: chrono::Utc::now(),
                    redis_ahead_ms: None,
                });
            }
            beats.sort_by(|a, b| a.status.name.cmp(&b.status.name));
        }
        beats
    }
}

impl Directory for RedisDirectory {
    fn catalog(&self) -> Catalog {
        let mut entries = Vec::new();
        for hb in self.beats() {
            for (model, tools) in hb.tools {
                entries.push(CatalogEntry {
                    worker: hb.status.name.clone(),
                    healthy: hb.status.healthy,
                    resident: hb.status.loaded.contains(&model),
                    model,
                    tools,
                });
            }
        }
        Catalog::new(entries)
    }

    fn best_worker_for(&self, ask: &Ask<'_>) -> Option<WorkerName> {
        crate::placement::best_of(&self.statuses(), ask)
    }

    fn statuses(&self) -> Vec<WorkerStatus> {
        self.beats().into_iter().map(|b| b.status).collect()
    }

    fn any_healthy(&self) -> bool {
        self.beats().iter().any(|b| b.status.healthy)
    }

    fn others_serving(&self, model: &ModelName, except: &[WorkerName]) -> usize {
        self.beats()
            .iter()
            .filter(|b| {
                b.status.healthy
                    && b.status.models.contains(model)
                    && !except.contains(&b.status.name)
            })
            .count()
    }
}
