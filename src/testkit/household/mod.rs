//! The household benchmark (`bench-household`, `scripts/bench.sh household`): several
//! people chatting at once through Open WebUI-like sessions with three home machines that
//! behave like Ollama on real hardware (the fake's realistic mode), measured five ways in
//! one run, each row from fresh machines: the client choosing a machine itself (random,
//! round-robin, least-busy) and Coordinator on its default configuration, once on a fresh
//! store and once on the store a day of use left (the same people, other prompts).
//!
//! - [`machines`]: the three machines and their speeds;
//! - [`workload`]: the people and their turns, drawn from the seed;
//! - [`route`]: the rows' choice of machine;
//! - [`session`]: one person's session over HTTP;
//! - [`coordinator`]: Coordinator in this process;
//! - [`report`]: the numbers; [`table`]: the markdown;
//! - [`bound`]: what no placement can beat.
//!
//! docs/BENCHMARKS.md ("Household benchmark") says how to read the table.

pub mod bound;
pub mod coordinator;
pub mod machines;
pub mod report;
pub mod route;
pub mod session;
pub mod table;
pub mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::testkit::fake_llm::FakeLlmServer;
use coordinator::InProcess;
use machines::Machine;
use report::RowReport;
use route::{Chooser, Policy, Route, RowKind, Url};
use session::Context;
use workload::Plan;

/// The longest one request may take, in life time: Open WebUI's default client timeout
/// (`AIOHTTP_CLIENT_TIMEOUT`, 300 s).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the machines may take to record what clients left behind, in wall time.
const DRAIN: Duration = Duration::from_secs(5);

/// What a run varies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    pub seed: u64,
    /// Life seconds per wall second (10: ten times faster than life).
    pub scale: f64,
    pub people: usize,
}

/// Runs every row, one after another, each from fresh machines.
pub async fn run(options: Options) -> anyhow::Result<Vec<RowReport>> {
    run_rows(options, &RowKind::ALL).await
}

/// Runs `kinds` in the order given, each from fresh machines: the same plan, so a row's
/// figures do not depend on which others run.
pub async fn run_rows(options: Options, kinds: &[RowKind]) -> anyhow::Result<Vec<RowReport>> {
    let plan = Plan::new(options.seed, options.people);
    let mut rows = Vec::with_capacity(kinds.len());
    for &kind in kinds {
        rows.push(
            run_row(kind, &plan, options)
                .await
                .with_context(|| format!("row {kind}"))?,
        );
    }
    Ok(rows)
}

/// The seed of the day before, for [`RowKind::CoordinatorWarm`]: other prompts, think
/// times and Stop points, the same people and machines.
const YESTERDAY: u64 = 0x9E37_79B9;

/// One row: fresh machines, the plan's sessions all at once, then the machines' records.
pub async fn run_row(kind: RowKind, plan: &Plan, options: Options) -> anyhow::Result<RowReport> {
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .context("building the HTTP client")?;
    let store = match kind {
        RowKind::CoordinatorWarm => {
            let yesterday = Plan::new(options.seed ^ YESTERDAY, plan.people.len());
            Some(a_day_before(&yesterday, options, &http).await?)
        }
        _ => None,
    };
    run_on_fresh_machines(kind, plan, options, &http, store).await
}

/// Runs `plan` through Coordinator on fresh machines and stops it; returns its store's
/// directory, kept.
async fn a_day_before(
    plan: &Plan,
    options: Options,
    http: &reqwest::Client,
) -> anyhow::Result<std::path::PathBuf> {
    let household = machines::household();
    let fakes = spawn_all(&household, options).await?;
    let c = start_coordinator(&household, &fakes, http, None).await?;
    let ctx = Arc::new(Context {
        http: http.clone(),
        route: Route::Coordinator(c.base_url().to_owned()),
        scale: options.scale,
        timeout: REQUEST_TIMEOUT.div_f64(options.scale),
    });
    futures::future::join_all(
        plan.people
            .iter()
            .map(|person| session::run(ctx.clone(), person.clone())),
    )
    .await;
    c.drained(http).await?;
    let dir = c.stop_keeping().await?;
    for fake in fakes {
        fake.shutdown().await?;
    }
    Ok(dir)
}

