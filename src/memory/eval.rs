//! The memory eval (`coordinator eval memory FILE.jsonl`): does recall find the right
//! earlier exchange, with the real condensing, embedder and scope rules?
//!
//! One JSON object per line:
//! ```json
//! {"id": "cat-name", "exchanges": [
//!    {"thread": "A", "user": "私の猫の名前はミケです", "assistant": "かわいい名前ですね。"}],
//!  "query": {"thread": "B", "text": "私の猫の名前は何でしたっけ？"},
//!  "expect": {"exchange": 0}}
//! ```
//! `expect` is `{"exchange": N}` (index into `exchanges`), `{"contains": "text"}` (an
//! exchange whose user or assistant text holds it) or `{"none": true}` (nothing should be
//! recalled). Reported: hit@1 and hit@k over the positive cases, and how many negative
//! cases stayed quiet.

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use uuid::Uuid;

use super::embed::Embedder;
use super::index::Index;
use super::service::{select, standalone_query};
use super::store::MemoryItem;
use super::{MemoryConfig, MemoryError, condense};
use crate::domain::TaskId;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    pub exchanges: Vec<Exchange>,
    pub query: Query,
    pub expect: Expect,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    pub thread: String,
    pub user: String,
    pub assistant: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub thread: String,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Expect {
    Exchange(usize),
    Contains(String),
    None(bool),
}

/// Results over a whole file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub k: usize,
    pub positives: usize,
    pub hit_at_1: usize,
    pub hit_at_k: usize,
    pub negatives: usize,
    /// Negative cases where nothing was recalled.
    pub quiet: usize,
    /// Ids of the cases that failed (positive: not within k; negative: something recalled).
    pub failed: Vec<String>,
}

impl Report {
    pub fn hit_at_1_rate(&self) -> f64 {
        ratio(self.hit_at_1, self.positives)
    }

    pub fn hit_at_k_rate(&self) -> f64 {
        ratio(self.hit_at_k, self.positives)
    }

    pub fn quiet_rate(&self) -> f64 {
        ratio(self.quiet, self.negatives)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "hit@1 {}/{} ({:.1}%)  hit@{} {}/{} ({:.1}%)  quiet on negatives {}/{} ({:.1}%)",
            self.hit_at_1,
            self.positives,
            self.hit_at_1_rate() * 100.0,
            self.k,
            self.hit_at_k,
            self.positives,
            self.hit_at_k_rate() * 100.0,
            self.quiet,
            self.negatives,
            self.quiet_rate() * 100.0,
        )?;
        if !self.failed.is_empty() {
            writeln!(f, "failed: {}", self.failed.join(", "))?;
        }
        Ok(())
    }
}

/// Reads a JSONL file of cases (blank lines and `#` comments allowed).
pub fn load(path: &Path) -> Result<Vec<Case>, MemoryError> {
    let err = |detail: String| MemoryError::Eval {
        path: path.display().to_string(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    parse(&text).map_err(err)
}

/// Parses JSONL cases; the error names the line.
pub fn parse(text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let case: Case = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        if let Expect::Exchange(i) = case.expect
            && i >= case.exchanges.len()
        {
            return Err(format!(
                "line {}: expect.exchange {i} is out of range",
                n + 1
            ));
        }
        cases.push(case);
    }
    Ok(cases)
}

/// Runs every case in `path` with `config`'s scope rules and `embedder`.
pub async fn run(
    path: &Path,
    config: &MemoryConfig,
    embedder: &Embedder,
) -> Result<Report, MemoryError> {
    Ok(run_cases(&load(path)?, config, embedder).await)
}

pub async fn run_cases(cases: &[Case], config: &MemoryConfig, embedder: &Embedder) -> Report {
    let mut report = Report {
        k: config.top_k,
        ..Report::default()
    };
    for case in cases {
        let recalled = recall(case, config, embedder).await;
        let wanted: Vec<usize> = match &case.expect {
            Expect::Exchange(i) => vec![*i],
            Expect::Contains(s) => (0..case.exchanges.len())
                .filter(|&i| {
                    let e = &case.exchanges[i];
                    e.user.contains(s.as_str()) || e.assistant.contains(s.as_str())
                })
                .collect(),
            Expect::None(_) => {
                report.negatives += 1;
                if recalled.is_empty() {
                    report.quiet += 1;
                } else {
                    report.failed.push(case.id.clone());
                }
                continue;
            }
        };
        report.positives += 1;
        let top1 = recalled.first().is_some_and(|r| wanted.contains(r));
        let topk = recalled.iter().any(|r| wanted.contains(r));
        report.hit_at_1 += usize::from(top1);
        report.hit_at_k += usize::from(topk);
        if !topk {
            report.failed.push(case.id.clone());
        }
    }
    report
}

/// The exchange indices recall returns for a case's query, best first.
async fn recall(case: &Case, config: &MemoryConfig, embedder: &Embedder) -> Vec<usize> {
    let mut owners = Vec::new();
    let mut texts = Vec::new();
    for (i, e) in case.exchanges.iter().enumerate() {
        for (seq, (kind, text)) in condense(&e.user, &e.assistant).into_iter().enumerate() {
            owners.push((i, kind, seq));
            texts.push(text);
        }
    }
    let task_ids: Vec<TaskId> = case.exchanges.iter().map(|_| TaskId::new()).collect();
    let embedded = embedder.embed(&texts).await;
    let Some(dim) = embedded.vectors.first().map(Vec::len) else {
        return Vec::new();
    };
    let mut index = Index::new(dim);
    // Exchanges happened in file order, one second apart.
    let start = chrono::Utc::now() - chrono::Duration::hours(1);
    for (n, ((&(owner, kind, seq), text), vector)) in
        owners.iter().zip(texts).zip(embedded.vectors).enumerate()
    {
        index.insert(MemoryItem {
            id: Uuid::now_v7(),
            person: crate::domain::Person::default(),
            thread_id: case.exchanges[owner].thread.clone(),
            task_id: task_ids[owner],
            seq: u32::try_from(seq).unwrap_or(u32::MAX),
            kind: kind.to_owned(),
            text,
            embedder: embedded.embedder.clone(),
            vector,
            created_at: start + chrono::Duration::seconds(i64::try_from(n).unwrap_or(0)),
        });
    }
    let text = standalone_query(&index, &case.query.text, &case.query.thread)
        .unwrap_or_else(|| case.query.text.clone());
    let Some(query) = embedder.embed(&[text]).await.vectors.pop() else {
        return Vec::new();
    };
    select(&index, &query, &case.query.thread, config)
        .into_iter()
        .filter_map(|(s, _)| {
            let task = index.entry(s.slot)?.task_id;
            task_ids.iter().position(|t| *t == task)
        })
        .collect()
}
