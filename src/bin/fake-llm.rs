//! `fake-llm`: runs the in-repo fake LLM server (Ollama and OpenAI wire formats) for demos
//! and benchmarks, until Ctrl-C or SIGTERM.
//!
//! `fake-llm --listen 127.0.0.1:11434 --model qwen2.5:7b --model llama3.1:8b+tools`
//!
//! `--realistic` makes it behave like one Ollama machine (one generation per model at a
//! time, one resident model, load times, token rates, a 4096-token window); the other
//! realism flags tune it, e.g. a laptop ten times faster than life:
//! `fake-llm --realistic --eval-tps 10 --prompt-tps 150 --load-s 10 --time-scale 10`.
//! `GET /fake/stats` then says what the machine did.
//!
//! The fakes are behind the `testkit` feature, so this binary needs it:
//! `cargo run --release --features testkit --bin fake-llm -- --help`.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use coordinator::testkit::fake_llm::{
    self, Eviction, FakeLlmConfig, KeepAlive, Knobs, ModelSpec, Realism, Speed,
};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(
    name = "fake-llm",
    about = "A fake Ollama/OpenAI server with deterministic replies"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:11434")]
    listen: SocketAddr,
    /// A model to serve (repeatable); `NAME+tools` gives it the tools capability.
    #[arg(long = "model", value_name = "NAME")]
    models: Vec<String>,
    /// A model with the tools capability (repeatable).
    #[arg(long = "tools-model", value_name = "NAME")]
    tools_models: Vec<String>,
    /// Delay before each response, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Delay before each streamed token, in milliseconds.
    #[arg(long, default_value_t = 0)]
    token_delay_ms: u64,
    /// Exact length of the default reply, in tokens.
    #[arg(long)]
    tokens: Option<usize>,
    /// Keep every request in memory (off by default: a long run would grow without bound).
    #[arg(long)]
    record: bool,
    /// Seconds the machine's clock reads ahead of this host's (negative: behind), for the
    /// expiries in `/api/ps` and every answer's `Date`: a machine whose clock drifted.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    clock_ahead_s: f64,
    /// Behave like one Ollama machine (the flags below tune it).
    #[arg(long)]
    realistic: bool,
    /// Generations at once per resident model (OLLAMA_NUM_PARALLEL).
    #[arg(long, default_value_t = 1, requires = "realistic")]
    parallel: usize,
    /// Waiting requests before 503 (OLLAMA_MAX_QUEUE).
    #[arg(long, default_value_t = 512, requires = "realistic")]
    max_queue: usize,
    /// Resident models at most (OLLAMA_MAX_LOADED_MODELS).
    #[arg(long, default_value_t = 1, requires = "realistic")]
    max_loaded: usize,
    /// Seconds an idle model stays resident; negative: forever (OLLAMA_KEEP_ALIVE).
    #[arg(
        long,
        default_value_t = 300.0,
        allow_negative_numbers = true,
        requires = "realistic"
    )]
    keep_alive_s: f64,
    /// The default context window, in tokens (OLLAMA_CONTEXT_LENGTH).
    #[arg(long, default_value_t = 4096, requires = "realistic")]
    num_ctx: u32,
    /// Seconds to load a model.
    #[arg(long, default_value_t = 3.0, requires = "realistic")]
    load_s: f64,
    /// Prompt processing rate, tokens per second.
    #[arg(long, default_value_t = 1500.0, requires = "realistic")]
    prompt_tps: f64,
    /// Generation rate, tokens per second.
    #[arg(long, default_value_t = 80.0, requires = "realistic")]
    eval_tps: f64,
    /// How much faster than life the machine runs (it reports the durations it took).
    #[arg(long, default_value_t = 1.0, requires = "realistic")]
    time_scale: f64,
    /// Shortest and longest ordinary answer, in tokens.
    #[arg(long, num_args = 2, value_names = ["MIN", "MAX"], default_values_t = [120, 400], requires = "realistic")]
    answer_tokens: Vec<usize>,
    /// Evict the least recently used idle model, not the one Ollama's scheduler picks
    /// (the idle model whose last request set the shortest keep-alive, then the first by
    /// model file path).
    #[arg(long, requires = "realistic")]
    lru_eviction: bool,
}

