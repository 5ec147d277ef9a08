//! Coordinator in this process for the `coordinator` row: its default configuration with
//! the household's machines as Ollama backends, listening on a free port, its SQLite store
//! in a fresh temporary directory that goes when it stops.
//!
//! Coordinator runs on the wall clock: its timeouts (`route_s` 60 s, …) are not scaled,
//! so at scale 10 they are ten times longer in life time than as configured.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::{BackendConfig, BackendKind, Config, StoreConfig};
use crate::startup::Application;

/// How long discovery and draining may take, in wall time.
const PATIENCE: Duration = Duration::from_secs(60);
/// How often the `/workers` page is read while waiting.
const POLL: Duration = Duration::from_millis(50);

/// A running Coordinator; [`Self::stop`] ends it and removes its directory.
#[derive(Debug)]
pub struct InProcess {
    base: String,
    dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<anyhow::Result<()>>,
}

impl InProcess {
    /// Starts Coordinator with one Ollama backend per `(name, url)`, on a fresh store.
    pub async fn start(backends: &[(&str, String)]) -> anyhow::Result<Self> {
        Self::start_in(fresh_dir()?, backends).await
    }

    /// Starts Coordinator with its store in `dir` (one a [`Self::stop_keeping`] left).
    pub async fn start_in(dir: PathBuf, backends: &[(&str, String)]) -> anyhow::Result<Self> {
        let mut config = Config::default();
        config.server.listen = "127.0.0.1:0".to_owned();
        config.store = StoreConfig::Sqlite {
            path: dir.join("coordinator.db"),
            synchronous: Default::default(),
        };
        config.backends = backends
            .iter()
            .map(|(name, url)| BackendConfig {
                name: (*name).to_owned(),
                kind: BackendKind::Ollama,
                url: url.clone(),
                ..BackendConfig::default_ollama()
            })
            .collect();
        let app = Application::build(config).await?;
        let base = format!("http://{}", app.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        Ok(Self {
            base,
            dir,
            stop: Some(stop),
            handle,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Waits until `GET /workers` lists every backend with all of its models.
    pub async fn discovered(
        &self,
        http: &reqwest::Client,
        expected: &[(&str, Vec<&str>)],
    ) -> anyhow::Result<()> {
        self.wait_for(http, "the backends' models", |workers| {
            expected.iter().all(|(name, models)| {
                worker(workers, name).is_some_and(|w| {
                    let listed = w["models"].as_array().cloned().unwrap_or_default();
                    models
                        .iter()
                        .all(|m| listed.iter().any(|l| l.as_str() == Some(m)))
                })
            })
        })
        .await
    }

    /// Waits until no backend has a request in flight and no lane holds a job: what
    /// Coordinator still runs for clients that have gone is finished.
    pub async fn drained(&self, http: &reqwest::Client) -> anyhow::Result<()> {
        self.wait_for(http, "the workers to be idle", |page| {
            let idle = page["workers"]
                .as_array()
                .is_some_and(|ws| ws.iter().all(|w| w["in_flight"].as_u64() == Some(0)));
            let empty = page["queues"]
                .as_array()
                .is_some_and(|qs| qs.iter().all(|q| q["waiting"].as_u64() == Some(0)));
            idle && empty
        })
        .await
    }

    async fn wait_for(
        &self,
        http: &reqwest::Client,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let page: Value = http
                .get(format!("{}/workers", self.base))
                .send()
                .await?
                .json()
                .await?;
            if done(&page) {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "waited {PATIENCE:?} for {what}; /workers says {page}"
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops Coordinator, waits for it and removes its directory.
    pub async fn stop(self) -> anyhow::Result<()> {
        let dir = self.stop_keeping().await?;
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))
    }

    /// Stops Coordinator and waits for it (it keeps what it learned, as on any shutdown);
    /// returns its directory, left in place for [`Self::start_in`].
    pub async fn stop_keeping(mut self) -> anyhow::Result<PathBuf> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.handle).await.context("coordinator panicked")??;
        Ok(self.dir)
    }
}

fn worker<'a>(page: &'a Value, name: &str) -> Option<&'a Value> {
    page["workers"]
        .as_array()?
        .iter()
        .find(|w| w["name"].as_str() == Some(name))
}

/// A new directory under the system's temporary directory.
fn fresh_dir() -> anyhow::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("bench-household-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
