//! Tasks a previous run (or a Redis restart) left behind: the store has them unfinished,
//! the queue does not. They are queued again, or failed when they cannot run again, and
//! the log says which.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::domain::{TaskStatus, WorkerName};
use crate::queue::{Job, Queue};
use crate::store::{TaskOutcome, TaskRecord, TaskStore};
use crate::worker::{Directory, MAX_ATTEMPTS};

/// How long a task may be missing from the queue before it counts as lost (a task is
/// recorded a moment before it is queued).
pub const LOST_AFTER: Duration = Duration::from_secs(5);

/// Queues `task` again from its stored job, or fails it.
async fn requeue_or_fail(
    store: &dyn TaskStore,
    queue: &dyn Queue,
    task: &TaskRecord,
    why: &str,
) -> anyhow::Result<()> {
    let job = task
        .job
        .as_deref()
        .and_then(|j| serde_json::from_str::<Job>(j).ok());
    let attempts = u32::try_from(task.attempts).unwrap_or(u32::MAX);
    match job {
        Some(mut job) if attempts < MAX_ATTEMPTS => {
            job.attempt = attempts;
            job.person = task.person.clone();
            let text = serde_json::to_string(&job)?;
            store.requeue(task.task_id, &text, Utc::now()).await?;
            queue.enqueue(job).await?;
            tracing::warn!(task_id = %task.task_id, was = %task.status, attempts, why, "task queued again");
        }
        _ => {
            let reason = if attempts >= MAX_ATTEMPTS {
                format!("{why}; not tried again after {attempts} attempts")
            } else {
                format!("{why}; its job could not be read back")
            };
            store
                .finish(
                    task.task_id,
                    &TaskOutcome::failed(Utc::now(), reason.clone()),
                )
                .await?
                .await?;
            tracing::warn!(task_id = %task.task_id, was = %task.status, reason = %reason, "task failed");
        }
    }
    Ok(())
}

/// Embedded mode, at start: nothing of the in-process queue survived, so every unfinished
/// task is queued again (or failed).
pub async fn recover_unfinished(store: &dyn TaskStore, queue: &dyn Queue) -> anyhow::Result<()> {
    let unfinished = store
        .unfinished()
        .await
        .context("reading unfinished tasks")?;
    for task in unfinished {
        requeue_or_fail(store, queue, &task, "interrupted by a restart").await?;
    }
    Ok(())
}

/// Cluster mode: unfinished tasks that the queue no longer holds (Redis restarted without
/// persistence, or a task was recorded while Redis was down) are queued again. A running
/// task is left alone while its worker is alive. Returns how many were handled.
pub async fn reconcile(
    store: &dyn TaskStore,
    queue: &dyn Queue,
    directory: &dyn Directory,
) -> anyhow::Result<usize> {
    let unfinished = store
        .unfinished()
        .await
        .context("reading unfinished tasks")?;
    if unfinished.is_empty() {
        return Ok(0);
    }
    let held = queue.task_ids().await?;
    let alive: Vec<WorkerName> = directory.statuses().into_iter().map(|s| s.name).collect();
    let now = Utc::now();
    let mut handled = 0;
    for task in unfinished {
        if held.contains(&task.task_id) {
            continue;
        }
        let quiet = (now - task.updated_at).to_std().unwrap_or_default();
        if quiet < LOST_AFTER {
            continue;
        }
        let why = match task.status {
            TaskStatus::Queued => "the queue lost it",
            TaskStatus::Running if task.worker_id.as_ref().is_some_and(|w| alive.contains(w)) => {
                continue;
            }
            TaskStatus::Running => "its worker left and the queue lost it",
            TaskStatus::Done | TaskStatus::Failed | TaskStatus::Cancelled => continue,
        };
        requeue_or_fail(store, queue, &task, why).await?;
        handled += 1;
    }
    Ok(handled)
}

/// Runs [`reconcile`] every `every` until `stop`.
pub async fn reconcile_loop(
    store: Arc<dyn TaskStore>,
    queue: Arc<dyn Queue>,
    directory: Arc<dyn Directory>,
    every: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Err(e) = reconcile(store.as_ref(), queue.as_ref(), directory.as_ref()).await {
                    tracing::warn!(error = %e, "could not compare the store with the queue; retrying");
                }
            }
            () = stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Lane, Person};
    use crate::queue::in_process::InProcessQueue;
    use crate::store::sqlite::SqliteStore;
    use crate::testkit::samples::{sample_job, sample_task};

    /// A job written before jobs carried their person is queued again as the row's
    /// person's, so that it counts against their bound and takes their turns.
    #[tokio::test]
    async fn a_task_queued_again_at_start_is_its_rows_persons() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("c.db")).await.unwrap();
        let alice = Person::parse("alice").unwrap();
        let mut task = sample_task("interrupted");
        task.person = alice.clone();
        let job = crate::queue::Job {
            task_id: task.task_id,
            ..sample_job(&Lane::Utility)
        };
        let written = serde_json::to_string(&job).unwrap();
        assert!(!written.contains("alice"), "{written}");
        task.job = Some(written);
        store.insert(task).await.unwrap().await.unwrap();

        let queue = InProcessQueue::new();
        recover_unfinished(&store, &queue).await.unwrap();
        assert_eq!(queue.waiting_of(&alice), 1);
        assert_eq!(queue.waiting_of(&Person::default()), 0);
    }
}
