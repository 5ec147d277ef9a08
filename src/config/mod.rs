//! Configuration: compiled-in defaults, then `coordinator.toml`, then `COORDINATOR_...`
//! environment variables, then CLI flags.
//!
//! Unknown keys are collected with `serde_ignored` rather than rejected by
//! `deny_unknown_fields`, so that `coordinator config check` can name every unknown key
//! in one run instead of stopping at the first. [`Config::validate`] adds the semantic
//! problems, all at once as well.

mod load;
mod secret;
mod server;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use load::{ConfigError, load, load_str};
pub use secret::{SecretUrl, redact_url};
pub use server::{KeyConfig, KeyRole, LogFormat, RoutingInfo, ServerConfig};

use crate::domain::{ModelName, WorkerName};
use crate::routing::RoutingConfig;

/// The whole configuration. Every key is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub server: ServerConfig,
    pub store: StoreConfig,
    pub queue: QueueConfig,
    pub backends: Vec<BackendConfig>,
    pub routing: RoutingConfig,
    pub history: HistoryConfig,
    pub internal_tasks: InternalTasksConfig,
    pub timeouts: TimeoutsConfig,
    pub web: crate::web::WebConfig,
    pub memory: crate::memory::MemoryConfig,
    pub docs: crate::docs::DocsConfig,
    pub limits: crate::limits::LimitsConfig,
    pub scheduler: crate::queue::priority::SchedulerConfig,
}

/// Where tasks are recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
// `deny_unknown_fields`: the keys of a tagged enum are out of `serde_ignored`'s sight.
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum StoreConfig {
    Sqlite {
        #[serde(default = "default_sqlite_path")]
        path: PathBuf,
        /// When a commit reaches the disk (see [`Synchronous`]).
        #[serde(default)]
        synchronous: Synchronous,
    },
    Postgres {
        /// May carry a password; or `url_env` / `url_file`, and `password_env` /
        /// `password_file` (see [`secret`]).
        url: SecretUrl,
        /// A schema to keep the tables in (created if missing); the default search path
        /// when absent.
        #[serde(default)]
        schema: Option<String>,
    },
}

/// SQLite's `synchronous` under WAL: what a crash can take of the tasks accepted before
/// it. With either, an accepted task survives a crash of the process (its commit is in
/// the WAL file, which the operating system keeps); they differ on a crash of the
/// machine (power, kernel).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    /// The WAL is synced at checkpoints, not at every commit: a crash of the machine can
    /// lose the last commits before it (never the file's consistency).
    #[default]
    Normal,
    /// The WAL is synced at every commit before its writers hear it is done: a crash of
    /// the machine loses nothing accepted, at the price of one sync per commit.
    Full,
}

impl Synchronous {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Full => "full",
        }
    }
}

fn default_sqlite_path() -> PathBuf {
    PathBuf::from("data/coordinator.db")
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self::Sqlite {
            path: default_sqlite_path(),
            synchronous: Synchronous::default(),
        }
    }
}

/// How tasks travel from the router to the workers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
// `deny_unknown_fields`: the keys of a tagged enum are out of `serde_ignored`'s sight.
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum QueueConfig {
    #[default]
    InProcess,
    Redis {
        /// May carry a password; or `url_env` / `url_file`, and `password_env` /
        /// `password_file` (see [`secret`]).
        url: SecretUrl,
        /// A prefix for every key, to share one Redis between installations.
        #[serde(default)]
        prefix: String,
        /// How long a job taken by a worker that went silent stays with it before another
        /// worker takes it over.
        #[serde(default = "default_lease_s")]
        lease_s: u64,
    },
}

