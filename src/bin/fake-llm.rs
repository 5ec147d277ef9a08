//! `fake-llm`: runs the in-repo fake LLM server (Ollama and OpenAI wire formats) for demos
//! and benchmarks, until Ctrl-C or SIGTERM.
//!
//! `fake-llm --listen 127.0.0.1:11434 --model qwen2.5:7b --model llama3.1:8b+tools`
//!
//! The fakes are behind the `testkit` feature, so this binary needs it:
//! `cargo run --release --features testkit --bin fake-llm -- --help`.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use coordinator::testkit::fake_llm::{self, FakeLlmConfig, Knobs, ModelSpec};
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
}

impl Args {
    fn config(&self) -> FakeLlmConfig {
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
        FakeLlmConfig {
            models,
            knobs: Knobs {
                latency: Duration::from_millis(self.latency_ms),
                token_delay: Duration::from_millis(self.token_delay_ms),
                tokens: self.tokens,
                record: self.record,
                ..Knobs::default()
            },
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = args.config();
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
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(fake_llm::serve(listener, config, shutdown.clone()));
    coordinator::startup::shutdown_signal().await;
    shutdown.cancel();
    server.await??;
    Ok(())
}
