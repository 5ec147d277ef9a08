//! The memory eval (`coordinator eval memory FILE.jsonl`): does recall find the right
//! earlier exchange? Each case's exchanges are remembered through the real producer (the
//! same condensing, facts, de-duplication and supersession as a live turn, into a memory
//! of its own held in the process), then its query is recalled with the real scope rules.
//!
//! One JSON object per line (`person` is optional, `default` when left out; a query only
//! ever sees its own person's memory):
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

use std::sync::Arc;

use serde::Deserialize;

use super::embed::Embedder;
use super::extract::ModelExtractor;
use super::store::in_memory::InMemoryStore;
use super::{Memory, MemoryConfig, MemoryError};
use crate::domain::{Person, TaskId, ThreadId};

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
    #[serde(default)]
    pub person: Option<String>,
    pub user: String,
    pub assistant: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub thread: String,
    #[serde(default)]
    pub person: Option<String>,
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
        let people = case
            .exchanges
            .iter()
            .map(|e| &e.person)
            .chain([&case.query.person]);
        for p in people.flatten() {
            Person::parse(p).map_err(|e| format!("line {}: person {p:?}: {e}", n + 1))?;
        }
        let threads = case
            .exchanges
            .iter()
            .map(|e| &e.thread)
            .chain([&case.query.thread]);
        for t in threads {
            ThreadId::parse(t).map_err(|e| format!("line {}: thread {t:?}: {e}", n + 1))?;
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
    let recalled = recall_all(cases, config, embedder, None).await;
    judge(cases, &recalled, &Thresholds::of(config))
}

/// What a recall returned for one case: every candidate with its score, before the
/// thresholds (which [`judge`] applies, so that a sweep needs one recall per case).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The exchange it came from.
    pub exchange: usize,
    pub score: f32,
    pub same_thread: bool,
    pub text: String,
}

/// The thresholds a recall applies after scoring.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub min_score: f32,
    pub cross_thread_min_score: f32,
    pub top_k: usize,
}

impl Thresholds {
    pub fn of(config: &MemoryConfig) -> Self {
        Self {
            min_score: config.min_score,
            cross_thread_min_score: config.cross_thread_min_score,
            top_k: config.top_k,
        }
    }

    /// The exchanges a recall with these thresholds returns, best first.
    fn apply(&self, candidates: &[Candidate]) -> Vec<usize> {
        candidates
            .iter()
            .filter(|c| {
                c.score
                    >= if c.same_thread {
                        self.min_score
                    } else {
                        self.cross_thread_min_score
                    }
            })
            .take(self.top_k)
            .map(|c| c.exchange)
            .collect()
    }
}

/// Every case's candidates under `config`'s scoring, with no thresholds; facts by
/// `extractor` when given, else by the rules.
pub async fn recall_all(
    cases: &[Case],
    config: &MemoryConfig,
    embedder: &Embedder,
    extractor: Option<&ModelExtractor>,
) -> Vec<Vec<Candidate>> {
    let open = MemoryConfig {
        min_score: -1.0,
        cross_thread_min_score: -1.0,
        top_k: 50,
        ..config.clone()
    };
    let mut out = Vec::with_capacity(cases.len());
    for case in cases {
        out.push(recall(case, &open, embedder, extractor).await);
    }
    out
}

/// The exchanges a case expects (empty for a negative case).
fn wanted(case: &Case) -> Vec<usize> {
    match &case.expect {
        Expect::Exchange(i) => vec![*i],
        Expect::Contains(s) => (0..case.exchanges.len())
            .filter(|&i| {
                let e = &case.exchanges[i];
                e.user.contains(s.as_str()) || e.assistant.contains(s.as_str())
            })
            .collect(),
        Expect::None(_) => Vec::new(),
    }
}

