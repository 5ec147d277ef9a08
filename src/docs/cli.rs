//! `coordinator docs ingest|list|forget`: the command-line side of the documents, printing
//! for people. Each opens the store `[store]` names directly, like `coordinator memory`.

use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use super::ingest::{file_key, ingest_paths};
use super::{Collection, DocsConfig};
use crate::config::Config;

/// The `docs` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum DocsCommand {
    /// Ingest Markdown and text files, directories recursively; unchanged files are
    /// skipped, changed ones replaced.
    Ingest {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The collection (default: `[docs] default_collection`); `rag:<collection>` asks it.
        #[arg(long)]
        collection: Option<String>,
        /// Also drop documents whose files are gone from the given directories.
        #[arg(long)]
        sync: bool,
    },
    /// The ingested documents, by collection.
    List {
        #[arg(long)]
        collection: Option<String>,
    },
    /// Forget one file (from `--collection`, or the default one), or a whole collection.
    Forget {
        file: Option<PathBuf>,
        #[arg(long)]
        collection: Option<String>,
    },
}

fn collection(config: &DocsConfig, given: Option<&str>) -> anyhow::Result<Collection> {
    Ok(Collection::parse(
        given.unwrap_or(&config.default_collection),
    )?)
}

/// Runs one `docs` subcommand.
pub async fn run(config: &Config, command: DocsCommand) -> anyhow::Result<()> {
    let store = super::store::open(&config.store)
        .await
        .context("opening the document store")?;
    match command {
        DocsCommand::Ingest {
            paths,
            collection: name,
            sync,
        } => {
            let collection = collection(&config.docs, name.as_deref())?;
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} files  {elapsed_precise}  eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let progress_bar = bar.clone();
            let mut progress = move |done: usize, total: usize| {
                progress_bar.set_length(total as u64);
                progress_bar.set_position(done as u64);
            };
            let report = ingest_paths(
                store.as_ref(),
                &config.docs,
                &collection,
                &paths,
                sync,
                &mut progress,
            )
            .await?;
            bar.finish();
            println!(
                "{collection}: {} added, {} replaced, {} unchanged, {} removed; {} chunks written",
                report.added, report.replaced, report.unchanged, report.removed, report.chunks
            );
            for s in &report.skipped {
                println!("  skipped {s}");
            }
        }
        DocsCommand::List { collection: name } => {
            let wanted = name.as_deref().map(Collection::parse).transpose()?;
            let docs = store.documents(wanted.as_ref()).await?;
            println!(
                "{:<16}  {:>6}  {:<19}  document",
                "collection", "chunks", "ingested_at"
            );
            for d in &docs {
                println!(
                    "{:<16}  {:>6}  {:<19}  {}",
                    d.collection,
                    d.chunks,
                    d.ingested_at.format("%Y-%m-%d %H:%M:%S"),
                    d.display
                );
            }
            println!("{} document(s)", docs.len());
        }
        DocsCommand::Forget {
            file,
            collection: name,
        } => {
            let gone = match (&file, name.as_deref()) {
                (None, None) => {
                    anyhow::bail!("name a FILE, or a whole collection with --collection NAME")
                }
                (None, Some(name)) => store.forget(&Collection::parse(name)?, None).await?,
                (Some(file), name) => {
                    let collection = collection(&config.docs, name)?;
                    store.forget(&collection, Some(&file_key(file))).await?
                }
            };
            println!("{gone} document(s) forgotten");
        }
    }
    Ok(())
}
