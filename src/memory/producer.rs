//! The producer side of memory: which finished tasks are remembered, how an exchange is
//! condensed into items, writing one task (after its answer was delivered) and the
//! backfill of every finished task in the task store.

use std::fmt;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::facts::Fact;
use super::policy::{self, Facts};
use super::service::MAX_ITEMS_PER_TASK;
use super::store::{ItemKind, MemoryItem};
use super::{Memory, MemoryError};
use crate::domain::{Person, TaskId, TaskStatus};
use crate::store::{TaskRecord, TaskStore};

/// The longest prompt kept in an exchange item, in characters.
const MAX_PROMPT_CHARS: usize = 500;
/// How much of the answer goes into the exchange item itself.
const ANSWER_HEAD_CHARS: usize = 300;
/// The size of the later answer parts.
const ANSWER_PART_CHARS: usize = 400;
/// The marker the worker puts before tool calls in a recorded response.
const TOOL_CALLS_MARKER: &str = "[tool_calls]";
/// How many finished tasks a backfill reads at a time.
const BACKFILL_PAGE: u32 = 500;

/// Why a task is not remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Queued, running or failed.
    NotDone,
    /// An Open WebUI background task (title, tags, follow-ups, …).
    Internal,
    /// The web, RAG or utility lane: search results and retrieved documents are not
    /// memories (the seed's rule).
    Lane,
    WebSearch,
    /// The turn carried documents Open WebUI retrieved (its RAG template).
    RetrievedContext,
    /// Nothing was answered.
    NoAnswer,
    /// The user asked that this turn not be remembered, or forgot it.
    OptedOut,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotDone => "the task did not finish successfully",
            Self::Internal => "internal task",
            Self::Lane => "web, RAG or utility lane",
            Self::WebSearch => "web search task",
            Self::RetrievedContext => "a turn carrying retrieved documents",
            Self::NoAnswer => "no answer",
            Self::OptedOut => "the user asked not to remember it",
        })
    }
}

/// Whether a finished task may become memory.
pub fn eligibility(task: &TaskRecord) -> Result<(), Skip> {
    if task.status != TaskStatus::Done {
        return Err(Skip::NotDone);
    }
    policy::may_remember(&Facts {
        lane: &task.queue,
        internal_task: task.internal_task.is_some(),
        web_search: task.web_search,
        retrieved_context: false,
        remember: task.remember,
    })?;
    if answer_text(task.response.as_deref()).is_empty() || task.prompt.trim().is_empty() {
        return Err(Skip::NoAnswer);
    }
    Ok(())
}

/// A finished exchange to remember: what the worker holds when it has delivered an
/// answer, or what a backfill reads from the task store.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    pub task_id: TaskId,
    /// Whose exchange it is; the items are theirs alone.
    pub person: &'a Person,
    pub thread_id: &'a str,
    /// The user's original prompt.
    pub prompt: &'a str,
    /// The recorded response (tool calls, if any, after their marker).
    pub response: &'a str,
    /// When the exchange ended.
    pub ended_at: DateTime<Utc>,
}

impl<'a> Exchange<'a> {
    /// A finished task's exchange, as its row records it.
    pub fn of(task: &'a TaskRecord) -> Self {
        Self {
            task_id: task.task_id,
            person: &task.person,
            thread_id: &task.thread_id,
            prompt: &task.prompt,
            response: task.response.as_deref().unwrap_or(""),
            ended_at: task.updated_at,
        }
    }
}

/// The answer without any recorded tool calls.
fn answer_text(response: Option<&str>) -> &str {
    let response = response.unwrap_or("");
    let text = match response.find(TOOL_CALLS_MARKER) {
        Some(at) => &response[..at],
        None => response,
    };
    text.trim()
}

/// One item to be: what it holds, its text and (for a fact) its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub seq: u32,
    pub kind: ItemKind,
    pub text: String,
    pub subject: Option<String>,
}

/// Where a task's facts start among its items' positions: after the exchange and the
/// answer parts, whatever their number, so that a backfill can tell which are stored.
pub(super) const FACT_SEQ: u32 = MAX_ITEMS_PER_TASK as u32;

/// An exchange as memory, without its facts: the first piece (`exchange`) holds the prompt
/// and the start of the answer; a long answer adds `answer` parts, up to four pieces.
pub fn condense(prompt: &str, answer: &str) -> Vec<Piece> {
    let prompt = flatten(prompt);
    let answer = flatten(answer);
    let (head, rest) = split_at_sentence(&answer, ANSWER_HEAD_CHARS);
    let piece = |seq: usize, kind, text| Piece {
        seq: u32::try_from(seq).unwrap_or(u32::MAX),
        kind,
        text,
        subject: None,
    };
    let mut items = vec![piece(
        0,
        ItemKind::Exchange,
        format!("{}\n{}", truncate(&prompt, MAX_PROMPT_CHARS), head),
    )];
    let mut rest = rest;
    while !rest.is_empty() && items.len() < MAX_ITEMS_PER_TASK {
        let (part, more) = split_at_sentence(rest, ANSWER_PART_CHARS);
        items.push(piece(items.len(), ItemKind::Answer, part.to_owned()));
        rest = more;
    }
    items
}