fn default_lease_s() -> u64 {
    60
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Ollama,
    Openai,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackendConfig {
    /// The worker / machine name shown to users.
    pub name: String,
    pub kind: BackendKind,
    /// Ollama: `http://host:11434`. OpenAI-compatible: the base URL as SDKs take it (`http://host:8080/v1`).
    pub url: String,
    /// Models this backend serves; discovered from the backend when absent.
    #[serde(default)]
    pub models: Option<Vec<String>>,
    /// Name of the environment variable that holds the API key (OpenAI-compatible backends).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Generations Coordinator runs at once per model on this backend (Ollama's
    /// `OLLAMA_NUM_PARALLEL`, 1 by default as Ollama's); as many models answer side by
    /// side as the machine keeps resident (`max_loaded`). The rest wait in Coordinator's
    /// queue, where the first machine that frees up can take them. Older configs name it
    /// `max_concurrency`.
    #[serde(default = "default_parallel", alias = "max_concurrency")]
    pub parallel: usize,
    /// How many models the machine keeps resident at once (`OLLAMA_MAX_LOADED_MODELS`, or
    /// what fits its memory). Learned from the first load that evicts a model when absent.
    #[serde(default)]
    pub max_loaded: Option<usize>,
    /// Per model, how long Ollama keeps it resident after a request (Ollama's
    /// `keep_alive`: `"30m"`, `"24h"`, `-1` for always, `0` to unload at once), sent with
    /// every request for it that does not set its own.
    #[serde(default)]
    pub keep_alive: std::collections::BTreeMap<String, KeepAliveSetting>,
    /// Every model's window on this backend, in tokens, over what `/api/show` reports
    /// (an OpenAI-compatible server's own `--ctx-size`); unknown when absent there.
    #[serde(default)]
    pub context_length: Option<u32>,
    /// Windows per model, over `context_length`.
    #[serde(default)]
    pub model_context_length: std::collections::BTreeMap<String, u32>,
    /// The largest window a request gets here, which bounds the (V)RAM a model's context
    /// costs; Ollama: [`crate::context::DEFAULT_MAX_NUM_CTX`] when absent.
    #[serde(default)]
    pub max_num_ctx: Option<u32>,
}

/// A `keep_alive` as Ollama takes it: a duration string or a number of seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeepAliveSetting {
    Seconds(i64),
    Duration(String),
}

impl KeepAliveSetting {
    /// The keep-alive as Ollama reads it: seconds, or a Go duration such as `"5m"`,
    /// `"1h30m"`, `"-1"`; `None` when Ollama would not read it. The config check and
    /// start-up both read it so.
    pub fn read(&self) -> Option<crate::backend::keep_alive::KeepAlive> {
        let json = match self {
            Self::Seconds(n) => serde_json::Value::from(*n),
            Self::Duration(s) => serde_json::Value::from(s.as_str()),
        };
        crate::backend::keep_alive::KeepAlive::parse(&json)
    }
}

/// Ollama's default `OLLAMA_NUM_PARALLEL`: one generation per model at a time. More
/// would only stack requests in the backend's own queue, where Coordinator can no longer
/// place them on a machine that frees up first.
fn default_parallel() -> usize {
    1
}

impl BackendConfig {
    /// The backend that `serve` uses when no config names any: local Ollama.
    pub fn default_ollama() -> Self {
        Self {
            name: "local".to_owned(),
            kind: BackendKind::Ollama,
            url: "http://127.0.0.1:11434".to_owned(),
            models: None,
            api_key_env: None,
            parallel: default_parallel(),
            max_loaded: None,
            keep_alive: std::collections::BTreeMap::new(),
            context_length: None,
            model_context_length: Default::default(),
            max_num_ctx: None,
        }
    }

    /// The window this backend's config gives `model`, if it gives one.
    pub fn configured_context_length(&self, model: &str) -> Option<u32> {
        self.model_context_length
            .get(model)
            .copied()
            .or(self.context_length)
    }

    /// The cap on windows here: `max_num_ctx`, else for Ollama the default cap.
    pub fn window_cap(&self) -> Option<u32> {
        match self.kind {
            BackendKind::Ollama => self
                .max_num_ctx
                .or(Some(crate::context::DEFAULT_MAX_NUM_CTX)),
            BackendKind::Openai => self.max_num_ctx,
        }
    }

    /// Problems with the window keys, each named by `at` and the key.
    fn validate_windows(&self, at: &str, problems: &mut Vec<String>) {
        let mut check = |key: &str, what: String, v: u32| {
            if v < MIN_WINDOW {
                problems.push(format!(
                    "{at}.{key}: {what}must be at least {MIN_WINDOW} tokens"
                ));
            }
        };
        if let Some(v) = self.context_length {
            check("context_length", String::new(), v);
        }
        if let Some(v) = self.max_num_ctx {
            check("max_num_ctx", String::new(), v);
        }
        for (model, v) in &self.model_context_length {
            check("model_context_length", format!("{model:?} "), *v);
        }
        for model in self.model_context_length.keys() {
            if let Err(e) = ModelName::parse(model) {
                problems.push(format!("{at}.model_context_length: {e}"));
            }
        }
    }
}

/// The smallest window a config may give: a system prompt, a question and an answer.
const MIN_WINDOW: u32 = 512;

