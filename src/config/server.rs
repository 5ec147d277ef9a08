//! `[server]`: where Coordinator listens, who may call it (the household's keys), and what
//! a connection may take.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::domain::WebOrigin;

#[derive(Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerConfig {
    pub listen: String,
    /// API keys clients must present as `Authorization: Bearer <key>`, each its own
    /// person; with neither these nor `keys` there is no auth (loopback only).
    pub api_keys: Vec<String>,
    /// The household's people, one key each (`[[server.keys]]`).
    pub keys: Vec<KeyConfig>,
    /// Whether answers carry the routing header and/or footer.
    pub routing_info: RoutingInfo,
    /// How long shutdown waits for running tasks before it gives up on them.
    pub shutdown_grace_s: u64,
    /// Serve on an address other machines can reach without any API key (warned about at
    /// every start); without it such a start is refused.
    pub allow_open: bool,
    /// Web pages (origins like `http://192.168.1.10:3000`) whose scripts may call the API;
    /// a request with any other `Origin` header is refused.
    pub allowed_origins: Vec<String>,
    /// Without keys, the host names a request may be addressed to besides IP addresses and
    /// `localhost` (the `Host` header): a page whose own name was made to resolve to this
    /// machine (DNS rebinding) is refused. Not checked once keys are set.
    pub allowed_hosts: Vec<String>,
    /// How long a client has to send a request's headers, from the connection's start or
    /// the first byte of a later request.
    pub header_timeout_s: u64,
    /// How long a client has to send a request's whole body, from the end of its headers.
    pub body_timeout_s: u64,
    /// How long a connection may wait, with no request in flight, for its next request.
    pub idle_timeout_s: u64,
    /// Client connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Client connections one address may hold open at once, so that one device cannot
    /// take them all; more from it are answered 503 and closed. 0: no such cap.
    pub max_connections_per_address: usize,
    /// How log lines are written to stderr: `human` (default) or `json`, one object a line
    /// (for journald or Loki).
    pub log_format: LogFormat,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8000".to_owned(),
            api_keys: Vec::new(),
            keys: Vec::new(),
            routing_info: RoutingInfo::Off,
            shutdown_grace_s: 30,
            allow_open: false,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            header_timeout_s: 10,
            body_timeout_s: 30,
            idle_timeout_s: 60,
            max_connections: 2048,
            max_connections_per_address: 256,
            log_format: LogFormat::Human,
        }
    }
}

impl ServerConfig {
    /// Whether clients must present a key.
    /// Whether `listen` is an address other machines can reach (anything but loopback).
    pub fn listens_beyond_loopback(&self) -> bool {
        self.listen
            .parse::<SocketAddr>()
            .is_ok_and(|a| !a.ip().to_canonical().is_loopback())
    }

    /// Whether anyone who can reach the port can use it: it listens beyond loopback, and
    /// no key is set.
    pub fn is_open(&self) -> bool {
        self.listens_beyond_loopback() && !self.has_keys()
    }

    /// Why `serve` must not start as configured: an [open](Self::is_open) port without
    /// `allow_open`. `None` when it may.
    pub fn open_port_problem(&self) -> Option<String> {
        if !self.is_open() || self.allow_open {
            return None;
        }
        Some(format!(
            "server.listen: {} can be reached from other machines, but no API key is set, so \
             anyone on the network could use it. Add a key: `[server] api_keys = [\"<key>\"]` \
             (or a `[[server.keys]]` entry) in coordinator.toml, or \
             COORDINATOR_SERVER__API_KEYS='[\"<key>\"]' in the environment (make one with \
             `openssl rand -hex 32`); clients then send `Authorization: Bearer <key>`. Or listen \
             on 127.0.0.1, or set `[server] allow_open = true` to serve without keys anyway.",
            self.listen
        ))
    }

    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        if self.listen.parse::<SocketAddr>().is_err() {
            problems.push(format!(
                "server.listen: {:?} is not an address like 127.0.0.1:8000",
                self.listen
            ));
        }
        for (i, o) in self.allowed_origins.iter().enumerate() {
            if let Err(e) = WebOrigin::parse(o) {
                problems.push(format!("server.allowed_origins[{i}]: {e}"));
            }
        }
        for (key, value) in [
            ("header_timeout_s", self.header_timeout_s),
            ("body_timeout_s", self.body_timeout_s),
            ("idle_timeout_s", self.idle_timeout_s),
        ] {
            if value == 0 {
                problems.push(format!("server.{key}: must be at least 1"));
            }
        }
        if self.max_connections == 0 {
            problems.push("server.max_connections: must be at least 1".to_owned());
        }
    }
}

/// Never prints the keys themselves (only how many there are).
impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field(
                "api_keys",
                &format_args!("[{} key(s)]", self.api_keys.len()),
            )
            .field("keys", &self.keys)
            .field("routing_info", &self.routing_info)
            .field("shutdown_grace_s", &self.shutdown_grace_s)
            .field("allow_open", &self.allow_open)
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("header_timeout_s", &self.header_timeout_s)
            .field("body_timeout_s", &self.body_timeout_s)
            .field("idle_timeout_s", &self.idle_timeout_s)
            .field("max_connections", &self.max_connections)
            .field(
                "max_connections_per_address",
                &self.max_connections_per_address,
            )
            .field("log_format", &self.log_format)
            .finish()
    }
}

impl ServerConfig {
    /// Whether any API key is configured (then every guarded route needs one).
    pub fn has_keys(&self) -> bool {
        !self.api_keys.is_empty() || !self.keys.is_empty()
    }
}

/// One person's key: `[[server.keys]]` with a `name` and exactly one of `key`, `key_env`
/// (an environment variable holding it) or `key_file` (a file holding it).
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyConfig {
    /// The person (`alice`); their tasks and memories are theirs alone.
    pub name: String,
    pub key: Option<String>,
    pub key_env: Option<String>,
    pub key_file: Option<PathBuf>,
    pub role: KeyRole,
    /// The key a front end such as Open WebUI uses: its `X-OpenWebUI-User-Id` header names
    /// the person behind each request (`<name>/<user id>`). Other keys cannot assert one.
    pub trusted_frontend: bool,
}

/// Never prints the key itself.
impl std::fmt::Debug for KeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyConfig")
            .field("name", &self.name)
            .field("key", &self.key.as_ref().map(|_| "***"))
            .field("key_env", &self.key_env)
            .field("key_file", &self.key_file)
            .field("role", &self.role)
            .field("trusted_frontend", &self.trusted_frontend)
            .finish()
    }
}

/// What a key may see: its own person's tasks and memories, or everyone's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyRole {
    #[default]
    User,
    Admin,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingInfo {
    #[default]
    Off,
    Footer,
    HeaderFooter,
}

/// `[server] log_format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Compact text, coloured on a terminal.
    #[default]
    Human,
    /// One JSON object a line, with the span's fields (the task id) in it.
    Json,
}
