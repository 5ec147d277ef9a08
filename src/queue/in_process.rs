//! In-process lanes for embedded mode: a FIFO per lane, shared by the workers of one
//! process. Nothing survives a restart here; the store keeps the jobs of unfinished tasks
//! and start-up queues them again.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::{Delivery, Job, Queue, QueueError};
use crate::domain::{Lane, WorkerName};

#[derive(Debug, Default)]
pub struct InProcessQueue {
    inner: Mutex<Inner>,
    notify: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    lanes: HashMap<Lane, VecDeque<(u64, Job)>>,
    /// Enqueue order across lanes, so a worker serving several lanes takes the oldest job.
    seq: u64,
}

impl InProcessQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many jobs wait in `lane`.
    pub fn waiting(&self, lane: &Lane) -> usize {
        self.lock().lanes.get(lane).map_or(0, VecDeque::len)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the oldest job across `lanes` that `consumer` is not asked to avoid. (A worker
    /// only hands a job on with an avoid list when another healthy worker serves its lane.)
    fn try_take(&self, lanes: &[Lane], consumer: &WorkerName) -> Option<Job> {
        let mut inner = self.lock();
        let mut best: Option<(u64, &Lane, usize)> = None;
        for lane in lanes {
            let Some(q) = inner.lanes.get(lane) else {
                continue;
            };
            if let Some(pos) = q.iter().position(|(_, j)| !j.avoid.contains(consumer)) {
                let seq = q[pos].0;
                if best.is_none_or(|(s, _, _)| seq < s) {
                    best = Some((seq, lane, pos));
                }
            }
        }
        let (_, lane, pos) = best?;
        let lane = lane.clone();
        inner.lanes.get_mut(&lane)?.remove(pos).map(|(_, j)| j)
    }

    /// Queues `job` at once (what [`Queue::enqueue`] does, without an await: the embedded
    /// dispatcher, which must not be interrupted between recording a task and queueing
    /// it, uses this).
    pub fn push(&self, job: Job) {
        {
            let mut inner = self.lock();
            inner.seq += 1;
            let seq = inner.seq;
            inner
                .lanes
                .entry(job.lane.clone())
                .or_default()
                .push_back((seq, job));
        }
        self.notify.notify_waiters();
    }

    /// Whether no job waits in `lane` (a job may then go to a free worker directly
    /// without overtaking anyone).
    pub fn is_empty(&self, lane: &Lane) -> bool {
        self.lock().lanes.get(lane).is_none_or(VecDeque::is_empty)
    }
}

#[async_trait]
impl Queue for InProcessQueue {
    async fn enqueue(&self, job: Job) -> Result<(), QueueError> {
        self.push(job);
        Ok(())
    }

    async fn dequeue(&self, lanes: &[Lane], consumer: &WorkerName) -> Result<Delivery, QueueError> {
        loop {
            // Register interest before looking, so an enqueue between the look and the
            // wait still wakes us.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(job) = self.try_take(lanes, consumer) {
                return Ok(Delivery::in_process(job));
            }
            notified.await;
        }
    }

    async fn ack(&self, _delivery: &Delivery) -> Result<(), QueueError> {
        Ok(())
    }

    async fn ping(&self) -> Result<(), QueueError> {
        Ok(())
    }

    async fn task_ids(
        &self,
    ) -> Result<std::collections::HashSet<crate::domain::TaskId>, QueueError> {
        let inner = self.lock();
        Ok(inner
            .lanes
            .values()
            .flatten()
            .map(|(_, j)| j.task_id)
            .collect())
    }

    async fn depths(&self) -> Result<Vec<(Lane, usize)>, QueueError> {
        let inner = self.lock();
        let mut out: Vec<(Lane, usize)> = inner
            .lanes
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(l, q)| (l.clone(), q.len()))
            .collect();
        out.sort();
        Ok(out)
    }

    async fn position(
        &self,
        lane: &Lane,
        task_id: crate::domain::TaskId,
    ) -> Result<Option<usize>, QueueError> {
        let inner = self.lock();
        let Some(q) = inner.lanes.get(lane) else {
            return Ok(None);
        };
        Ok(q.iter()
            .position(|(_, j)| j.task_id == task_id)
            .map(|i| i + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::testkit::samples::sample_job as job;

    #[tokio::test]
    async fn oldest_job_across_lanes_first() {
        let q = InProcessQueue::new();
        let a = Lane::parse("tasks:llm:a").unwrap();
        let b = Lane::parse("tasks:llm:b").unwrap();
        let w = WorkerName::parse("w").unwrap();
        let j1 = job(&b);
        let j2 = job(&a);
        q.enqueue(j1.clone()).await.unwrap();
        q.enqueue(j2.clone()).await.unwrap();
        let lanes = [a.clone(), b.clone()];
        assert_eq!(q.dequeue(&lanes, &w).await.unwrap().job.task_id, j1.task_id);
        assert_eq!(q.dequeue(&lanes, &w).await.unwrap().job.task_id, j2.task_id);
        assert!(q.depths().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn waiting_consumer_is_woken_by_enqueue() {
        let q = Arc::new(InProcessQueue::new());
        let lane = Lane::parse("tasks:utility").unwrap();
        let w = WorkerName::parse("w").unwrap();
        let waiter = {
            let (q, lane, w) = (q.clone(), lane.clone(), w.clone());
            tokio::spawn(async move { q.dequeue(&[lane], &w).await.unwrap().job.task_id })
        };
        tokio::task::yield_now().await;
        let j = job(&lane);
        q.enqueue(j.clone()).await.unwrap();
        assert_eq!(waiter.await.unwrap(), j.task_id);
    }

    #[tokio::test]
    async fn avoided_worker_does_not_take_the_job_while_others_can() {
        let q = InProcessQueue::new();
        let lane = Lane::parse("tasks:llm:m").unwrap();
        let bad = WorkerName::parse("bad").unwrap();
        let good = WorkerName::parse("good").unwrap();
        let mut j = job(&lane);
        j.avoid = vec![bad.clone()];
        q.enqueue(j.clone()).await.unwrap();
        assert!(q.try_take(std::slice::from_ref(&lane), &bad).is_none());
        assert_eq!(
            q.dequeue(&[lane], &good).await.unwrap().job.task_id,
            j.task_id
        );
    }

    #[tokio::test]
    async fn a_jobs_position_counts_the_jobs_of_its_lane_before_it() {
        let q = InProcessQueue::new();
        let a = Lane::parse("tasks:llm:a").unwrap();
        let b = Lane::parse("tasks:llm:b").unwrap();
        let w = WorkerName::parse("w").unwrap();
        let (a1, b1, a2) = (job(&a), job(&b), job(&a));
        for j in [&a1, &b1, &a2] {
            q.enqueue(j.clone()).await.unwrap();
        }
        assert_eq!(q.position(&a, a1.task_id).await.unwrap(), Some(1));
        assert_eq!(q.position(&a, a2.task_id).await.unwrap(), Some(2));
        assert_eq!(q.position(&b, b1.task_id).await.unwrap(), Some(1));
        assert_eq!(
            q.position(&b, a1.task_id).await.unwrap(),
            None,
            "other lane"
        );
        // Taken by a worker: no longer waiting; the next one moves up.
        assert_eq!(
            q.dequeue(std::slice::from_ref(&a), &w)
                .await
                .unwrap()
                .job
                .task_id,
            a1.task_id
        );
        assert_eq!(q.position(&a, a1.task_id).await.unwrap(), None);
        assert_eq!(q.position(&a, a2.task_id).await.unwrap(), Some(1));
    }

    #[tokio::test]
    async fn dropped_dequeue_loses_nothing() {
        let q = InProcessQueue::new();
        let lane = Lane::parse("tasks:web").unwrap();
        let w = WorkerName::parse("w").unwrap();
        {
            let fut = q.dequeue(std::slice::from_ref(&lane), &w);
            tokio::pin!(fut);
            assert!(futures::poll!(fut.as_mut()).is_pending());
        }
        let j = job(&lane);
        q.enqueue(j.clone()).await.unwrap();
        assert_eq!(q.depths().await.unwrap(), vec![(lane.clone(), 1)]);
        assert_eq!(q.dequeue(&[lane], &w).await.unwrap().job.task_id, j.task_id);
    }
}
