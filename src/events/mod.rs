//! Task events: the tokens of a running task, from its worker to whoever waits for them.
//!
//! Sits between the worker and the front doors in the request flow. A subscriber sees
//! every event of the task from the start (events are replayed), so a client that
//! subscribes late misses nothing. In-process channels in embedded mode; a Redis stream
//! per task in cluster mode, behind the same trait.

pub mod redis;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::chat::Chunk;
use crate::domain::{TaskId, WorkerName};

/// One thing that happened to a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TaskEvent {
    /// A worker took the task. `loading`: its model was not resident there, so the first
    /// token waits for a load (absent, so false, in events of older workers).
    Started {
        worker: WorkerName,
        #[serde(default)]
        loading: bool,
    },
    /// A piece of the answer. `Chunk::Done` ends the task successfully.
    Chunk { chunk: Chunk },
    /// The task was handed to another worker before its first token.
    Retrying { worker: WorkerName, reason: String },
    /// The task failed; the message is safe to show to the user.
    Failed { message: String },
    /// The task's row could not be written, so nothing of it was kept (its answer is
    /// never shown); the store's error is in the log.
    Unrecorded,
}

impl TaskEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Failed { .. }
                | Self::Unrecorded
                | Self::Chunk {
                    chunk: Chunk::Done { .. }
                }
        )
    }
}

pub type EventStream = BoxStream<'static, TaskEvent>;

#[async_trait]
pub trait EventBus: Send + Sync + 'static {
    async fn publish(&self, task: TaskId, event: TaskEvent);

    /// Every event of `task` from its first, ending after the terminal event. Subscribe
    /// before the task can start to be sure the stream ends.
    async fn subscribe(&self, task: TaskId) -> EventStream;
}

#[derive(Debug, Default)]
struct Channel {
    events: Mutex<Vec<TaskEvent>>,
    notify: Notify,
}

/// Embedded-mode event bus.
#[derive(Debug, Default)]
pub struct InProcessEvents {
    channels: Arc<Mutex<HashMap<TaskId, Arc<Channel>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl InProcessEvents {
    pub fn new() -> Self {
        Self::default()
    }

    fn channel(&self, task: TaskId) -> Arc<Channel> {
        lock(&self.channels).entry(task).or_default().clone()
    }

    /// Channels currently held (for tests and metrics).
    pub fn open_channels(&self) -> usize {
        lock(&self.channels).len()
    }
}

/// Removes a channel from the map when its last subscriber leaves and it has ended or
/// was never written to.
struct Subscription {
    task: TaskId,
    channel: Arc<Channel>,
    channels: Arc<Mutex<HashMap<TaskId, Arc<Channel>>>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = lock(&self.channels);
        let ended_or_unused = {
            let events = lock(&self.channel.events);
            events.is_empty() || events.last().is_some_and(TaskEvent::is_terminal)
        };
        if let Some(c) = map.get(&self.task)
            && Arc::ptr_eq(c, &self.channel)
            && Arc::strong_count(&self.channel) <= 2
            && ended_or_unused
        {
            map.remove(&self.task);
        }
    }
}

#[async_trait]
impl EventBus for InProcessEvents {
    async fn publish(&self, task: TaskId, event: TaskEvent) {
        let terminal = event.is_terminal();
        let channel = self.channel(task);
        lock(&channel.events).push(event);
        channel.notify.notify_waiters();
        if terminal {
            // Subscribers hold their own reference and still read what is left.
            let mut map = lock(&self.channels);
            if map.get(&task).is_some_and(|c| Arc::ptr_eq(c, &channel)) {
                map.remove(&task);
            }
        }
    }

    async fn subscribe(&self, task: TaskId) -> EventStream {
        let sub = Subscription {
            task,
            channel: self.channel(task),
            channels: self.channels.clone(),
        };
        Box::pin(futures::stream::unfold(
            (sub, 0usize, false),
            |(sub, next, done)| async move {
                if done {
                    return None;
                }
                let channel = sub.channel.clone();
                loop {
                    let notified = channel.notify.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    let event = lock(&channel.events).get(next).cloned();
                    if let Some(ev) = event {
                        let terminal = ev.is_terminal();
                        return Some((ev, (sub, next + 1, terminal)));
                    }
                    notified.await;
                }
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{FinishReason, Usage};
    use futures::StreamExt;

    fn text(t: &str) -> TaskEvent {
        TaskEvent::Chunk {
            chunk: Chunk::Content { text: t.into() },
        }
    }

    fn done() -> TaskEvent {
        TaskEvent::Chunk {
            chunk: Chunk::Done {
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
            },
        }
    }

    #[tokio::test]
    async fn late_subscriber_gets_replay_and_live_events() {
        let bus = InProcessEvents::new();
        let id = TaskId::new();
        bus.publish(id, text("a")).await;
        let mut s = bus.subscribe(id).await;
        assert_eq!(s.next().await, Some(text("a")));
        bus.publish(id, text("b")).await;
        assert_eq!(s.next().await, Some(text("b")));
        bus.publish(id, done()).await;
        assert_eq!(s.next().await, Some(done()));
        assert_eq!(s.next().await, None);
        drop(s);
        assert_eq!(bus.open_channels(), 0);
    }

    #[tokio::test]
    async fn subscriber_before_publish_sees_everything() {
        let bus = Arc::new(InProcessEvents::new());
        let id = TaskId::new();
        let s = bus.subscribe(id).await;
        let reader = tokio::spawn(s.collect::<Vec<_>>());
        bus.publish(id, text("x")).await;
        bus.publish(
            id,
            TaskEvent::Failed {
                message: "boom".into(),
            },
        )
        .await;
        let got = reader.await.unwrap();
        assert_eq!(
            got,
            vec![
                text("x"),
                TaskEvent::Failed {
                    message: "boom".into()
                }
            ]
        );
        assert_eq!(bus.open_channels(), 0);
    }

    #[tokio::test]
    async fn abandoned_subscription_leaves_no_channel() {
        let bus = InProcessEvents::new();
        let s = bus.subscribe(TaskId::new()).await;
        assert_eq!(bus.open_channels(), 1);
        drop(s);
        assert_eq!(bus.open_channels(), 0);
    }
}
