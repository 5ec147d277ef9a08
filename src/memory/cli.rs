//! `coordinator memory backfill|list|search|forget` and `coordinator eval memory FILE`:
//! the command-line side of memory, printing for people. Each opens the store `[store]`
//! names directly, like `coordinator tasks`.

use std::path::Path;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use uuid::Uuid;

use super::embed::Embedder;
use super::{Memory, MemoryHit, MemoryItem};
use crate::backend::Backend;
use crate::config::Config;
use crate::domain::{Person, ThreadId};

/// The backends `[memory] embedding_model` may be served by (none needed otherwise).
fn backends(config: &Config) -> Vec<Backend> {
    if config.memory.embedding_model.is_none() {
        return Vec::new();
    }
    config
        .effective_backends()
        .iter()
        .filter_map(|b| match Backend::from_config(b, &config.timeouts) {
            Ok(backend) => Some(backend),
            Err(e) => {
                tracing::warn!(backend = %b.name, error = %e, "backend skipped for embeddings");
                None
            }
        })
        .collect()
}

async fn open(config: &Config) -> anyhow::Result<Memory> {
    Memory::from_config(config, &backends(config))
        .await
        .context("opening memory")
}

fn thread(id: Option<&str>) -> anyhow::Result<Option<ThreadId>> {
    id.map(ThreadId::parse).transpose().context("thread id")
}

/// Feeds every finished task in the store to memory, with a progress bar.
pub async fn run_backfill(config: &Config) -> anyhow::Result<()> {
    let tasks = crate::startup::open_store(config).await?;
    let memory = open(config).await?;
    if !memory.config().enabled {
        println!("memory is disabled ([memory] enabled = false); nothing to do");
        return Ok(());
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} tasks  {elapsed_precise}  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress_bar = bar.clone();
    let mut progress = move |done: usize, total: usize| {
        progress_bar.set_length(total as u64);
        progress_bar.set_position(done as u64);
    };
    let report = memory.backfill(tasks.as_ref(), &mut progress).await?;
    bar.finish();
    println!(
        "{} finished tasks: {} remembered now ({} items), {} already remembered, {} excluded (web, RAG, internal, opted out)",
        report.scanned, report.remembered, report.items, report.already, report.excluded
    );
    Ok(())
}

/// Whose memories and which thread a command is about (everyone's and every thread when
/// not given: the command line reads the store as an admin).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub person: Option<Person>,
    pub thread: Option<ThreadId>,
}

impl Scope {
    pub fn of(person: Option<&str>, thread_id: Option<&str>) -> anyhow::Result<Self> {
        Ok(Self {
            person: person.map(Person::parse).transpose()?,
            thread: thread(thread_id)?,
        })
    }
}

/// Prints stored memories, newest first.
pub async fn run_list(config: &Config, scope: &Scope, limit: u32) -> anyhow::Result<()> {
    let memory = open(config).await?;
    let items = memory
        .list(scope.person.as_ref(), scope.thread.as_ref(), limit)
        .await?;
    println!(
        "{:<36}  {:<19}  {:<16}  {:<24}  {:<9}  text",
        "id", "created_at", "person", "thread", "kind"
    );
    for item in &items {
        print_item(item, None);
    }
    println!("{} item(s)", items.len());
    Ok(())
}

/// Prints the memories most similar to `query`, with their scores.
pub async fn run_search(
    config: &Config,
    query: &str,
    scope: &Scope,
    limit: usize,
) -> anyhow::Result<()> {
    let memory = open(config).await?;
    let hits: Vec<MemoryHit> = memory
        .search(query, scope.person.as_ref(), scope.thread.as_ref(), limit)
        .await?;
    println!(
        "{:<6}  {:<36}  {:<19}  {:<16}  {:<24}  {:<9}  text",
        "score", "id", "created_at", "person", "thread", "kind"
    );
    for hit in &hits {
        print_item(&hit.item, Some(hit.score));
    }
    println!("{} hit(s)", hits.len());
    Ok(())
}

