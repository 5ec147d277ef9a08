//! Cancelling tasks: which of this process's tasks were cancelled, and a signal to the
//! worker running one.
//!
//! [`Dispatcher::cancel`](super::Dispatcher::cancel) tells this process's workers through
//! its [`Cancels`] at once, then ends the task's row (so a queued job's claim finds it
//! finished and skips it, in any process), then, in cluster mode, publishes the task id
//! on a Redis channel that every other process's [`listen`] turns into the same call. A
//! stopped worker writes the answer it had sent onto the cancelled row
//! (`TaskStore::record_partial`, which gives the same row before or after the cancel's
//! own write).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::domain::TaskId;

/// How many cancelled task ids a process remembers for jobs that have not reached a worker.
const REMEMBERED: usize = 4096;

/// This process's running tasks and the recently cancelled ones. Cheap to clone.
#[derive(Clone, Default)]
pub struct Cancels(Arc<Mutex<Inner>>);

#[derive(Default)]
struct Inner {
    /// Each running task's token, with the serial of the [`Watch`] that registered it: a
    /// task handed from one worker to another here is registered by the second before
    /// the first lets go, and the first's end must not remove the second's.
    running: HashMap<TaskId, (u64, CancellationToken)>,
    serial: u64,
    cancelled: HashSet<TaskId>,
    order: VecDeque<TaskId>,
}

/// A running task's registration: [`cancelled`](Self::cancelled) resolves when the task
/// is cancelled; dropping it ends the registration.
pub struct Watch {
    id: TaskId,
    serial: u64,
    token: CancellationToken,
    cancels: Cancels,
}

impl Cancels {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers task `id` as running here, its token a child of `parent` (which cancels
    /// it too: shutdown); `None` when it was cancelled before it started.
    pub fn watch(&self, id: TaskId, parent: &CancellationToken) -> Option<Watch> {
        let mut inner = self.lock();
        if inner.cancelled.contains(&id) {
            return None;
        }
        let token = parent.child_token();
        inner.serial += 1;
        let serial = inner.serial;
        inner.running.insert(id, (serial, token.clone()));
        Some(Watch {
            id,
            serial,
            token,
            cancels: self.clone(),
        })
    }

    /// Marks task `id` cancelled: its worker here, if one runs it, stops; a job of it that
    /// reaches a worker here later is skipped.
    pub fn cancel(&self, id: TaskId) {
        let mut inner = self.lock();
        if let Some((_, token)) = inner.running.get(&id) {
            token.cancel();
        }
        if inner.cancelled.insert(id) {
            inner.order.push_back(id);
            if inner.order.len() > REMEMBERED
                && let Some(old) = inner.order.pop_front()
            {
                inner.cancelled.remove(&old);
            }
        }
    }

    /// Tasks running here now (for tests and metrics).
    pub fn running(&self) -> usize {
        self.lock().running.len()
    }
}

impl Watch {
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut inner = self.cancels.lock();
        if inner
            .running
            .get(&self.id)
            .is_some_and(|(serial, _)| *serial == self.serial)
        {
            inner.running.remove(&self.id);
        }
    }
}

/// The Redis channel cancellations are published on.
pub(super) fn channel(prefix: &str) -> String {
    format!("{prefix}cancel")
}

/// Cluster mode: turns every task id published on the cancel channel into a call to
/// `cancels`, until `stop`; reconnects after an error.
pub async fn listen(url: String, prefix: String, cancels: Cancels, stop: CancellationToken) {
    let channel = channel(&prefix);
    loop {
        let session = async {
            let client = redis::Client::open(url.as_str())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            let mut messages = pubsub.on_message();
            while let Some(message) = messages.next().await {
                let text: String = message.get_payload()?;
                match TaskId::parse(&text) {
                    Ok(id) => cancels.cancel(id),
                    Err(e) => tracing::warn!(error = %e, "ignored a malformed cancellation"),
                }
            }
            Ok::<(), redis::RedisError>(())
        };
        tokio::select! {
            result = session => {
                if let Err(e) = result {
                    tracing::warn!(error = %e, "cancellation channel lost; reconnecting");
                }
            }
            () = stop.cancelled() => return,
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn a_running_task_hears_its_cancel_and_shutdown_and_a_cancelled_one_never_starts() {
        let cancels = Cancels::default();
        let (a, b) = (TaskId::new(), TaskId::new());
        let root = CancellationToken::new();
        let watch = cancels.watch(a, &root).unwrap();
        assert!(watch.cancelled().now_or_never().is_none());
        assert_eq!(cancels.running(), 1);
        cancels.cancel(a);
        watch.cancelled().await;
        drop(watch);
        assert_eq!(cancels.running(), 0);
        cancels.cancel(b);
        assert!(
            cancels.watch(b, &root).is_none(),
            "cancelled before it started"
        );
        let other = cancels.watch(TaskId::new(), &root).unwrap();
        assert!(other.cancelled().now_or_never().is_none(), "others run on");
        root.cancel();
        other.cancelled().await;
    }

    /// A task handed from one worker to another in this process (a failover, a move to a
    /// machine that frees up sooner) is registered by the second before the first lets
    /// go: the first's end leaves the second's registration, which its cancel reaches.
    #[tokio::test]
    async fn a_task_handed_on_is_cancelled_where_it_runs_now() {
        let cancels = Cancels::default();
        let id = TaskId::new();
        let root = CancellationToken::new();
        let first = cancels.watch(id, &root).unwrap();
        let second = cancels.watch(id, &root).unwrap();
        drop(first);
        assert_eq!(cancels.running(), 1, "the second still runs it");
        cancels.cancel(id);
        second.cancelled().await;
        drop(second);
        assert_eq!(cancels.running(), 0);
    }

    #[test]
    fn only_the_most_recent_cancellations_are_kept() {
        let cancels = Cancels::default();
        let first = TaskId::new();
        cancels.cancel(first);
        for _ in 0..REMEMBERED {
            cancels.cancel(TaskId::new());
        }
        assert!(
            cancels.watch(first, &CancellationToken::new()).is_some(),
            "the oldest was forgotten"
        );
        assert!(cancels.lock().cancelled.len() <= REMEMBERED);
    }
}
