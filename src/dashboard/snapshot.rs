//! One picture of the household for the dashboard page and `coordinator status`: the
//! machines (health, models, resident ones and until when, slots, the latest time to first token and
//! tokens/s per model, last error), every waiting task in order per lane (with its place
//! and expected wait, from [`crate::queue::eta`] as `GET /tasks/{id}` has them), the
//! recent tasks, and memory and web figures.
//!
//! Built from the directory (in memory), the queue, and two reads of the store (the
//! recent tasks and the queued ones); [`super::hub`] shares one build among all viewers.
//! Plain strings and numbers: this is what the page and the terminal read.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::backend::registry::WorkerStatus;
use crate::domain::TaskStatus;
use crate::metrics::TaskTimes;
use crate::store::{StoreError, TaskFilter, TaskRecord};

/// How many recent tasks the picture shows.
pub const RECENT: u32 = 50;
/// How many waiting tasks it lists at most (the household's queue is short; a runaway
/// one is cut here, and `queued_total` says how many there were).
pub const WAITING: u32 = 200;
/// The prompt's first characters a row shows.
const PROMPT_HEAD: usize = 80;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub machines: Vec<Machine>,
    /// Waiting tasks, by lane, then by place (1 = next).
    pub queue: Vec<Waiting>,
    /// How many tasks were queued, of which `queue` lists at most [`WAITING`].
    pub queued_total: usize,
    /// Newest first.
    pub recent: Vec<RecentTask>,
    pub memory: Vec<PersonMemory>,
    pub web: WebFigures,
    /// When Coordinator took the picture, on its clock. A viewer reads "waiting 12 s" and
    /// "in 4 min" against it, not against its own clock, which may be set minutes apart
    /// (a phone, a laptop that missed its time sync). Absent from an older Coordinator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub name: String,
    pub kind: String,
    pub healthy: bool,
    pub models: Vec<String>,
    pub resident: Vec<String>,
    /// When each resident model is unloaded unless used meanwhile (Ollama's `/api/ps`),
    /// where known.
    #[serde(default)]
    pub expires_at: BTreeMap<String, DateTime<Utc>>,
    pub in_flight: usize,
    pub slots: usize,
    pub last_error: Option<String>,
    /// The latest finished answer's figures, per model served here.
    pub latest: Vec<ModelFigures>,
    /// How far the machine's clock reads ahead of Coordinator's, in milliseconds
    /// (negative: behind), where known ([`WorkerStatus::clock_ahead_ms`]).
    #[serde(default)]
    pub clock_ahead_ms: Option<i64>,
    /// The line the page and `coordinator status` show for a clock that reads more than
    /// a second from Coordinator's ("clock 30.0 s behind Coordinator's"); none within a
    /// second. Told here, once, so that the two say the same.
    #[serde(default)]
    pub clock_apart: Option<String>,
}