async fn spawn_all(household: &[Machine], options: Options) -> anyhow::Result<Vec<FakeLlmServer>> {
    let mut fakes = Vec::with_capacity(household.len());
    for machine in household {
        fakes.push(machine.spawn(options.scale).await?);
    }
    Ok(fakes)
}

/// [`run_row`] once any day before has run: Coordinator rows start on `store` when given.
async fn run_on_fresh_machines(
    kind: RowKind,
    plan: &Plan,
    options: Options,
    http: &reqwest::Client,
    store: Option<std::path::PathBuf>,
) -> anyhow::Result<RowReport> {
    let household = machines::household();
    let fakes = spawn_all(&household, options).await?;
    let policy = match kind {
        RowKind::Random => Some(Policy::Random { seed: options.seed }),
        RowKind::RoundRobin => Some(Policy::RoundRobin),
        RowKind::LeastBusy => Some(Policy::LeastBusy),
        RowKind::Coordinator | RowKind::CoordinatorWarm => None,
    };
    let (route, coordinator) = match policy {
        Some(policy) => (direct(policy, &household, &fakes), None),
        None => {
            let c = start_coordinator(&household, &fakes, http, store).await?;
            (Route::Coordinator(c.base_url().to_owned()), Some(c))
        }
    };
    let http = http.clone();
    let ctx = Arc::new(Context {
        http: http.clone(),
        route,
        scale: options.scale,
        timeout: REQUEST_TIMEOUT.div_f64(options.scale),
    });
    let started = Instant::now();
    let sessions = futures::future::join_all(
        plan.people
            .iter()
            .map(|person| session::run(ctx.clone(), person.clone())),
    )
    .await;
    let length = ctx.life(started.elapsed());
    if let Some(c) = coordinator {
        c.drained(&http).await?;
        c.stop().await?;
    }
    let mut records = Vec::with_capacity(fakes.len());
    for (machine, fake) in household.iter().zip(&fakes) {
        settled(fake).await;
        records.push((machine.name.to_owned(), fake.stats(), fake.generations()));
    }
    for fake in fakes {
        fake.shutdown().await?;
    }
    Ok(RowReport::new(kind, length, &sessions, records))
}

fn direct(policy: Policy, household: &[Machine], fakes: &[FakeLlmServer]) -> Route {
    let urls = household
        .iter()
        .zip(fakes)
        .map(|(machine, fake)| Url {
            base: fake.base_url(),
            models: machine.models.iter().map(|m| m.model.to_owned()).collect(),
        })
        .collect();
    Route::Direct(Chooser::new(policy, urls))
}

async fn start_coordinator(
    household: &[Machine],
    fakes: &[FakeLlmServer],
    http: &reqwest::Client,
    store: Option<std::path::PathBuf>,
) -> anyhow::Result<InProcess> {
    let backends: Vec<(&str, String)> = household
        .iter()
        .zip(fakes)
        .map(|(machine, fake)| (machine.name, fake.base_url()))
        .collect();
    let coordinator = match store {
        Some(dir) => InProcess::start_in(dir, &backends).await?,
        None => InProcess::start(&backends).await?,
    };
    let expected: Vec<(&str, Vec<&str>)> = household
        .iter()
        .map(|m| (m.name, m.models.iter().map(|s| s.model).collect()))
        .collect();
    coordinator.discovered(http, &expected).await?;
    Ok(coordinator)
}

/// Waits until every request the machine admitted has its generation recorded (a stopped
/// client's generation ends when the machine notices it left), for at most [`DRAIN`]: a
/// request whose client left while it was still queued never gets one, and the report
/// shows the difference.
async fn settled(fake: &FakeLlmServer) {
    let deadline = Instant::now() + DRAIN;
    while (fake.generations().len() as u64) < fake.stats().requests && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
