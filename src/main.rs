//! The `coordinator` binary: parses the CLI, loads config, sets up logging, runs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use coordinator::config::{self, Config};
use coordinator::domain::{TaskId, TaskStatus};
use coordinator::startup::{Application, open_store};
use coordinator::store::TaskFilter;

#[derive(Parser)]
#[command(
    name = "coordinator",
    version,
    about = "Routes LLM chat requests across a home cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the coordinator: HTTP front doors, router, store, queue and local workers.
    Serve {
        /// Config file (default: ./coordinator.toml if present, else built-in defaults).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Listen address, overriding the config (e.g. 127.0.0.1:8000, or :0 for any port).
        #[arg(long)]
        listen: Option<String>,
        /// Log as JSON lines.
        #[arg(long)]
        log_json: bool,
    },
    /// Run this machine's workers for a cluster (PostgreSQL + Redis): they take tasks
    /// for the machine's models, report with heartbeats, and need no HTTP port.
    Worker {
        /// Config file (default: ./coordinator.toml if present).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// This machine's worker name, as users see it (e.g. gpu-desktop).
        #[arg(long)]
        name: Option<String>,
        /// The task store: postgres://user@host/db (overrides [store]).
        #[arg(long)]
        store: Option<String>,
        /// The queue: redis://host:6379 (overrides [queue]).
        #[arg(long)]
        queue: Option<String>,
        /// A local Ollama to serve (adds a backend; e.g. http://127.0.0.1:11434).
        #[arg(long)]
        ollama: Option<String>,
        /// A local OpenAI-compatible server to serve (adds a backend; its /v1 base URL).
        #[arg(long)]
        openai: Option<String>,
        /// Log as JSON lines.
        #[arg(long)]
        log_json: bool,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Show where a prompt would go, without running anything.
    Route {
        #[command(subcommand)]
        command: RouteCommand,
    },
    /// Inspect recorded tasks (reads the store directly).
    Tasks {
        #[arg(long, short, global = true)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        command: TasksCommand,
    },
    /// Conversation memory: backfill, list, search, forget (reads the store directly).
    Memory {
        #[arg(long, short, global = true)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Offline evaluations.
    Eval {
        #[arg(long, short, global = true)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        command: EvalCommand,
    },
}

#[derive(Subcommand)]
enum MemoryCommand {
    /// Feed every finished task in the store to memory (idempotent; web, RAG and internal
    /// tasks and opted-out turns are skipped).
    Backfill,
    /// Stored memories, newest first.
    List {
        #[arg(long)]
        thread: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// The memories most similar to a text, with their scores.
    Search {
        query: String,
        #[arg(long)]
        thread: Option<String>,
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Forget one memory by id, or a whole thread with --thread.
    Forget {
        id: Option<String>,
        #[arg(long)]
        thread: Option<String>,
    },
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Accuracy of the routing rules (web, domain, internal) on a JSONL set, with misses
    /// (e.g. eval/routing.jsonl).
    Routing { file: PathBuf },
    /// Recall hit@1 / hit@k over a JSONL file of cases (e.g. eval/memory.jsonl).
    Memory { file: PathBuf },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file and print every problem at once.
    Check {
        /// The file to check (default: ./coordinator.toml).
        file: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum RouteCommand {
    /// The routing decision for a prompt, with the reasons (asks the backends for their
    /// models, as `serve` would).
    Preview {
        prompt: String,
        /// A model to ask for (default: auto).
        #[arg(long)]
        model: Option<String>,
        /// Treat the prompt as an Open WebUI background task of this kind (the
        /// X-OpenWebUI-Task header), e.g. title_generation.
        #[arg(long)]
        task: Option<String>,
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum TasksCommand {
    /// The most recent tasks.
    List {
        /// Only tasks with this status: queued, running, done or failed.
        #[arg(long)]
        status: Option<String>,
        /// Only Open WebUI background (internal) tasks.
        #[arg(long)]
        internal: bool,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// One task in full, as JSON.
    Show { id: String },
}

const DEFAULT_CONFIG: &str = "coordinator.toml";

/// The explicit file, else `./coordinator.toml` when it exists, else none.
fn config_path(explicit: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or_else(|| {
        Path::new(DEFAULT_CONFIG)
            .exists()
            .then(|| PathBuf::from(DEFAULT_CONFIG))
    })
}

fn load_config(explicit: Option<PathBuf>) -> anyhow::Result<Config> {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve {
            config,
            listen,
            log_json,
        } => {
            coordinator::telemetry::init(log_json);
            let mut cfg = load_config(config)?;
            if let Some(l) = listen {
                cfg.server.listen = if l.starts_with(':') {
                    format!("127.0.0.1{l}")
                } else {
                    l
                };
            }
            tracing::info!(config = %cfg.summary(), "starting coordinator {}", env!("CARGO_PKG_VERSION"));
            let app = Application::build(cfg).await?;
            app.run_until_stopped(coordinator::startup::shutdown_signal())
                .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker {
            config,
            name,
            store,
            queue,
            ollama,
            openai,
            log_json,
        } => {
            coordinator::telemetry::init(log_json);
            let mut cfg = load_config(config)?;
            apply_cluster_flags(&mut cfg, store, queue, ollama, openai);
            let problems = cfg.validate();
            if !problems.is_empty() {
                anyhow::bail!("configuration has problems:\n  {}", problems.join("\n  "));
            }
            tracing::info!(config = %cfg.summary(), "starting coordinator worker {}", env!("CARGO_PKG_VERSION"));
            let process = coordinator::startup::WorkerProcess::build(cfg, name.as_deref()).await?;
            process
                .run_until_stopped(coordinator::startup::shutdown_signal())
                .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Config {
            command: ConfigCommand::Check { file },
        } => {
            let path = config_path(file);
            match config::load(path.as_deref()) {
                Ok(cfg) => {
                    println!("ok: {}", cfg.summary());
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    let from = path
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "defaults".into());
                    let problems = e.problems();
                    println!("{from}: {} problem(s)", problems.len());
                    for p in problems {
                        println!("  - {p}");
                    }
                    Ok(ExitCode::from(2))
                }
            }
        }
        Command::Route {
            command:
                RouteCommand::Preview {
                    prompt,
                    model,
                    task,
                    config,
                },
        } => {
            let cfg = load_config(config)?;
            let registry = coordinator::startup::build_registry(&cfg, None)?;
            registry.refresh_all().await;
            let router =
                coordinator::routing::Router::new(cfg.routing.clone(), cfg.internal_tasks.clone());
            let input = coordinator::turn::TurnInput {
                messages: vec![coordinator::chat::ChatMessage::user(prompt)],
                model,
                task_header: task,
                remember: true,
                ..Default::default()
            };
            let turn = coordinator::turn::build_turn(input, &cfg.history)?;
            let mut catalog = registry.catalog();
            if catalog.entries.is_empty() {
                eprintln!("note: no backend answered; the model below is a placeholder");
                catalog = coordinator::routing::eval::eval_catalog(&router);
            }
            let decision = router.decide(&turn, &catalog).await?;
            println!("{}", serde_json::to_string_pretty(&decision)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval {
            config,
            command: EvalCommand::Routing { file },
        } => {
            let cfg = load_config(config)?;
            let router =
                coordinator::routing::Router::new(cfg.routing.clone(), cfg.internal_tasks.clone());
            let report = coordinator::routing::eval::run_file(&file, &router).await?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Tasks { config, command } => {
            let cfg = load_config(config)?;
            let store = open_store(&cfg).await?;
            match command {
                TasksCommand::List {
                    status,
                    internal,
                    limit,
                } => {
                    let status = status.as_deref().map(TaskStatus::parse).transpose()?;
                    let filter = TaskFilter {
                        status,
                        internal_only: internal,
                        thread_id: None,
                        limit,
                    };
                    let tasks = store.list(&filter).await?;
                    println!(
                        "{:<36}  {:<19}  {:<7}  {:<18}  {:<12}  prompt",
                        "task_id", "created_at", "status", "model", "internal"
                    );
                    for t in tasks {
                        println!(
                            "{:<36}  {:<19}  {:<7}  {:<18}  {:<12}  {}",
                            t.task_id,
                            t.created_at.format("%Y-%m-%d %H:%M:%S"),
                            t.status,
                            t.model,
                            t.internal_task.as_deref().unwrap_or("-"),
                            one_line(&t.prompt, 60)
                        );
                    }
                }
                TasksCommand::Show { id } => {
                    let id = TaskId::parse(&id)?;
                    let task = store
                        .get(id)
                        .await?
                        .with_context(|| format!("no task {id}"))?;
                    println!("{}", serde_json::to_string_pretty(&task)?);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Memory { config, command } => {
            use coordinator::memory::cli;
            let cfg = load_config(config)?;
            match command {
                MemoryCommand::Backfill => cli::run_backfill(&cfg).await?,
                MemoryCommand::List { thread, limit } => {
                    cli::run_list(&cfg, thread.as_deref(), limit).await?;
                }
                MemoryCommand::Search {
                    query,
                    thread,
                    limit,
                } => cli::run_search(&cfg, &query, thread.as_deref(), limit).await?,
                MemoryCommand::Forget { id, thread } => {
                    cli::run_forget(&cfg, id.as_deref(), thread.as_deref()).await?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval {
            config,
            command: EvalCommand::Memory { file },
        } => {
            let cfg = load_config(config)?;
            coordinator::memory::cli::run_eval(&cfg, &file).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `worker` flags over the config: store and queue URLs, and local backends.
fn apply_cluster_flags(
    cfg: &mut Config,
    store: Option<String>,
    queue: Option<String>,
    ollama: Option<String>,
    openai: Option<String>,
) {
    use coordinator::config::{BackendConfig, BackendKind, QueueConfig, StoreConfig};
    if let Some(url) = store {
        cfg.store = StoreConfig::Postgres { url, schema: None };
    }
    if let Some(url) = queue {
        let (prefix, lease_s) = match &cfg.queue {
            QueueConfig::Redis {
                prefix, lease_s, ..
            } => (prefix.clone(), *lease_s),
            QueueConfig::InProcess => (String::new(), 60),
        };
        cfg.queue = QueueConfig::Redis {
            url,
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
                max_concurrency: 2,
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
