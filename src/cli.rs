//! The work behind the `coordinator` subcommands that do not serve: config check, route
//! preview, routing eval, task inspection, and the `worker` flags. `main.rs` parses the
//! command line and calls these.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::chat::ChatMessage;
use crate::config::{self, BackendConfig, BackendKind, Config, QueueConfig, StoreConfig};
use crate::domain::{InternalTask, Person, TaskId, TaskStatus};
use crate::routing::Decider;
use crate::startup::{build_registry, open_store};
use crate::store::TaskFilter;
use crate::turn::{ClientContext, TurnInput, build_turn};

/// The config file used when none is named.
pub const DEFAULT_CONFIG: &str = "coordinator.toml";

/// The explicit file, else `./coordinator.toml` when it exists, else none.
pub fn config_path(explicit: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or_else(|| {
        Path::new(DEFAULT_CONFIG)
            .exists()
            .then(|| PathBuf::from(DEFAULT_CONFIG))
    })
}

/// Loads the config (file, then environment), with every problem in the error.
pub fn load_config(explicit: Option<PathBuf>) -> anyhow::Result<Config> {
    let path = config_path(explicit);
    config::load(path.as_deref()).map_err(|e| {
        let from = path
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "defaults".into());
        anyhow::anyhow!(
            "configuration ({from}) has problems:\n  {}",
            e.problems().join("\n  ")
        )
    })
}

/// `config check`: prints "ok" and the summary, or every problem, including what would
/// stop `serve` (an open port without keys). Returns whether it was ok.
pub fn check_config(file: Option<PathBuf>) -> bool {
    let path = config_path(file);
    let problems = match config::load(path.as_deref()) {
        Ok(cfg) => match cfg.server.open_port_problem() {
            Some(problem) => vec![problem],
            None => {
                if cfg.server.is_open() {
                    println!(
                        "warning: server.listen {} serves without API keys to every machine that can reach it (allow_open = true)",
                        cfg.server.listen
                    );
                }
                println!("ok: {}", cfg.summary());
                return true;
            }
        },
        Err(e) => e.problems(),
    };
    let from = path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "defaults".into());
    println!("{from}: {} problem(s)", problems.len());
    for p in problems {
        println!("  - {p}");
    }
    false
}

/// `route preview`: the decision for one prompt, asking the backends for their models.
pub async fn route_preview(
    cfg: &Config,
    prompt: String,
    model: Option<String>,
    task: Option<String>,
) -> anyhow::Result<()> {
    let registry = build_registry(cfg, None)?;
    registry.refresh_all().await;
    let decider = Decider::new(cfg.routing.clone(), cfg.internal_tasks.clone());
    let input = TurnInput {
        messages: vec![ChatMessage::user(prompt)],
        model,
        client: ClientContext {
            task_header: task,
            ..ClientContext::default()
        },
        remember: true,
        ..Default::default()
    };
    let turn = build_turn(input, &cfg.history)?;
    let mut catalog = registry.catalog();
    if catalog.entries.is_empty() {
        eprintln!("note: no backend answered; the model below is a placeholder");
        catalog = crate::routing::eval::eval_catalog(&decider);
    }
    let decision = decider.decide(&turn, &catalog).await?;
    println!("{}", serde_json::to_string_pretty(&decision)?);
    Ok(())
}

/// `eval routing FILE`: accuracy per field and the misses.
pub async fn eval_routing(cfg: &Config, file: &Path) -> anyhow::Result<()> {
    let decider = Decider::new(cfg.routing.clone(), cfg.internal_tasks.clone());
    let report = crate::routing::eval::run_file(file, &decider).await?;
    println!("{report}");
    Ok(())
}

/// Which tasks `tasks list` shows, as given on the command line.
#[derive(Debug, Clone, Copy)]
pub struct TasksWanted<'a> {
    pub status: Option<&'a str>,
    pub internal: bool,
    pub person: Option<&'a str>,
    pub limit: u32,
}

/// `tasks list`: the most recent tasks, one line each.
pub async fn tasks_list(cfg: &Config, wanted: &TasksWanted<'_>) -> anyhow::Result<()> {
    let filter = TaskFilter {
        status: wanted.status.map(TaskStatus::parse).transpose()?,
        internal_only: wanted.internal,
        thread_id: None,
        person: wanted.person.map(Person::parse).transpose()?,
        limit: wanted.limit,
    };
    let store = open_store(cfg).await?;
    println!("{}", list_header());
    for t in store.list(&filter).await? {
        println!("{}", list_line(&t));
    }
    Ok(())
}

