//! Reading the layers into one [`Config`]: file text, then environment overrides.

use std::collections::HashMap;
use std::path::Path;

use toml::Value;

use super::Config;
use super::secret::{redact_in_text, resolve_urls};

/// Everything that is wrong with a configuration, all at once.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{}", .0.join("\n"))]
    Invalid(Vec<String>),
}

impl ConfigError {
    pub fn problems(&self) -> Vec<String> {
        match self {
            Self::Read { .. } => vec![self.to_string()],
            Self::Invalid(p) => p.clone(),
        }
    }
}

/// The environment prefix; `COORDINATOR_SERVER__LISTEN` sets `server.listen`.
pub const ENV_PREFIX: &str = "COORDINATOR_";

/// Loads `path` (or only defaults when `None`) with the process environment on top.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let text = match path {
        Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
            path: p.display().to_string(),
            source,
        })?,
        None => String::new(),
    };
    load_str(&text, std::env::vars())
}

/// Parses TOML text, applies `COORDINATOR_...` variables from `env`, reads the secrets
/// the file points to (from `env` and files), and validates.
pub fn load_str(
    text: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    let mut root: Value = match toml::from_str::<toml::Table>(text) {
        Ok(t) => Value::Table(t),
        Err(e) => {
            // The message quotes the line, which may hold a URL with a password.
            let message = redact_in_text(&e.to_string());
            return Err(ConfigError::Invalid(vec![format!(
                "TOML syntax: {message}"
            )]));
        }
    };
    let mut problems = Vec::new();
    let env: HashMap<String, String> = env.into_iter().collect();
    let mut overrides: Vec<(&String, &String)> = env
        .iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX) && k.contains("__"))
        .collect();
    overrides.sort();
    for (key, raw) in overrides {
        if let Err(p) = apply_env(&mut root, key, raw) {
            problems.push(p);
        }
    }
    problems.extend(resolve_urls(&mut root, &env));
    infer_type_tags(&mut root);
    let mut unknown = Vec::new();
    let mut note_unknown = |path: serde_ignored::Path<'_>| unknown.push(path.to_string());
    let parsed: Result<Config, _> =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(root, &mut note_unknown));
    for key in unknown {
        problems.push(format!("unknown key `{key}`"));
    }
    match parsed {
        Ok(config) => {
            problems.extend(config.validate());
            if problems.is_empty() {
                Ok(config)
            } else {
                Err(ConfigError::Invalid(problems))
            }
        }
        Err(e) => {
            // The key the error is about, and what is wrong with it (without the
            // `in `key`` line toml adds, which the path says better: with indices).
            let inner = e.inner().to_string();
            let message = redact_in_text(inner.split("\nin `").next().unwrap_or_default().trim());
            problems.push(match e.path().to_string().as_str() {
                "." | "?" | "" => message,
                path => format!("{path}: {message}"),
            });
            Err(ConfigError::Invalid(problems))
        }
    }
}

/// Fills in `type` where it is implied: `[store]` with only `path` is SQLite, with a
/// `url` PostgreSQL; `[queue]` with a `url` is Redis. Runs after `url_env` / `url_file`
/// have become a `url`.
fn infer_type_tags(root: &mut Value) {
    let Value::Table(t) = root else { return };
    if let Some(Value::Table(store)) = t.get_mut("store")
        && !store.contains_key("type")
    {
        let kind = if store.contains_key("url") {
            "postgres"
        } else {
            "sqlite"
        };
        store.insert("type".to_owned(), Value::String(kind.to_owned()));
    }
    if let Some(Value::Table(queue)) = t.get_mut("queue")
        && !queue.contains_key("type")
    {
        let kind = if queue.contains_key("url") {
            "redis"
        } else {
            "in-process"
        };
        queue.insert("type".to_owned(), Value::String(kind.to_owned()));
    }
}

