//! The `coordinator` binary: parses the CLI, loads config, sets up logging, runs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use coordinator::cli;
use coordinator::config::LogFormat;
use coordinator::memory::cli as memory_cli;
use coordinator::startup::{Application, WorkerProcess, shutdown_signal};

/// jemalloc rather than the system allocator: every request allocates and frees many
/// small buffers (JSON, headers, events) across threads, where glibc's malloc took about
/// a seventh of the CPU under load (docs/BENCHMARKS.md). Its options are built in from
/// `.cargo/config.toml` (`JEMALLOC_SYS_WITH_MALLOC_CONF`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The version and the commit it was built from (see `build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("COORDINATOR_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "coordinator",
    version = VERSION,
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
        /// Log as JSON lines (as `[server] log_format = "json"` does).
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
        /// Log as JSON lines (as `[server] log_format = "json"` does).
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
    /// The household as the dashboard shows it (machines, queue, recent tasks), read
    /// from a running coordinator's HTTP API.
    Status {
        /// The coordinator's address (default: http:// and `[server] listen` of the config).
        #[arg(long)]
        url: Option<String>,
        /// An admin key, when keys are set.
        #[arg(long, env = "COORDINATOR_KEY", hide_env_values = true)]
        key: Option<String>,
        /// Refresh every this many seconds until Ctrl-C.
        #[arg(long, num_args = 0..=1, default_missing_value = "2")]
        watch: Option<f64>,
        #[arg(long, short)]
        config: Option<PathBuf>,
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
    /// The RAG lane's documents: ingest, list, forget (reads the store directly).
    Docs {
        #[arg(long, short, global = true)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        command: coordinator::docs::cli::DocsCommand,
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
        /// Only this person's (the name of their key; `default` without keys).
        #[arg(long)]
        person: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// The memories most similar to a text, with their scores.
    Search {
        query: String,
        #[arg(long)]
        thread: Option<String>,
        /// Only this person's (the name of their key; `default` without keys).
        #[arg(long)]
        person: Option<String>,
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Forget one memory by id, or a whole thread with --thread.
    Forget {
        id: Option<String>,
        #[arg(long)]
        thread: Option<String>,
        /// Only this person's (the name of their key; `default` without keys).
        #[arg(long)]
        person: Option<String>,
    },
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Accuracy of the routing rules (web, domain, internal) on a JSONL set, with misses
    /// (e.g. eval/routing.jsonl).
    Routing { file: PathBuf },
    /// Retrieval hit@1 / hit@5 / MRR over a JSONL file of cases and a corpus ingested into
    /// a temporary store (e.g. eval/rag.jsonl with --corpus docs --corpus eval/rag).
    Rag {
        file: PathBuf,
        #[arg(long, required = true)]
        corpus: Vec<PathBuf>,
    },
    /// Recall hit@1 / hit@k over a JSONL file of cases (e.g. eval/memory.jsonl).
    Memory {
        file: PathBuf,
        /// For every failed case: the query and what recall found, with scores.
        #[arg(long)]
        explain: bool,
        /// Sweep `lexical_weight` and `cross_thread_min_score` and print the best settings.
        #[arg(long)]
        calibrate: bool,
    },
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
        /// Only tasks with this status: queued, running, done, failed or cancelled.
        #[arg(long)]
        status: Option<String>,
        /// Only Open WebUI background (internal) tasks.
        #[arg(long)]
        internal: bool,
        /// Only this person's (the name of their key; `default` without keys).
        #[arg(long)]
        person: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// One task in full, as JSON.
    Show { id: String },
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
            let mut cfg = cli::load_config(config)?;
            let _log =
                coordinator::telemetry::init(log_json || cfg.server.log_format == LogFormat::Json);
            if let Some(l) = listen {
                cfg.server.listen = if l.starts_with(':') {
                    format!("127.0.0.1{l}")
                } else {
                    l
                };
            }
            tracing::info!(config = %cfg.summary(), "starting coordinator {VERSION}");
            let app = Application::build(cfg).await?;
            app.run_until_stopped(shutdown_signal()).await?;
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
            let mut cfg = cli::load_config(config)?;
            let _log =
                coordinator::telemetry::init(log_json || cfg.server.log_format == LogFormat::Json);
            cli::apply_cluster_flags(&mut cfg, store, queue, ollama, openai);
            let problems = cfg.validate();
            if !problems.is_empty() {
                anyhow::bail!("configuration has problems:\n  {}", problems.join("\n  "));
            }
            tracing::info!(config = %cfg.summary(), "starting coordinator worker {VERSION}");
            let process = WorkerProcess::build(cfg, name.as_deref()).await?;
            process.run_until_stopped(shutdown_signal()).await?;
        }
        Command::Config {
            command: ConfigCommand::Check { file },
        } => {
            if !cli::check_config(file) {
                return Ok(ExitCode::from(2));
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
            cli::route_preview(&cli::load_config(config)?, prompt, model, task).await?;
        }
        Command::Eval { config, command } => {
            let cfg = cli::load_config(config)?;
            match command {
                EvalCommand::Routing { file } => cli::eval_routing(&cfg, &file).await?,
                EvalCommand::Rag { file, corpus } => {
                    print!(
                        "{}",
                        coordinator::docs::eval::run_file(&file, &corpus, &cfg.docs).await?
                    );
                }
                EvalCommand::Memory {
                    file,
                    explain,
                    calibrate,
                } => memory_cli::run_eval(&cfg, &file, explain, calibrate).await?,
            }
        }
        Command::Status {
            url,
            key,
            watch,
            config,
        } => {
            let base = match url {
                Some(url) => url,
                None => format!("http://{}", cli::load_config(config)?.server.listen),
            };
            let every = watch.map(|s| std::time::Duration::from_secs_f64(s.max(0.2)));
            coordinator::dashboard::terminal::run(&base, key.as_deref(), every, shutdown_signal())
                .await?;
        }
        Command::Tasks { config, command } => {
            let cfg = cli::load_config(config)?;
            match command {
                TasksCommand::List {
                    status,
                    internal,
                    person,
                    limit,
                } => {
                    let filter = cli::TasksWanted {
                        status: status.as_deref(),
                        internal,
                        person: person.as_deref(),
                        limit,
                    };
                    cli::tasks_list(&cfg, &filter).await?;
                }
                TasksCommand::Show { id } => cli::tasks_show(&cfg, &id).await?,
            }
        }
        Command::Docs { config, command } => {
            coordinator::docs::cli::run(&cli::load_config(config)?, command).await?;
        }
        Command::Memory { config, command } => {
            let cfg = cli::load_config(config)?;
            match command {
                MemoryCommand::Backfill => memory_cli::run_backfill(&cfg).await?,
                MemoryCommand::List {
                    thread,
                    person,
                    limit,
                } => {
                    let scope = memory_cli::Scope::of(person.as_deref(), thread.as_deref())?;
                    memory_cli::run_list(&cfg, &scope, limit).await?
                }
                MemoryCommand::Search {
                    query,
                    thread,
                    person,
                    limit,
                } => {
                    let scope = memory_cli::Scope::of(person.as_deref(), thread.as_deref())?;
                    memory_cli::run_search(&cfg, &query, &scope, limit).await?;
                }
                MemoryCommand::Forget { id, thread, person } => {
                    let scope = memory_cli::Scope::of(person.as_deref(), thread.as_deref())?;
                    memory_cli::run_forget(&cfg, id.as_deref(), &scope).await?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
