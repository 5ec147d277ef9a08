//! A store like a household's after years of use, for the big-store benchmark
//! (`scripts/bench.sh bigstore`, docs/BENCHMARKS.md): a million tasks of about ten people
//! in many threads over some years, and a hundred thousand memory items made from them the
//! way memory makes them (condensed exchanges and answer parts, facts by the rules, the
//! built-in embedder's vectors), spread over the whole history.
//!
//! Rows are written straight into the SQLite file with the columns the store's own writer
//! fills, in transactions of many thousand rows and without syncing (a seed that a crash
//! interrupts is simply made again), so a million tasks take minutes. Every task has ended
//! (done, failed or cancelled): a store with unfinished tasks would be recovered at start,
//! which is another benchmark.

pub mod text;

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use rusqlite::{Connection, Transaction, params};

use self::text::Rng;
use crate::memory::embed::HashEmbedder;
use crate::memory::facts;
use crate::memory::store::{ItemKind, encode_vector};
use crate::memory::{Piece, condense, fact_pieces};

/// What to seed.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tasks: u64,
    pub memories: u64,
    /// The first is `default`, the person of a household without keys (and of the
    /// benchmark's requests).
    pub people: usize,
    pub years: u32,
    pub seed: u64,
}

/// What was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub tasks: u64,
    pub memories: u64,
    pub facts: u64,
    pub threads: u64,
}

/// Rows per transaction.
const BATCH: u64 = 20_000;
/// How many tasks a thread has on average.
const TASKS_PER_THREAD: u64 = 40;
const MODELS: &[&str] = &[
    "qwen2.5:7b",
    "qwen2.5:14b",
    "llama3.1:8b",
    "qwen2.5-coder:7b",
];
const MACHINES: &[&str] = &["moon", "sun", "laptop"];

/// Seeds the store at `path`, which the store's migrations have made and which holds no
/// task yet. `progress(tasks written)` is called after every transaction.
pub fn seed(path: &Path, plan: &Plan, mut progress: impl FnMut(u64)) -> anyhow::Result<Report> {
    anyhow::ensure!(plan.people >= 1, "at least one person is needed");
    anyhow::ensure!(plan.years >= 1, "at least one year of history is needed");
    let mut conn = Connection::open(path)?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;")?;
    let existing: i64 = conn.query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))?;
    anyhow::ensure!(
        existing == 0,
        "{} already holds {existing} tasks: seed a new file",
        path.display()
    );
    let mut household = Household::new(plan);
    let mut report = Report::default();
    let mut written = 0;
    while written < plan.tasks {
        let tx = conn.transaction()?;
        let end = (written + BATCH).min(plan.tasks);
        for i in written..end {
            household.task(&tx, i, &mut report)?;
        }
        tx.commit()?;
        written = end;
        progress(written);
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    report.threads = household.threads;
    Ok(report)
}

/// The people, their threads and what their memory holds so far.
struct Household {
    plan: Plan,
    rng: Rng,
    embedder: HashEmbedder,
    people: Vec<Person>,
    start: DateTime<Utc>,
    /// Milliseconds between two tasks on average.
    step_ms: i64,
    threads: u64,
}

struct Person {
    name: String,
    /// The threads they have open lately, newest last.
    recent: Vec<String>,
    /// Each fact's key and its subject, and each subject's current fact key, as memory
    /// keeps them: a fact told again while current is not stored twice.
    facts: HashMap<String, Option<String>>,
    current: HashMap<String, String>,
}

impl Household {
    fn new(plan: &Plan) -> Self {
        let end = Utc::now() - Duration::days(1);
        let span = Duration::days(365 * i64::from(plan.years));
        let names = [
            "default", "aiko", "ben", "chika", "dan", "emi", "finn", "goro", "hana",
        ];
        let people = (0..plan.people)
            .map(|i| Person {
                name: match names.get(i) {
                    Some(n) => (*n).to_owned(),
                    None => format!("person{i}"),
                },
                recent: Vec::new(),
                facts: HashMap::new(),
                current: HashMap::new(),
            })
            .collect();
        Self {
            rng: Rng::new(plan.seed),
            embedder: HashEmbedder,
            people,
            start: end - span,
            step_ms: span.num_milliseconds() / i64::try_from(plan.tasks.max(1)).unwrap_or(1),
            threads: 0,
            plan: plan.clone(),
        }
    }