/// Sets one `COORDINATOR_A__B__C=value` override into the tree. Numeric segments index
/// arrays (`COORDINATOR_BACKENDS__0__URL`).
fn apply_env(root: &mut Value, key: &str, raw: &str) -> Result<(), String> {
    let path: Vec<String> = key[ENV_PREFIX.len()..]
        .split("__")
        .map(str::to_ascii_lowercase)
        .collect();
    if path.iter().any(String::is_empty) {
        return Err(format!("environment variable {key}: empty key segment"));
    }
    let value = parse_scalar(raw);
    let mut node = root;
    for (i, seg) in path.iter().enumerate() {
        let last = i + 1 == path.len();
        node = match node {
            Value::Table(t) => {
                if last {
                    t.insert(seg.clone(), value);
                    return Ok(());
                }
                let next_is_index = path[i + 1].parse::<usize>().is_ok();
                t.entry(seg.clone()).or_insert_with(|| {
                    if next_is_index {
                        Value::Array(Vec::new())
                    } else {
                        Value::Table(Default::default())
                    }
                })
            }
            Value::Array(a) => {
                let idx: usize = seg
                    .parse()
                    .map_err(|_| format!("environment variable {key}: {seg:?} is not an index"))?;
                if idx > a.len() {
                    return Err(format!(
                        "environment variable {key}: index {idx} skips entries (there are {})",
                        a.len()
                    ));
                }
                if idx == a.len() {
                    a.push(Value::Table(Default::default()));
                }
                if last {
                    a[idx] = value;
                    return Ok(());
                }
                &mut a[idx]
            }
            _ => {
                return Err(format!(
                    "environment variable {key}: `{}` is not a table",
                    path[..i].join(".")
                ));
            }
        };
    }
    Ok(())
}

