//! `bench-household`: the household benchmark (docs/BENCHMARKS.md, "Household benchmark").
//! Several people chat at once through Open WebUI-like sessions with three simulated home
//! machines; the same workload runs four times, each from fresh machines: random,
//! round-robin and least-busy choice by the client, then Coordinator in this process. Prints
//! one markdown table (and writes it to `--out`).
//!
//! `cargo run --release --features testkit --bin bench-household -- --seed 1 --scale 10`

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use coordinator::testkit::household::{self, Options, route::RowKind, table};

#[derive(Debug, Parser)]
#[command(
    name = "bench-household",
    about = "Several people, three simulated home machines: four ways to route, one table"
)]
struct Args {
    /// Seeds the workload (prompts, think times, Stop points) and the random row's draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How much faster than life the machines and people run.
    #[arg(long, default_value_t = 10.0)]
    scale: f64,
    /// How many people chat at once.
    #[arg(long, default_value_t = 4)]
    people: usize,
    /// Also write the report to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Add every user turn of every row: the machine, its wait and load, the prompt.
    #[arg(long)]
    turns: bool,
    /// Run only these rows, in this order (comma-separated: random, round-robin,
    /// least-busy, coordinator, coordinator-warm); all five when not given.
    #[arg(long, value_delimiter = ',')]
    rows: Vec<RowKind>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.scale > 0.0, "--scale must be positive");
    anyhow::ensure!(args.people > 0, "--people must be at least 1");
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let options = Options {
        seed: args.seed,
        scale: args.scale,
        people: args.people,
    };
    let kinds = if args.rows.is_empty() {
        RowKind::ALL.to_vec()
    } else {
        args.rows.clone()
    };
    let rows = household::run_rows(options, &kinds).await?;
    let header = format!(
        "Household benchmark, {} UTC, binary of commit {}, seed {}, scale {}, {} people",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        env!("COORDINATOR_COMMIT"),
        args.seed,
        args.scale,
        args.people
    );
    let mut table = table::markdown(&header, &rows);
    let plan = household::workload::Plan::new(args.seed, args.people);
    let baseline = rows.iter().find(|r| r.kind == RowKind::LeastBusy);
    if let Some(bounds) = household::bound::of(&plan, &household::machines::household(), &rows) {
        table.push('\n');
        table.push_str(&household::bound::markdown(&bounds, baseline));
    }
    if args.turns {
        table.push_str("\nUser turns:\n\n");
        table.push_str(&table::turn_markdown(&rows));
    }
    print!("{table}");
    if let Some(out) = &args.out {
        std::fs::write(out, &table).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