    /// Writes task `i` and, when memory is due, its items.
    fn task(&mut self, tx: &Transaction<'_>, i: u64, report: &mut Report) -> anyhow::Result<()> {
        let rng = &mut self.rng;
        let created = self.start
            + Duration::milliseconds(self.step_ms * i64::try_from(i)? + rng.below(1_000) as i64);
        // The first people talk more than the last (the smaller of two draws).
        let n = self.people.len() as u64;
        let who = rng.below(n).min(rng.below(n)) as usize;
        let thread = self.thread(who);
        let rng = &mut self.rng;
        let roll = rng.below(1_000);
        let title = roll < 80;
        let (prompt, answer) = if title {
            text::title(rng)
        } else {
            let (p, ja) = text::prompt(rng);
            let a = text::answer(rng, ja);
            (p, a)
        };
        let status = match roll {
            80..=94 => "failed",
            95..=109 => "cancelled",
            _ => "done",
        };
        let model = rng.pick(MODELS);
        let machine = rng.pick(MACHINES);
        let first_token_ms = 150 + rng.below(3_000) as i64;
        let completion_tokens = (answer.len() / 4) as i64;
        let total_ms = first_token_ms + completion_tokens * (15 + rng.below(30) as i64);
        let ended = created + Duration::milliseconds(total_ms);
        let mut id_bytes = [0u8; 10];
        id_bytes.iter_mut().for_each(|b| *b = rng.below(256) as u8);
        let millis = u64::try_from(created.timestamp_millis())?;
        let task_id = uuid::Builder::from_unix_timestamp_millis(millis, &id_bytes).into_uuid();
        let mut cut = answer.len() / 3;
        while !answer.is_char_boundary(cut) {
            cut -= 1;
        }
        let (response, error) = match status {
            "failed" => (
                None,
                Some(format!(
                    "{machine}: the backend failed before the first token (connection refused)"
                )),
            ),
            "cancelled" => (
                Some(&answer[..cut]),
                Some(format!(
                    "task {task_id} was cancelled: the client went away"
                )),
            ),
            _ => (Some(answer.as_str()), None),
        };
        let domain = if prompt.contains("Rust") || prompt.contains("Python") {
            "code"
        } else {
            "general"
        };
        let reasons =
            format!("[\"domain {domain} by rule\",\"model {model} named by the client\"]");
        tx.prepare_cached(
            "INSERT INTO tasks (task_id, created_at, updated_at, thread_id, prompt, domain, model, \
             worker_id, queue, status, response, error, internal_task, web_search, reasons, attempts, \
             queue_wait_ms, first_token_ms, total_ms, prompt_tokens, completion_tokens, remember, person, \
             history_dropped, memory_dropped, estimated_prompt_tokens, num_ctx, priority) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 1, ?, ?, ?, ?, ?, 1, ?, 0, 0, ?, ?, ?)",
        )?
        .execute(params![
            task_id.to_string(),
            ts(&created),
            ts(&ended),
            thread,
            prompt,
            domain,
            model,
            machine,
            format!("tasks:llm:{model}"),
            status,
            response,
            error,
            title.then_some("title_generation"),
            reasons,
            rng.below(40) as i64,
            first_token_ms,
            total_ms,
            (prompt.len() / 4 + 30) as i64,
            completion_tokens,
            self.people[who].name,
            (prompt.len() / 4 + 30) as i64,
            4096,
            if title { "background" } else { "interactive" },
        ])?;
        report.tasks += 1;
        // Memory spread evenly over the years: remember this task when the items so far
        // are behind the share of the history written so far.
        let due = self.plan.memories * (i + 1) / self.plan.tasks.max(1);
        if status == "done" && !title && report.memories < due {
            let pieces = self.pieces(who, &prompt, &answer);
            self.remember(tx, who, &thread, task_id, &ended, pieces, report)?;
        }
        Ok(())
    }