/// A TOML literal when the text is one (`60`, `true`, `["a"]`), else the text as a string.
fn parse_scalar(raw: &str) -> Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BackendKind, QueueConfig, StoreConfig, Synchronous};

    fn no_env() -> Vec<(String, String)> {
        Vec::new()
    }

    #[test]
    fn documented_example_parses() {
        let text = r#"
            [server]
            listen = "127.0.0.1:8000"
            [store]
            type = "sqlite"
            path = "data/coordinator.db"
            [queue]
            type = "in-process"
            [[backends]]
            name = "moon"
            kind = "ollama"
            url = "http://127.0.0.1:11434"
            models = ["qwen2.5:7b"]
            parallel = 2
            [routing]
            default_model = "qwen2.5:7b"
            [timeouts]
            route_s = 60
        "#;
        let c = load_str(text, no_env()).unwrap();
        assert_eq!(c.backends[0].kind, BackendKind::Ollama);
        assert_eq!(c.queue, QueueConfig::InProcess);
        assert!(matches!(c.store, StoreConfig::Sqlite { .. }));
    }

    #[test]
    fn a_backends_parallel_may_still_be_called_max_concurrency() {
        let backend = |key: &str| {
            format!(
                "[[backends]]\nname = \"moon\"\nkind = \"ollama\"\nurl = \"http://127.0.0.1:11434\"\n{key} = 3\n"
            )
        };
        for key in ["parallel", "max_concurrency"] {
            let c = load_str(&backend(key), no_env()).unwrap();
            assert_eq!(c.backends[0].parallel, 3, "{key}");
        }
        let unset = load_str(&backend("max_loaded"), no_env()).unwrap();
        assert_eq!(unset.backends[0].parallel, 1, "Ollama's default");
    }

    #[test]
    fn every_unknown_key_is_named_at_once() {
        let text = r#"
            [server]
            lisen = "x"
            [timeouts]
            route = 3
            [nonsense]
            a = 1
        "#;
        let err = load_str(text, no_env()).unwrap_err().problems();
        let all = err.join("\n");
        assert!(all.contains("server.lisen"), "{all}");
        assert!(all.contains("timeouts.route"), "{all}");
        assert!(all.contains("nonsense"), "{all}");
    }

    #[test]
    fn semantic_problems_are_all_reported() {
        let text = r#"
            [server]
            listen = "nowhere"
            [timeouts]
            route_s = 0
            [[backends]]
            name = "a b"
            kind = "ollama"
            url = "ftp://x"
            parallel = 0
        "#;
        let err = load_str(text, no_env()).unwrap_err().problems();
        assert!(err.len() >= 5, "{err:?}");
    }

    #[test]
    fn context_windows_are_read_and_checked() {
        let text = r#"
            [[backends]]
            name = "moon"
            kind = "openai"
            url = "http://h:1/v1"
            context_length = 8192
            model_context_length = { "qwen2.5:7b" = 32768 }
            max_num_ctx = 16384
            [history]
            max_chars = 8000
        "#;
        let c = load_str(text, no_env()).unwrap();
        let b = &c.backends[0];
        assert_eq!(b.configured_context_length("qwen2.5:7b"), Some(32_768));
        assert_eq!(b.configured_context_length("other"), Some(8192));
        assert_eq!(b.window_cap(), Some(16_384));
        assert_eq!(c.history.max_chars, Some(8000));
        // Without a cap, Ollama's default bounds the window; an OpenAI server has none.
        let ollama = super::super::BackendConfig::default_ollama();
        assert_eq!(
            ollama.window_cap(),
            Some(crate::context::DEFAULT_MAX_NUM_CTX)
        );
        assert_eq!(c.history.max_turns, 10);
        assert_eq!(load_str("", no_env()).unwrap().history.max_chars, None);

        let bad = r#"
            [[backends]]
            name = "moon"
            kind = "ollama"
            url = "http://h:1"
            context_length = 100
            max_num_ctx = 0
            model_context_length = { "bad name" = 4096, "m" = 10 }
        "#;
        let all = load_str(bad, no_env()).unwrap_err().problems().join("\n");
        assert!(
            all.contains("backends[0].context_length: must be at least 512"),
            "{all}"
        );
        assert!(
            all.contains("backends[0].max_num_ctx: must be at least 512"),
            "{all}"
        );
        assert!(
            all.contains("backends[0].model_context_length: \"m\" must be at least 512"),
            "{all}"
        );
        assert!(all.contains("backends[0].model_context_length: "), "{all}");
        assert!(all.contains("bad name"), "{all}");
    }

    #[test]
    fn environment_overrides_file() {
        let text = "[server]\nlisten = \"127.0.0.1:8000\"\n";
        let env = vec![
            (
                "COORDINATOR_SERVER__LISTEN".to_owned(),
                "127.0.0.1:9999".to_owned(),
            ),
            ("COORDINATOR_TIMEOUTS__ROUTE_S".to_owned(), "15".to_owned()),
            (
                "COORDINATOR_BACKENDS__0__NAME".to_owned(),
                "moon".to_owned(),
            ),
            (
                "COORDINATOR_BACKENDS__0__KIND".to_owned(),
                "openai".to_owned(),
            ),
            (
                "COORDINATOR_BACKENDS__0__URL".to_owned(),
                "http://h:1/v1".to_owned(),
            ),
            ("UNRELATED".to_owned(), "x".to_owned()),
        ];
        let c = load_str(text, env).unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:9999");
        assert_eq!(c.timeouts.route_s, 15);
        assert_eq!(c.backends[0].kind, BackendKind::Openai);
    }

    #[test]
    fn keys_and_server_limits_come_from_the_environment_too() {
        let env = vec![
            (
                "COORDINATOR_SERVER__API_KEYS".to_owned(),
                r#"["sk-home-0123456789"]"#.to_owned(),
            ),
            (
                "COORDINATOR_SERVER__LISTEN".to_owned(),
                "0.0.0.0:8000".to_owned(),
            ),
            (
                "COORDINATOR_SERVER__ALLOWED_ORIGINS".to_owned(),
                r#"["http://192.168.1.10:3000"]"#.to_owned(),
            ),
            (
                "COORDINATOR_SERVER__IDLE_TIMEOUT_S".to_owned(),
                "5".to_owned(),
            ),
        ];
        let c = load_str("", env).unwrap();
        assert!(c.server.has_keys());
        assert_eq!(c.server.open_port_problem(), None);
        assert_eq!(c.server.allowed_origins, ["http://192.168.1.10:3000"]);
        assert_eq!(c.server.idle_timeout_s, 5);
    }

    #[test]
    fn implied_types_are_filled_in() {
        let c = load_str("[store]\npath = \"x.db\"\n", no_env()).unwrap();
        assert_eq!(
            c.store,
            StoreConfig::Sqlite {
                path: "x.db".into(),
                synchronous: Synchronous::Normal,
            }
        );
        let c = load_str("[store]\nsynchronous = \"full\"\n", no_env()).unwrap();
        assert_eq!(
            c.store,
            StoreConfig::Sqlite {
                path: "data/coordinator.db".into(),
                synchronous: Synchronous::Full,
            }
        );
        let err = load_str("[store]\nsynchronous = \"off\"\n", no_env()).unwrap_err();
        assert!(format!("{err:#}").contains("off"), "{err:#}");
        let c = load_str(
            "[store]\nurl = \"postgres://h/db\"\n[queue]\nurl = \"redis://h\"\n",
            no_env(),
        )
        .unwrap();
        assert!(matches!(c.store, StoreConfig::Postgres { .. }));
        assert!(matches!(c.queue, QueueConfig::Redis { .. }));
        let env = vec![("COORDINATOR_STORE__PATH".to_owned(), "y.db".to_owned())];
        let c = load_str("", env).unwrap();
        assert_eq!(
            c.store,
            StoreConfig::Sqlite {
                path: "y.db".into(),
                synchronous: Synchronous::Normal,
            }
        );
    }

    /// Found by the property tests: `[store]` and `[queue]` are tagged enums, whose keys
    /// `serde_ignored` cannot see, so a typo there was silently dropped.
    #[test]
    fn unknown_keys_of_the_store_and_queue_are_named() {
        let err = load_str("[store]\ntype = \"sqlite\"\npth = \"x.db\"\n", no_env())
            .unwrap_err()
            .problems();
        assert!(err[0].starts_with("store: unknown field `pth`"), "{err:?}");
        let err = load_str("[queue]\nurl = \"redis://h\"\nlease = 3\n", no_env())
            .unwrap_err()
            .problems();
        assert!(
            err[0].starts_with("queue: unknown field `lease`"),
            "{err:?}"
        );
    }

    #[test]
    fn rag_routing_rules_load_and_their_problems_are_all_named() {
        let ok = load_str(
            "[routing.rag]\nnegative = [\"implement*\"]\n[[routing.rag.rules]]\n\
             collection = \"notes\"\nkeywords = [\"my notes\"]\n",
            no_env(),
        )
        .unwrap();
        assert_eq!(ok.routing.rag.rules[0].collection.as_deref(), Some("notes"));
        assert_eq!(ok.routing.rag.negative, vec!["implement*".to_owned()]);
        let err = load_str(
            "[[routing.rag.rules]]\ncolection = \"notes\"\nkeywords = [\"x\"]\n\
             [[routing.rag.rules]]\ncollection = \"Bad\"\nkeywords = []\n",
            no_env(),
        )
        .unwrap_err()
        .problems();
        assert!(
            err.contains(&"unknown key `routing.rag.rules.0.colection`".to_owned()),
            "{err:?}"
        );
        assert!(
            err.iter()
                .any(|p| p.starts_with("routing.rag.rules[1].collection: \"Bad\"")),
            "{err:?}"
        );
        assert!(
            err.contains(
                &"routing.rag.rules[1].keywords: a rule needs at least one keyword".to_owned()
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_path() {
        let err = load_str("[[backends]]\nname = 3\n", no_env())
            .unwrap_err()
            .problems();
        assert_eq!(
            err,
            vec!["backends[0].name: invalid type: integer `3`, expected a string".to_owned()]
        );
    }

    #[test]
    fn bad_toml_is_an_error_not_a_panic() {
        assert!(load_str("[server\nlisten=", no_env()).is_err());
        assert!(load_str("server = 3", no_env()).is_err());
    }
}

#[cfg(test)]
#[path = "load_props.rs"]
mod props;