/// Conversation history forwarded to the worker (the seed's HISTORY_* valves).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryConfig {
    pub enabled: bool,
    pub max_turns: usize,
    /// Characters of history at most; none by default: the model's window decides (see
    /// [`crate::context`]), and the row records what either cut.
    pub max_chars: Option<usize>,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_turns: 10,
            max_chars: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InternalTasksMode {
    /// Answer by rules, without any model.
    #[default]
    Rules,
    /// Send to `[internal_tasks] model` on the utility lane.
    Model,
    /// Answer with a model only where one is resident anyway (nothing is loaded for
    /// background work): the model the task was sent to, else `[internal_tasks] model`;
    /// by rules when neither is resident.
    Resident,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct InternalTasksConfig {
    pub mode: InternalTasksMode,
    pub model: Option<String>,
    pub max_tokens: u32,
}

impl Default for InternalTasksConfig {
    fn default() -> Self {
        Self {
            mode: InternalTasksMode::Rules,
            model: None,
            max_tokens: 256,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeoutsConfig {
    /// How long a client waits for its task to start answering (the seed's ROUTE_TIMEOUT).
    pub route_s: u64,
    /// Connecting to a backend.
    pub connect_ms: u64,
    /// Longest silence between two chunks of a backend stream before it counts as stalled.
    pub stream_idle_s: u64,
    /// Longest wait for a whole answer: a client that does not stream gets its answer in
    /// one piece, which the backend is asked for in one piece too, and sends nothing
    /// until it has all of it.
    pub answer_s: u64,
    /// How often backends' model lists are refreshed.
    pub discovery_interval_s: u64,
    /// How often each Ollama machine is asked which models it holds (`/api/ps`), besides
    /// the look after every answer: a model its keep-alive unloaded, or one another
    /// client of the machine loaded or unloaded, shows in placement's view this soon.
    /// Each look comes up to a second later than the interval alone would put it, at a
    /// different fraction of a second each time (the machine's clock is read from them).
    pub look_interval_s: u64,
    /// How long a streamed chat waits for its first token before it answers 200 at once
    /// and tells the client it is queued (keep-alive frames) until the token comes.
    pub queued_head_ms: u64,
    /// How often a streamed chat that waits sends a keep-alive frame.
    pub keep_alive_s: u64,
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        Self {
            route_s: 60,
            connect_ms: 2000,
            stream_idle_s: 120,
            answer_s: 600,
            discovery_interval_s: 30,
            look_interval_s: 5,
            queued_head_ms: 1000,
            keep_alive_s: 5,
        }
    }
}

impl Config {
    /// Every semantic problem in the configuration, not just the first.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        self.server.validate(&mut problems);
        if let Err(key_problems) = crate::people::Keys::from_config(&self.server) {
            problems.extend(key_problems);
        }
        self.limits.validate(&mut problems);
        self.scheduler.validate(&mut problems);
        match &self.store {
            StoreConfig::Sqlite { path, .. } if path.as_os_str().is_empty() => {
                problems.push("store.path: it is empty".to_owned());
            }
            StoreConfig::Postgres { url, .. }
                if !(url.expose().starts_with("postgres://")
                    || url.expose().starts_with("postgresql://")) =>
            {
                problems.push(format!(
                    "store.url: {:?} is not a postgres:// URL",
                    url.redacted()
                ));
            }
            _ => {}
        }
        if let QueueConfig::Redis { lease_s: 0, .. } = &self.queue {
            problems.push("queue.lease_s: must be at least 1".to_owned());
        }
        if let QueueConfig::Redis { url, .. } = &self.queue
            && !(url.expose().starts_with("redis://") || url.expose().starts_with("rediss://"))
        {
            problems.push(format!(
                "queue.url: {:?} is not a redis:// URL",
                url.redacted()
            ));
        }
        let mut names = std::collections::HashSet::new();
        for (i, b) in self.backends.iter().enumerate() {
            let at = format!("backends[{i}]");
            if let Err(e) = WorkerName::parse(&b.name) {
                problems.push(format!("{at}.name: {e}"));
            } else if !names.insert(b.name.as_str()) {
                problems.push(format!(
                    "{at}.name: {:?} is used by another backend",
                    b.name
                ));
            }
            match reqwest::Url::parse(&b.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                _ => problems.push(format!("{at}.url: {:?} is not an http(s) URL", b.url)),
            }
            if b.parallel == 0 {
                problems.push(format!("{at}.parallel: must be at least 1"));
            }
            if b.max_loaded == Some(0) {
                problems.push(format!("{at}.max_loaded: must be at least 1"));
            }
            for (m, k) in &b.keep_alive {
                if let Err(e) = ModelName::parse(m) {
                    problems.push(format!("{at}.keep_alive: {e}"));
                }
                if k.read().is_none() {
                    problems.push(format!(
                        "{at}.keep_alive.{m:?}: must be a duration such as \"30m\" or \"-1\", or a number of seconds"
                    ));
                }
                if b.kind != BackendKind::Ollama {
                    problems.push(format!(
                        "{at}.keep_alive: only kind = \"ollama\" backends keep models resident"
                    ));
                }
            }
            b.validate_windows(&at, &mut problems);
            for m in b.models.iter().flatten() {
                if let Err(e) = ModelName::parse(m) {
                    problems.push(format!("{at}.models: {e}"));
                }
            }
            if b.api_key_env.is_some() && b.kind == BackendKind::Ollama {
                problems.push(format!(
                    "{at}.api_key_env: only kind = \"openai\" backends take an API key"
                ));
            }
        }
        if self.history.enabled && self.history.max_chars == Some(0) {
            problems.push("history.max_chars: must be above 0 while history is enabled".to_owned());
        }
        if self.internal_tasks.mode == InternalTasksMode::Model
            && self.internal_tasks.model.is_none()
        {
            problems.push("internal_tasks.model: mode = \"model\" needs a model".to_owned());
        }
        if let Some(m) = &self.internal_tasks.model
            && let Err(e) = ModelName::parse(m)
        {
            problems.push(format!("internal_tasks.model: {e}"));
        }
        if self.timeouts.route_s == 0 {
            problems.push("timeouts.route_s: must be at least 1".to_owned());
        }
        if self.timeouts.stream_idle_s == 0 {
            problems.push("timeouts.stream_idle_s: must be at least 1".to_owned());
        }
        if self.timeouts.answer_s == 0 {
            problems.push("timeouts.answer_s: must be at least 1".to_owned());
        }
        if self.timeouts.look_interval_s == 0 {
            problems.push("timeouts.look_interval_s: must be at least 1".to_owned());
        }
        if self.timeouts.queued_head_ms == 0 {
            problems.push("timeouts.queued_head_ms: must be at least 1".to_owned());
        }
        if self.timeouts.keep_alive_s == 0 {
            problems.push("timeouts.keep_alive_s: must be at least 1".to_owned());
        }
        problems.extend(self.routing.validate());
        problems.extend(self.web.validate());
        problems.extend(self.memory.validate());
        problems.extend(self.docs.validate());
        problems
    }

    /// The backends to run: the configured ones, or local Ollama when none are configured
    /// in embedded mode.
    pub fn effective_backends(&self) -> Vec<BackendConfig> {
        if self.backends.is_empty() && self.queue == QueueConfig::InProcess {
            vec![BackendConfig::default_ollama()]
        } else {
            self.backends.clone()
        }
    }

    /// A one-line summary for the start-up log. Secrets never appear.
    pub fn summary(&self) -> String {
        let store = match &self.store {
            StoreConfig::Sqlite { path, synchronous } => {
                format!(
                    "sqlite:{} synchronous={}",
                    path.display(),
                    synchronous.as_str()
                )
            }
            StoreConfig::Postgres { url, .. } => format!("postgres:{url}"),
        };
        let queue = match &self.queue {
            QueueConfig::InProcess => "in-process".to_owned(),
            QueueConfig::Redis { url, .. } => format!("redis:{url}"),
        };
        let backends: Vec<String> = self
            .effective_backends()
            .iter()
            .map(|b| format!("{}={}", b.name, redact_url(&b.url)))
            .collect();
        format!(
            "listen={} store={} queue={} backends=[{}] history={} internal_tasks={:?} route_timeout={}s keys={} allowed_origins={} max_connections={}",
            self.server.listen,
            store,
            queue,
            backends.join(","),
            if self.history.enabled { "on" } else { "off" },
            self.internal_tasks.mode,
            self.timeouts.route_s,
            self.server.api_keys.len() + self.server.keys.len(),
            self.server.allowed_origins.len(),
            self.server.max_connections,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let c = Config::default();
        assert!(c.validate().is_empty(), "{:?}", c.validate());
        assert_eq!(c.server.listen, "127.0.0.1:8000");
        assert_eq!(c.timeouts.route_s, 60);
        assert_eq!(c.effective_backends().len(), 1);
    }

    #[test]
    fn log_format_is_human_unless_json_is_asked_for() {
        assert_eq!(Config::default().server.log_format, LogFormat::Human);
        let c = load::load_str("[server]\nlog_format = \"json\"\n", Vec::new()).unwrap();
        assert_eq!(c.server.log_format, LogFormat::Json);
        let problems = load::load_str("[server]\nlog_format = \"xml\"\n", Vec::new())
            .unwrap_err()
            .problems();
        assert!(
            problems.iter().any(|p| p.contains("log_format")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_models_keep_alive_must_be_one_ollama_reads() {
        let text = |k: &str| {
            format!(
                "[[backends]]\nname = \"moon\"\nkind = \"ollama\"\nurl = \"http://127.0.0.1:11434\"\nkeep_alive = {{ \"chat\" = {k} }}\n"
            )
        };
        for good in [
            "\"24h\"",
            "\"-1\"",
            "-1",
            "600",
            "\"1h30m\"",
            "\"+5m\"",
            "\"0\"",
        ] {
            let c = load::load_str(&text(good), Vec::new());
            assert!(c.is_ok(), "{good}: {:?}", c.err().map(|e| e.problems()));
        }
        // What start-up could not read is refused by the check, not at start.
        for bad in ["\"soon\"", "\"5 min\"", "\"inf\"", "\"NaN\"", "\"\""] {
            let problems = load::load_str(&text(bad), Vec::new())
                .unwrap_err()
                .problems();
            assert!(
                problems.iter().any(|p| p.contains("keep_alive")),
                "{bad}: {problems:?}"
            );
        }
    }

    #[test]
    fn the_queued_heads_delay_the_keep_alive_and_the_look_interval_must_be_positive() {
        let text = "[timeouts]\nqueued_head_ms = 250\nkeep_alive_s = 2\nlook_interval_s = 3\n";
        let c = load::load_str(text, Vec::new()).unwrap();
        assert_eq!(
            (
                c.timeouts.queued_head_ms,
                c.timeouts.keep_alive_s,
                c.timeouts.look_interval_s
            ),
            (250, 2, 3)
        );
        assert_eq!(Config::default().timeouts.look_interval_s, 5);
        let text = "[timeouts]\nqueued_head_ms = 0\nkeep_alive_s = 0\nlook_interval_s = 0\n";
        let problems = load::load_str(text, Vec::new()).unwrap_err().problems();
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("timeouts.queued_head_ms:")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("timeouts.keep_alive_s:")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p == "timeouts.look_interval_s: must be at least 1"),
            "{problems:?}"
        );
    }

    #[test]
    fn an_open_port_needs_a_key_or_allow_open() {
        let mut s = ServerConfig {
            listen: "0.0.0.0:8000".to_owned(),
            ..ServerConfig::default()
        };
        assert!(s.is_open());
        let problem = s.open_port_problem().expect("refused");
        for needle in [
            "server.listen",
            "0.0.0.0:8000",
            "api_keys",
            "[[server.keys]]",
            "COORDINATOR_SERVER__API_KEYS",
            "allow_open",
        ] {
            assert!(problem.contains(needle), "{needle}: {problem}");
        }
        s.allow_open = true;
        assert_eq!(s.open_port_problem(), None);
        assert!(s.is_open(), "still open, only allowed");
        s.allow_open = false;
        s.api_keys = vec!["k".to_owned()];
        assert_eq!(s.open_port_problem(), None);
        assert!(!s.is_open());
        for (listen, open) in [
            ("127.0.0.1:8000", false),
            ("127.0.0.2:8000", false),
            ("[::1]:8000", false),
            ("[::ffff:127.0.0.1]:8000", false),
            ("[::]:8000", true),
            ("192.168.1.10:8000", true),
        ] {
            let s = ServerConfig {
                listen: listen.to_owned(),
                ..ServerConfig::default()
            };
            assert_eq!(s.open_port_problem().is_some(), open, "{listen}");
        }
    }

    #[test]
    fn server_limits_and_origins_are_checked_by_name() {
        let mut c = Config::default();
        assert!(
            c.server.header_timeout_s <= 40,
            "half-open connections close within 40 s"
        );
        assert!(c.server.idle_timeout_s > c.server.header_timeout_s);
        c.server.header_timeout_s = 0;
        c.server.body_timeout_s = 0;
        c.server.idle_timeout_s = 0;
        c.server.max_connections = 0;
        c.server.allowed_origins = vec!["http://ok.lan:3000".into(), "ok.lan".into()];
        let all = c.validate().join("\n");
        for key in [
            "server.header_timeout_s",
            "server.body_timeout_s",
            "server.idle_timeout_s",
            "server.max_connections",
            "server.allowed_origins[1]",
        ] {
            assert!(all.contains(key), "{key}: {all}");
        }
        assert!(!all.contains("allowed_origins[0]"), "{all}");
    }

    #[test]
    fn redaction_hides_passwords() {
        assert_eq!(
            redact_url("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert!(
            !Config {
                store: StoreConfig::Postgres {
                    url: "postgres://u:secret@h/db".into(),
                    schema: None,
                },
                ..Default::default()
            }
            .summary()
            .contains("secret")
        );
    }
}