    /// The thread of `who`'s next task: mostly one of their latest, now and then a new one.
    fn thread(&mut self, who: usize) -> String {
        let rng = &mut self.rng;
        let person = &mut self.people[who];
        if person.recent.is_empty() || rng.below(TASKS_PER_THREAD) == 0 {
            let id = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
            person.recent.push(id);
            if person.recent.len() > 20 {
                person.recent.remove(0);
            }
            self.threads += 1;
        }
        let n = person.recent.len() as u64;
        // The newest thread most of the time.
        let back = if rng.below(10) < 7 { 0 } else { rng.below(n) };
        person.recent[(n - 1 - back) as usize].clone()
    }

    /// What memory makes of an exchange: its condensed pieces and the facts not already
    /// current for the person.
    fn pieces(&mut self, who: usize, prompt: &str, answer: &str) -> Vec<Piece> {
        let mut pieces = condense(prompt, answer);
        let person = &mut self.people[who];
        let mut new_facts = Vec::new();
        for fact in facts::extract(prompt) {
            let key = facts::fact_key(&fact.text);
            let current = match person.facts.get(&key) {
                Some(Some(subject)) => person.current.get(subject) == Some(&key),
                Some(None) => true,
                None => false,
            };
            if current {
                continue;
            }
            person.facts.insert(key.clone(), fact.subject.clone());
            if let Some(subject) = &fact.subject {
                person.current.insert(subject.clone(), key);
            }
            new_facts.push(fact);
        }
        pieces.extend(fact_pieces(new_facts));
        pieces
    }

    #[allow(clippy::too_many_arguments)]
    fn remember(
        &mut self,
        tx: &Transaction<'_>,
        who: usize,
        thread: &str,
        task_id: uuid::Uuid,
        at: &DateTime<Utc>,
        pieces: Vec<Piece>,
        report: &mut Report,
    ) -> anyhow::Result<()> {
        let mut insert = tx.prepare_cached(
            "INSERT INTO memory_items (id, person, thread_id, task_id, seq, kind, text, subject, \
             embedder, dim, vector, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )?;
        for piece in pieces {
            if report.memories >= self.plan.memories {
                break;
            }
            let vector = self.embedder.embed(&piece.text);
            let mut id_bytes = [0u8; 10];
            id_bytes
                .iter_mut()
                .for_each(|b| *b = self.rng.below(256) as u8);
            let millis = u64::try_from(at.timestamp_millis())?;
            let id = uuid::Builder::from_unix_timestamp_millis(millis, &id_bytes).into_uuid();
            insert.execute(params![
                id.to_string(),
                self.people[who].name,
                thread,
                task_id.to_string(),
                piece.seq,
                piece.kind.as_str(),
                piece.text,
                piece.subject,
                HashEmbedder::ID,
                vector.len() as i64,
                encode_vector(&vector),
                ts(at),
            ])?;
            report.memories += 1;
            if piece.kind == ItemKind::Fact {
                report.facts += 1;
            }
        }
        Ok(())
    }
}

/// A time as the store writes it.
fn ts(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, false)
}

/// Seeds a fresh store file at `path` (the store's migrations first); prints progress.
pub async fn seed_file(path: &Path, plan: &Plan) -> anyhow::Result<(Report, f64)> {
    anyhow::ensure!(
        !path.exists(),
        "{} exists: the big store is seeded into a new file",
        path.display()
    );
    drop(crate::store::sqlite::SqliteStore::open(path).await?);
    let started = Instant::now();
    let (path, plan) = (path.to_owned(), plan.clone());
    let report = tokio::task::spawn_blocking(move || {
        seed(&path, &plan, |n| {
            eprintln!("[bigstore] {n} of {} tasks", plan.tasks)
        })
    })
    .await??;
    Ok((report, started.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests;