impl Args {
    fn realism(&self) -> anyhow::Result<Option<Realism>> {
        if !self.realistic {
            return Ok(None);
        }
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(anyhow::anyhow!(
                    "--{name} must be a positive number, not {v}"
                ))
            }
        };
        let keep_alive = if self.keep_alive_s < 0.0 {
            KeepAlive::Forever
        } else {
            KeepAlive::For(Duration::try_from_secs_f64(self.keep_alive_s)?)
        };
        let (min, max) = match self.answer_tokens.as_slice() {
            [min, max] if min <= max => (*min, *max),
            other => anyhow::bail!("--answer-tokens needs MIN <= MAX, not {other:?}"),
        };
        Ok(Some(Realism {
            parallel: self.parallel.max(1),
            max_queue: self.max_queue,
            max_loaded: self.max_loaded.max(1),
            keep_alive,
            num_ctx: self.num_ctx.max(1),
            time_scale: positive("time-scale", self.time_scale)?,
            speed: Speed {
                load: Duration::try_from_secs_f64(self.load_s)?,
                prompt_tps: positive("prompt-tps", self.prompt_tps)?,
                eval_tps: positive("eval-tps", self.eval_tps)?,
            },
            answer_tokens: (min, max),
            give_up_within: Realism::default().give_up_within,
            eviction: if self.lru_eviction {
                Eviction::LeastRecentlyUsed
            } else {
                Eviction::Ollama
            },
        }))
    }

    fn config(&self) -> anyhow::Result<FakeLlmConfig> {
        let mut models: Vec<ModelSpec> = self
            .models
            .iter()
            .map(|m| match m.strip_suffix("+tools") {
                Some(name) => ModelSpec::new(name).with_tools(),
                None => ModelSpec::new(m.as_str()),
            })
            .chain(
                self.tools_models
                    .iter()
                    .map(|m| ModelSpec::new(m.as_str()).with_tools()),
            )
            .collect();
        if models.is_empty() {
            models = vec![
                ModelSpec::new("qwen2.5:7b"),
                ModelSpec::new("llama3.1:8b").with_tools(),
            ];
        }
        Ok(FakeLlmConfig {
            models,
            knobs: Knobs {
                latency: Duration::from_millis(self.latency_ms),
                token_delay: Duration::from_millis(self.token_delay_ms),
                tokens: self.tokens,
                record: self.record,
                ..Knobs::default()
            },
            realism: self.realism()?,
            clock_ahead: clock_ahead(self.clock_ahead_s)?,
        })
    }
}

/// `--clock-ahead-s` as a signed duration, to the millisecond.
fn clock_ahead(seconds: f64) -> anyhow::Result<chrono::TimeDelta> {
    let ms = seconds * 1000.0;
    if !ms.is_finite() || ms.abs() > 1e12 {
        anyhow::bail!("--clock-ahead-s must be a number of seconds, not {seconds}");
    }
    Ok(chrono::TimeDelta::milliseconds(ms.round() as i64))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = args.config()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let names: Vec<String> = config
        .models
        .iter()
        .map(|m| {
            if m.tools {
                format!("{} (tools)", m.name)
            } else {
                m.name.clone()
            }
        })
        .collect();
    println!("fake-llm listening on http://{addr}");
    println!("models: {}", names.join(", "));
    if let Some(r) = &config.realism {
        println!(
            "realistic: parallel {}, max loaded {}, num_ctx {}, {} tok/s, {}x faster than life",
            r.parallel, r.max_loaded, r.num_ctx, r.speed.eval_tps, r.time_scale
        );
    }
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(fake_llm::serve(listener, config, shutdown.clone()));
    coordinator::startup::shutdown_signal().await;
    shutdown.cancel();
    server.await??;
    Ok(())
}