/// Facts as pieces, numbered from [`FACT_SEQ`].
pub fn fact_pieces(facts: Vec<Fact>) -> Vec<Piece> {
    facts
        .into_iter()
        .zip(FACT_SEQ..)
        .map(|(f, seq)| Piece {
            seq,
            kind: ItemKind::Fact,
            text: f.text,
            subject: f.subject,
        })
        .collect()
}

/// Whitespace runs as single spaces, and no whitespace at either end.
pub fn flatten(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in super::context::words_of(text) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Splits after the last sentence end within `max` characters (or at `max`).
fn split_at_sentence(text: &str, max: usize) -> (&str, &str) {
    let Some((limit, _)) = text.char_indices().nth(max) else {
        return (text, "");
    };
    let window = &text[..limit];
    let cut = window
        .char_indices()
        .rev()
        .map(|(i, c)| (i + c.len_utf8(), c))
        .find(|&(end, c)| {
            matches!(c, '。' | '！' | '？' | '.' | '!' | '?' | '\n') && end * 2 >= limit
        })
        .map_or(limit, |(end, _)| end);
    (text[..cut].trim(), text[cut..].trim())
}

/// What a backfill did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackfillReport {
    /// Finished tasks read from the store.
    pub scanned: usize,
    /// Tasks that are never remembered (web, RAG, internal, opted out, …).
    pub excluded: usize,
    /// Tasks whose memory (from the active embedder) was already complete.
    pub already: usize,
    /// Tasks written now, and their items.
    pub remembered: usize,
    pub items: usize,
}

impl Memory {
    /// Remembers one finished task, if it may be remembered: condenses, embeds and
    /// writes it. Returns how many items were written (0 for excluded or known tasks).
    /// Call it after the answer was delivered, off the request's critical path.
    pub async fn remember_task(&self, task: &TaskRecord) -> Result<usize, MemoryError> {
        if let Err(skip) = eligibility(task) {
            tracing::debug!(task_id = %task.task_id, reason = %skip, "task not remembered");
            return Ok(0);
        }
        self.remember_exchange(&Exchange::of(task)).await
    }

    /// Remembers one exchange that [`may_remember`] allowed: condenses, embeds and writes
    /// it. Returns how many items were written (0 when there is no answer or the thread
    /// already holds the same exchange).
    pub async fn remember_exchange(&self, exchange: &Exchange<'_>) -> Result<usize, MemoryError> {
        if !self.inner.config.enabled {
            return Ok(0);
        }
        let answer = answer_text(Some(exchange.response));
        if answer.is_empty() || exchange.prompt.trim().is_empty() {
            tracing::debug!(task_id = %exchange.task_id, reason = %Skip::NoAnswer, "task not remembered");
            return Ok(0);
        }
        self.remember_missing(exchange, answer, &[]).await
    }

    /// Remembers the pieces of `exchange` whose positions are not in `stored` (what the
    /// store already holds of its task): the exchange and answer parts, and its facts
    /// unless some are stored. Nothing the person's memory already says is added twice:
    /// the same exchange in the same thread, or a fact they told before (unless a newer
    /// fact on its subject came in between: then telling it again makes it current).
    async fn remember_missing(
        &self,
        exchange: &Exchange<'_>,
        answer: &str,
        stored: &[u32],
    ) -> Result<usize, MemoryError> {
        // What the person's memory and the thread already hold decides what is new.
        self.load_thread(exchange.person, exchange.thread_id)
            .await?;
        let mut pieces = condense(exchange.prompt, answer);
        let before = pieces.len();
        pieces.retain(|p| {
            !stored.contains(&p.seq)
                && !self.holds(exchange.person, exchange.thread_id, p.kind, &p.text)
        });
        // The same exchange again in its thread (a repeated question and its answer) was
        // remembered with its facts already.
        let repeated = stored.is_empty() && pieces.len() < before && pieces.is_empty();
        if !repeated && !stored.iter().any(|s| *s >= FACT_SEQ) {
            let mut facts = self.facts_of(exchange.prompt).await;
            // A change ("I ditched the Nighthawk") supersedes the earlier fact it names.
            for fact in facts
                .iter_mut()
                .filter(|f| f.subject.is_none() && super::facts::is_change(&f.text))
            {
                fact.subject = self.subject_named(exchange.person, &fact.text);
            }
            pieces.extend(
                fact_pieces(facts)
                    .into_iter()
                    .filter(|p| !self.holds(exchange.person, exchange.thread_id, p.kind, &p.text)),
            );
        }
        self.store_pieces(exchange, pieces).await
    }

