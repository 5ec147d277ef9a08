//! `bench-seed`: makes a store like a household's after years of use, for the big-store
//! benchmark (`scripts/bench.sh bigstore`, docs/BENCHMARKS.md): by default a million tasks
//! of ten people over three years and a hundred thousand memory items, seeded, into a new
//! SQLite file.
//!
//! `cargo run --release --features testkit --bin bench-seed -- --path big.db`

use std::path::PathBuf;

use clap::Parser;
use coordinator::testkit::bigstore::{Plan, seed_file};

#[derive(Debug, Parser)]
#[command(
    name = "bench-seed",
    about = "Seeds a store like a household's after years"
)]
struct Args {
    /// The SQLite file to make (it must not exist).
    #[arg(long)]
    path: PathBuf,
    #[arg(long, default_value_t = 1_000_000)]
    tasks: u64,
    #[arg(long, default_value_t = 100_000)]
    memories: u64,
    #[arg(long, default_value_t = 10)]
    people: usize,
    #[arg(long, default_value_t = 3)]
    years: u32,
    /// The same seed makes the same store.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let plan = Plan {
        tasks: args.tasks,
        memories: args.memories,
        people: args.people,
        years: args.years,
        seed: args.seed,
    };
    let (report, seconds) = seed_file(&args.path, &plan).await?;
    let bytes = std::fs::metadata(&args.path)?.len();
    println!(
        "seeded {}: {} tasks, {} memory items ({} facts), {} threads, {} people, {:.1} s, {} MiB",
        args.path.display(),
        report.tasks,
        report.memories,
        report.facts,
        report.threads,
        args.people,
        seconds,
        bytes / (1 << 20)
    );
    Ok(())
}