fn list_header() -> String {
    format!(
        "{:<36}  {:<19}  {:<7}  {:<16}  {:<18}  {:<12}  {:<11}  prompt",
        "task_id", "created_at", "status", "person", "model", "internal", "priority"
    )
}

/// One task of `tasks list`.
fn list_line(t: &crate::store::TaskRecord) -> String {
    format!(
        "{:<36}  {:<19}  {:<7}  {:<16}  {:<18}  {:<12}  {:<11}  {}",
        t.task_id,
        t.created_at.format("%Y-%m-%d %H:%M:%S"),
        t.status,
        t.person,
        t.model,
        t.internal_task.map_or("-", InternalTask::as_str),
        t.priority,
        one_line(&t.prompt, 60)
    )
}

/// `tasks show ID`: one task as JSON.
pub async fn tasks_show(cfg: &Config, id: &str) -> anyhow::Result<()> {
    let store = open_store(cfg).await?;
    let id = TaskId::parse(id)?;
    let task = store
        .get(id)
        .await?
        .with_context(|| format!("no task {id}"))?;
    println!("{}", serde_json::to_string_pretty(&task)?);
    Ok(())
}

/// `worker` flags over the config: store and queue URLs, and local backends.
pub fn apply_cluster_flags(
    cfg: &mut Config,
    store: Option<String>,
    queue: Option<String>,
    ollama: Option<String>,
    openai: Option<String>,
) {
    if let Some(url) = store {
        cfg.store = StoreConfig::Postgres {
            url: url.into(),
            schema: None,
        };
    }
    if let Some(url) = queue {
        let (prefix, lease_s) = match &cfg.queue {
            QueueConfig::Redis {
                prefix, lease_s, ..
            } => (prefix.clone(), *lease_s),
            QueueConfig::InProcess => (String::new(), 60),
        };
        cfg.queue = QueueConfig::Redis {
            url: url.into(),
            prefix,
            lease_s,
        };
    }
    for (url, kind, name) in [
        (ollama, BackendKind::Ollama, "ollama"),
        (openai, BackendKind::Openai, "openai"),
    ] {
        if let Some(url) = url {
            cfg.backends.push(BackendConfig {
                name: name.to_owned(),
                kind,
                url,
                models: None,
                api_key_env: None,
                parallel: 2,
                max_loaded: None,
                keep_alive: Default::default(),
                context_length: None,
                model_context_length: Default::default(),
                max_num_ctx: None,
            });
        }
    }
}

/// The first `max` characters of `s` on one line.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_list_shows_each_task_s_priority() {
        use crate::store::TaskStore;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::sqlite::SqliteStore::open(&dir.path().join("c.db"))
            .await
            .unwrap();
        let mut task = crate::testkit::samples::sample_task("nightly digest");
        task.priority = crate::domain::Priority::Batch;
        store.insert(task.clone()).await.unwrap().await.unwrap();
        let row = store.get(task.task_id).await.unwrap().unwrap();
        let line = list_line(&row);
        let header = list_header();
        let column = header.find("priority").unwrap();
        assert_eq!(
            line.get(column..column + 5),
            Some("batch"),
            "{header}\n{line}"
        );
        assert!(line.ends_with("nightly digest"), "{line}");
    }

    #[test]
    fn worker_flags_make_a_cluster_config() {
        let mut cfg = Config::default();
        apply_cluster_flags(
            &mut cfg,
            Some("postgres://h/db".into()),
            Some("redis://h".into()),
            Some("http://127.0.0.1:11434".into()),
            None,
        );
        assert!(matches!(cfg.store, StoreConfig::Postgres { .. }));
        assert!(matches!(cfg.queue, QueueConfig::Redis { lease_s: 60, .. }));
        assert_eq!(cfg.backends.len(), 1);
        assert_eq!(cfg.backends[0].kind, BackendKind::Ollama);
        assert!(cfg.validate().is_empty(), "{:?}", cfg.validate());
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\nb", 10), "a b");
        assert_eq!(one_line("あいうえお", 3), "あいう…");
    }
}