/// Scores `recalled` (from [`recall_all`]) against the cases under `thresholds`.
pub fn judge(cases: &[Case], recalled: &[Vec<Candidate>], thresholds: &Thresholds) -> Report {
    let mut report = Report {
        k: thresholds.top_k,
        ..Report::default()
    };
    for (case, candidates) in cases.iter().zip(recalled) {
        let recalled = thresholds.apply(candidates);
        if matches!(case.expect, Expect::None(_)) {
            report.negatives += 1;
            if recalled.is_empty() {
                report.quiet += 1;
            } else {
                report.failed.push(case.id.clone());
            }
            continue;
        }
        let wanted = wanted(case);
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

/// One row of a calibration: a lexical weight and cross-thread threshold, and how the
/// eval fares with them.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub lexical_weight: f32,
    pub cross_thread_min_score: f32,
    pub report: Report,
}

/// Sweeps `[memory] lexical_weight` over `weights` and `cross_thread_min_score` from 0.05
/// from 0.02 to 0.80 in steps of 0.01, every other setting as in `config`. Best first: the most
/// positives at 1 plus quiet negatives, then the most at k, then the higher threshold.
pub async fn calibrate(
    cases: &[Case],
    config: &MemoryConfig,
    embedder: &Embedder,
    extractor: Option<&ModelExtractor>,
    weights: &[f32],
) -> Vec<Calibration> {
    let mut rows = Vec::new();
    for &lexical_weight in weights {
        let scored = MemoryConfig {
            lexical_weight,
            ..config.clone()
        };
        let recalled = recall_all(cases, &scored, embedder, extractor).await;
        for step in 2..=80u8 {
            let cross = f32::from(step) / 100.0;
            let thresholds = Thresholds {
                cross_thread_min_score: cross,
                min_score: config.min_score.min(cross),
                top_k: config.top_k,
            };
            rows.push(Calibration {
                lexical_weight,
                cross_thread_min_score: cross,
                report: judge(cases, &recalled, &thresholds),
            });
        }
    }
    let merit = |r: &Report| (r.hit_at_1 + r.quiet, r.hit_at_k);
    rows.sort_by(|a, b| {
        merit(&b.report).cmp(&merit(&a.report)).then(
            b.cross_thread_min_score
                .total_cmp(&a.cross_thread_min_score),
        )
    });
    rows
}

/// The exchange indices recall returns for a case's query, best first.
async fn recall(
    case: &Case,
    config: &MemoryConfig,
    embedder: &Embedder,
    extractor: Option<&ModelExtractor>,
) -> Vec<Candidate> {
    let person = |p: &Option<String>| {
        p.as_deref()
            .map_or_else(|| Ok(Person::default()), Person::parse)
    };
    let store = Arc::new(InMemoryStore::default());
    let Ok(memory) =
        Memory::open_with(config.clone(), store, embedder.clone(), extractor.cloned()).await
    else {
        return Vec::new();
    };
    let task_ids: Vec<TaskId> = case.exchanges.iter().map(|_| TaskId::new()).collect();
    // Exchanges happened in file order, a minute apart, the last a minute before the query.
    let now = chrono::Utc::now();
    let minutes = i64::try_from(case.exchanges.len()).unwrap_or(0);
    for (n, (e, task_id)) in case.exchanges.iter().zip(&task_ids).enumerate() {
        let Ok(owner) = person(&e.person) else {
            continue;
        };
        let ended_at = now - chrono::Duration::minutes(minutes - i64::try_from(n).unwrap_or(0));
        let remembered = memory
            .remember_exchange(&super::Exchange {
                task_id: *task_id,
                person: &owner,
                thread_id: &e.thread,
                prompt: &e.user,
                response: &e.assistant,
                ended_at,
            })
            .await;
        if let Err(e) = remembered {
            tracing::warn!(case = %case.id, error = %e, "eval exchange not remembered");
        }
    }
    let (Ok(asker), Ok(thread)) = (
        person(&case.query.person),
        ThreadId::parse(&case.query.thread),
    ) else {
        return Vec::new();
    };
    memory
        .recall(&case.query.text, &asker, &thread)
        .await
        .into_iter()
        .filter_map(|hit| {
            Some(Candidate {
                exchange: task_ids.iter().position(|t| *t == hit.item.task_id)?,
                score: hit.score,
                same_thread: hit.same_thread,
                text: hit.item.text,
            })
        })
        .collect()
}