/// The line for a machine whose clock reads `ahead_ms` ahead of Coordinator's (negative:
/// behind), when more than a second (its expiries are shown on Coordinator's clock
/// anyway).
pub fn clock_apart(ahead_ms: Option<i64>) -> Option<String> {
    let ms = ahead_ms.filter(|ms| ms.abs() > 1_000)?;
    let apart = crate::backend::clock::describe(chrono::TimeDelta::milliseconds(ms));
    Some(format!("clock {apart} Coordinator's"))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFigures {
    pub model: String,
    pub ttft_ms: Option<i64>,
    pub tokens_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    pub task_id: String,
    pub lane: String,
    pub position: Option<usize>,
    pub eta_s: Option<u64>,
    pub person: String,
    pub priority: String,
    pub model: String,
    pub queued_at: DateTime<Utc>,
    pub prompt: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecentTask {
    pub task_id: String,
    pub created_at: DateTime<Utc>,
    pub person: String,
    /// The prompt's first words.
    pub prompt: String,
    pub domain: String,
    pub lane: String,
    pub model: String,
    pub machine: Option<String>,
    pub reasons: Vec<String>,
    pub status: String,
    pub internal_task: Option<String>,
    pub first_token_ms: Option<i64>,
    pub total_ms: Option<i64>,
    /// Why the web lane answered without the web, or why the task failed or was cancelled.
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonMemory {
    pub person: String,
    pub items: usize,
}

/// Over the recent tasks: web searches, and the fallbacks by reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WebFigures {
    pub searches: usize,
    pub fallbacks: BTreeMap<String, usize>,
}

/// What a snapshot is made of, read by [`Snapshot::read`] (or given by a test).
pub struct Parts {
    pub statuses: Vec<WorkerStatus>,
    pub recent: Vec<TaskRecord>,
    pub queued: Vec<(TaskRecord, Option<crate::queue::eta::QueueWait>)>,
    pub memory: Vec<(crate::domain::Person, usize)>,
}

impl Snapshot {
    /// Reads the household as it is now.
    pub async fn read(state: &crate::service::AppState) -> Result<Self, StoreError> {
        let recent = state
            .store
            .list(&TaskFilter {
                limit: RECENT,
                ..TaskFilter::default()
            })
            .await?;
        let queued_rows = state
            .store
            .list(&TaskFilter {
                status: Some(TaskStatus::Queued),
                limit: WAITING,
                ..TaskFilter::default()
            })
            .await?;
        let mut queued = Vec::with_capacity(queued_rows.len());
        for task in queued_rows {
            let wait = crate::api::tasks::place(state, &task).await;
            queued.push((task, wait));
        }
        let memory = match &state.memory {
            Some(m) => m.stored_by_person().await?,
            None => Vec::new(),
        };
        Ok(Self::of(Parts {
            statuses: state.directory.statuses(),
            recent,
            queued,
            memory,
        }))
    }

    /// The picture of `parts` (pure: what the tests pin).
    pub fn of(parts: Parts) -> Self {
        let machines = parts
            .statuses
            .iter()
            .map(|s| machine(s, &parts.recent))
            .collect();
        let queued_total = parts.queued.len();
        let mut queue: Vec<Waiting> = parts
            .queued
            .iter()
            .map(|(t, wait)| Waiting {
                task_id: t.task_id.to_string(),
                lane: t.queue.to_string(),
                position: wait.map(|w| w.position),
                eta_s: wait.and_then(|w| w.eta_whole_s()),
                person: t.person.to_string(),
                priority: t.priority.to_string(),
                model: t.model.to_string(),
                queued_at: t.created_at,
                prompt: head(&t.prompt),
            })
            .collect();
        queue.sort_by(|a, b| {
            (&a.lane, a.position.unwrap_or(usize::MAX), a.queued_at).cmp(&(
                &b.lane,
                b.position.unwrap_or(usize::MAX),
                b.queued_at,
            ))
        });
        let mut web = WebFigures::default();
        for t in &parts.recent {
            web.searches += usize::from(t.web_search);
            if let Some(reason) = t.fallback_reason.as_ref().filter(|_| t.fallback_used) {
                *web.fallbacks.entry(reason.clone()).or_default() += 1;
            }
        }
        Self {
            machines,
            queue,
            queued_total,
            recent: parts.recent.iter().map(recent).collect(),
            memory: parts
                .memory
                .into_iter()
                .map(|(p, items)| PersonMemory {
                    person: p.to_string(),
                    items,
                })
                .collect(),
            web,
            taken_at: None,
        }
    }
}

/// One machine, with the latest figures of each of its models from the recent tasks.
fn machine(s: &WorkerStatus, recent: &[TaskRecord]) -> Machine {
    let latest = s
        .models
        .iter()
        .filter_map(|model| {
            let t = recent.iter().find(|t| {
                t.status == TaskStatus::Done
                    && t.worker_id.as_ref() == Some(&s.name)
                    && &t.model == model
            })?;
            let times = TaskTimes {
                model,
                machine: &s.name,
                queue_wait_ms: t.queue_wait_ms,
                first_token_ms: t.first_token_ms,
                total_ms: t.total_ms,
                completion_tokens: t.completion_tokens,
            };
            Some(ModelFigures {
                model: model.to_string(),
                ttft_ms: t.first_token_ms,
                tokens_per_s: times.tokens_per_s().map(|r| (r * 10.0).round() / 10.0),
            })
        })
        .collect();
    Machine {
        name: s.name.to_string(),
        kind: format!("{:?}", s.kind).to_lowercase(),
        healthy: s.healthy,
        models: s.models.iter().map(ToString::to_string).collect(),
        resident: s.loaded.iter().map(ToString::to_string).collect(),
        expires_at: s
            .resident
            .iter()
            .filter_map(|r| Some((r.model.to_string(), r.expires_at?)))
            .collect(),
        in_flight: s.in_flight,
        slots: s.slots(),
        last_error: s.last_error.clone(),
        latest,
        clock_ahead_ms: s.clock_ahead_ms,
        clock_apart: clock_apart(s.clock_ahead_ms),
    }
}

fn recent(t: &TaskRecord) -> RecentTask {
    let note = match t.status {
        TaskStatus::Failed | TaskStatus::Cancelled => t.error.clone(),
        _ => None,
    }
    .or_else(|| t.fallback_reason.clone().filter(|_| t.fallback_used));
    RecentTask {
        task_id: t.task_id.to_string(),
        created_at: t.created_at,
        person: t.person.to_string(),
        prompt: head(&t.prompt),
        domain: t.domain.to_string(),
        lane: t.queue.to_string(),
        model: t.model.to_string(),
        machine: t.worker_id.as_ref().map(ToString::to_string),
        reasons: t.reasons.clone(),
        status: t.status.as_str().to_owned(),
        internal_task: t.internal_task.map(|k| k.as_str().to_owned()),
        first_token_ms: t.first_token_ms,
        total_ms: t.total_ms,
        note,
    }
}

/// The prompt's first characters, on one line.
pub fn head(prompt: &str) -> String {
    let flat: String = prompt
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    match flat.char_indices().nth(PROMPT_HEAD) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat.to_owned(),
    }
}
