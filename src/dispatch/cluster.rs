//! Cluster mode: the row is durable before the job is queued, since a worker in another
//! process may take it at once and must find the row.

use std::sync::Arc;

use super::{DispatchError, spawn_to_completion};
use crate::events::{EventBus, EventStream};
use crate::queue::{Job, Queue};
use crate::store::{NewTask, TaskStore};

#[derive(Clone)]
pub struct Cluster {
    store: Arc<dyn TaskStore>,
    queue: Arc<dyn Queue>,
    events: Arc<dyn EventBus>,
}

impl Cluster {
    pub(super) fn new(
        store: Arc<dyn TaskStore>,
        queue: Arc<dyn Queue>,
        events: Arc<dyn EventBus>,
    ) -> Self {
        Self {
            store,
            queue,
            events,
        }
    }

    /// Inserts the row, waits until it is durable, subscribes to the task's events and
    /// queues the job, all in a task of its own that a client going away does not cancel.
    pub(super) async fn dispatch(
        &self,
        task: NewTask,
        job: Job,
    ) -> Result<EventStream, DispatchError> {
        let task_id = task.task_id;
        let (store, events, queue) = (self.store.clone(), self.events.clone(), self.queue.clone());
        spawn_to_completion(task_id, async move {
            store.insert(task).await?.await?;
            let events = events.subscribe(task_id).await;
            queue
                .enqueue(job)
                .await
                .map_err(|source| DispatchError::Queue { task_id, source })?;
            Ok(events)
        })
        .await
    }

    pub(super) fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    pub(super) fn queue(&self) -> Arc<dyn Queue> {
        self.queue.clone()
    }

    pub(super) fn events(&self) -> &Arc<dyn EventBus> {
        &self.events
    }
}