/// Forgets one item (`id`) or a whole thread (the scope's), of the scope's person or
/// anyone's.
pub async fn run_forget(config: &Config, id: Option<&str>, scope: &Scope) -> anyhow::Result<()> {
    let memory = open(config).await?;
    let person = scope.person.as_ref();
    match (id, &scope.thread) {
        (Some(id), None) => {
            let id = Uuid::parse_str(id).context("memory id")?;
            if memory.forget(id, person).await? {
                println!("forgot {id}");
            } else {
                anyhow::bail!("no memory {id}");
            }
        }
        (None, Some(t)) => {
            let n = memory.forget_thread(person, t).await?;
            println!("forgot {n} item(s) of thread {t}");
        }
        _ => anyhow::bail!("give either a memory id or --thread, not both"),
    }
    Ok(())
}

/// Runs the memory eval in `path` and prints hit@1 and hit@k; with `explain`, what recall
/// found for each failed case; with `calibrate`, the best thresholds and weights.
pub async fn run_eval(
    config: &Config,
    path: &Path,
    explain: bool,
    calibrate: bool,
) -> anyhow::Result<()> {
    use super::eval;
    let backends = backends(config);
    let embedder = Embedder::from_config(&config.memory, &backends);
    let extractor = super::extract::ModelExtractor::from_config(&config.memory, &backends);
    let cases = eval::load(path)?;
    println!(
        "memory eval {} ({} cases; embedder {}, facts by {}, scope {:?}, top_k {}, \
         lexical_weight {}, cross_thread_min_score {})",
        path.display(),
        cases.len(),
        embedder.preferred_id(),
        extractor
            .as_ref()
            .map_or_else(|| "the rules".to_owned(), |e| e.model().to_string()),
        config.memory.scope,
        config.memory.top_k,
        config.memory.lexical_weight,
        config.memory.cross_thread_min_score,
    );
    let recalled = eval::recall_all(&cases, &config.memory, &embedder, extractor.as_ref()).await;
    let thresholds = eval::Thresholds::of(&config.memory);
    let report = eval::judge(&cases, &recalled, &thresholds);
    print!("{report}");
    if explain {
        for (case, candidates) in cases.iter().zip(&recalled) {
            if !report.failed.contains(&case.id) {
                continue;
            }
            println!(
                "\n{}: {:?} (expect {:?})",
                case.id, case.query.text, case.expect
            );
            for c in candidates.iter().take(5) {
                let text: String = c.text.split_whitespace().collect::<Vec<_>>().join(" ");
                let short: String = text.chars().take(90).collect();
                let thread = if c.same_thread { "same" } else { "other" };
                println!("  {:.3}  #{} {thread:<5}  {short}", c.score, c.exchange);
            }
        }
    }
    if calibrate {
        let weights = [0.0, 0.25, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0];
        let rows = eval::calibrate(
            &cases,
            &config.memory,
            &embedder,
            extractor.as_ref(),
            &weights,
        )
        .await;
        println!("\nbest settings (lexical_weight, cross_thread_min_score):");
        for row in rows.iter().take(10) {
            print!(
                "  {:.2}  {:.2}  {}",
                row.lexical_weight, row.cross_thread_min_score, row.report
            );
        }
    }
    Ok(())
}

fn print_item(item: &MemoryItem, score: Option<f32>) {
    let text: String = item.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = text.chars().take(80).collect();
    let ellipsis = if text.chars().count() > 80 { "…" } else { "" };
    if let Some(s) = score {
        print!("{s:<6.3}  ");
    }
    // A superseded fact is shown as such: it is kept, but no longer recalled.
    let kind = match item.superseded_by {
        Some(_) => "fact, old".to_owned(),
        None => item.kind.to_string(),
    };
    println!(
        "{:<36}  {:<19}  {:<16}  {:<24}  {kind:<9}  {short}{ellipsis}",
        item.id,
        item.created_at.format("%Y-%m-%d %H:%M:%S"),
        item.person,
        item.thread_id,
    );
}