    /// Whether `person`'s memory already holds a piece like this one: an exchange or
    /// answer part with this text in `thread`, or a current fact saying this (in any
    /// thread). Asked before embedding (to embed nothing twice) and again under the write
    /// lock (where it decides).
    fn holds(&self, person: &Person, thread: &str, kind: ItemKind, text: &str) -> bool {
        match kind {
            ItemKind::Fact => self.knows_fact(person, text),
            ItemKind::Exchange | ItemKind::Answer => self.knows(person, thread, text),
        }
    }

    /// Embeds and writes `pieces` of `exchange`; returns how many were written.
    async fn store_pieces(
        &self,
        exchange: &Exchange<'_>,
        pieces: Vec<Piece>,
    ) -> Result<usize, MemoryError> {
        if pieces.is_empty() {
            return Ok(0);
        }
        let texts: Vec<String> = pieces.iter().map(|p| p.text.clone()).collect();
        let embedded = self.inner.embedder.embed(&texts).await;
        let items = pieces
            .into_iter()
            .zip(embedded.vectors)
            .map(|(piece, vector)| MemoryItem {
                id: Uuid::now_v7(),
                person: exchange.person.clone(),
                thread_id: exchange.thread_id.to_owned(),
                task_id: exchange.task_id,
                seq: piece.seq,
                kind: piece.kind,
                text: piece.text,
                subject: piece.subject,
                superseded_by: None,
                embedder: embedded.embedder.clone(),
                vector,
                created_at: exchange.ended_at,
            })
            .collect::<Vec<_>>();
        // Embedding ran outside the lock; under it, what another turn stored meanwhile is
        // dropped, and the rest is written and indexed before the next turn looks.
        let _writing = self.inner.writing.lock().await;
        let items: Vec<MemoryItem> = items
            .into_iter()
            .filter(|i| !self.holds(&i.person, &i.thread_id, i.kind, &i.text))
            .collect();
        if items.is_empty() {
            return Ok(0);
        }
        let written = self.store_items(items).await?;
        tracing::debug!(task_id = %exchange.task_id, thread_id = %exchange.thread_id, items = written, "task remembered");
        Ok(written)
    }

    /// Feeds every finished task in `tasks` to memory with the same exclusions as the
    /// producer. Idempotent: tasks that already have items of the active embedder are
    /// skipped, and the store ignores duplicates. `progress(done, total)` is called after
    /// each task.
    pub async fn backfill(
        &self,
        tasks: &dyn TaskStore,
        progress: &mut (dyn FnMut(usize, usize) + Send),
    ) -> Result<BackfillReport, MemoryError> {
        self.backfill_in_pages(tasks, BACKFILL_PAGE, progress).await
    }

    /// [`backfill`](Self::backfill), reading `page` tasks at a time.
    pub(crate) async fn backfill_in_pages(
        &self,
        tasks: &dyn TaskStore,
        page: u32,
        progress: &mut (dyn FnMut(usize, usize) + Send),
    ) -> Result<BackfillReport, MemoryError> {
        let mut report = BackfillReport::default();
        if !self.inner.config.enabled {
            return Ok(report);
        }
        // Tasks that finish meanwhile are remembered by the producer as usual.
        let total = usize::try_from(tasks.count(TaskStatus::Done).await?).unwrap_or(usize::MAX);
        let embedder = self.inner.embedder.preferred_id().to_owned();
        let mut after = None;
        loop {
            // Oldest first, as they happened, one page in memory at a time.
            let done = tasks.done_page(after, page).await?;
            let Some(last) = done.last() else { break };
            after = Some((last.created_at, last.task_id));
            for task in &done {
                if eligibility(task).is_err() {
                    report.excluded += 1;
                } else {
                    // A task remembered before facts existed gets its facts now.
                    let stored = self.inner.store.task_seqs(task.task_id, &embedder).await?;
                    let exchange = Exchange::of(task);
                    let answer = answer_text(task.response.as_deref());
                    let items = self.remember_missing(&exchange, answer, &stored).await?;
                    if items > 0 {
                        report.remembered += 1;
                        report.items += items;
                    } else {
                        report.already += 1;
                    }
                }
                report.scanned += 1;
                progress(report.scanned, total.max(report.scanned));
            }
        }
        Ok(report)
    }
}
