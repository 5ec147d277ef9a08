//! Cluster mode: the row is durable before the job is queued, since a worker in another
//! process may take it at once and must find the row.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cancel::{self, Cancels};
use super::{DispatchError, spawn_to_completion};
use crate::domain::{Lane, Person, Priority, TaskId};
use crate::events::{EventBus, EventStream};
use crate::queue::redis::connection::Redis;
use crate::queue::{Depth, Job, Queue};
use crate::store::{NewTask, TaskStore};

#[derive(Clone)]
pub struct Cluster {
    store: Arc<dyn TaskStore>,
    queue: Arc<dyn Queue>,
    events: Arc<dyn EventBus>,
    cancels: Cancels,
    cancel: Option<CancelChannel>,
    backlog: Arc<Backlog>,
    /// How many tasks each person has waiting, from the store (see [`Tally`]).
    people: Arc<Tally<Person>>,
}

/// How long counts, as last read, stand (see [`Tally`]).
const BACKLOG_FRESH_FOR: Duration = Duration::from_millis(500);

/// Counts read from elsewhere at most every [`BACKLOG_FRESH_FOR`], plus what this process
/// queued since: a bound holds, and placement counts the classes a task goes after,
/// without a round trip for every request.
struct Tally<K> {
    /// Held while the counts are read, so that one request reads them for all.
    reading: tokio::sync::Mutex<()>,
    seen: std::sync::Mutex<Seen<K>>,
}

impl<K> Default for Tally<K> {
    fn default() -> Self {
        Self {
            reading: tokio::sync::Mutex::default(),
            seen: std::sync::Mutex::new(Seen {
                at: None,
                read: HashMap::new(),
                since: HashMap::new(),
            }),
        }
    }
}

struct Seen<K> {
    at: Option<Instant>,
    read: HashMap<K, usize>,
    /// Added by this process since the last read.
    since: HashMap<K, usize>,
}

impl<K: Eq + Hash> Seen<K> {
    /// Every key counted, and how many.
    fn each(&self) -> impl Iterator<Item = (&K, usize)> {
        let since = |k| self.since.get(k).copied().unwrap_or(0);
        let read = self.read.iter().map(move |(k, n)| (k, n + since(k)));
        let new = self
            .since
            .iter()
            .filter(|(k, _)| !self.read.contains_key(*k))
            .map(|(k, n)| (k, *n));
        read.chain(new)
    }
}

impl<K: Eq + Hash + Clone> Tally<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen<K>> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_fresh(seen: &Seen<K>) -> bool {
        seen.at.is_some_and(|at| at.elapsed() < BACKLOG_FRESH_FOR)
    }

    /// Reads the counts again with `read` when the last read is stale (one request reads
    /// them for all). A failed read counts nothing: `what` names it in the warning.
    async fn refresh<E: std::fmt::Display>(
        &self,
        read: impl Future<Output = Result<Vec<(K, usize)>, E>>,
        what: &str,
    ) {
        if Self::is_fresh(&self.lock()) {
            return;
        }
        let _reading = self.reading.lock().await;
        if Self::is_fresh(&self.lock()) {
            return;
        }
        match read.await {
            Ok(counts) => {
                let mut seen = self.lock();
                seen.read = counts.into_iter().collect();
                seen.since.clear();
                seen.at = Some(Instant::now());
            }
            // Counts that cannot be read bound nothing; queueing then fails on its own.
            Err(e) => tracing::warn!(error = %e, "could not read {what}"),
        }
    }

    /// The sum of the counts of the keys `keep` holds for, when the counts are fresh.
    fn estimate(&self, keep: impl Fn(&K) -> bool) -> Option<usize> {
        let seen = self.lock();
        Self::is_fresh(&seen).then(|| seen.each().filter(|(k, _)| keep(k)).map(|(_, n)| n).sum())
    }

    fn added(&self, key: K) {
        *self.lock().since.entry(key).or_default() += 1;
    }
}

/// Whether a count of the [`Backlog`] is of waiting jobs or of running ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Held {
    Waiting,
    Running,
}

/// What each person has in each lane and priority class: the queue's people depths.
type Backlog = Tally<(Lane, Priority, Person, Held)>;

impl Backlog {
    /// Reads the queue's depths again when the last read is stale.
    async fn refresh_depths(&self, queue: &dyn Queue) {
        let depths = async {
            let depths = queue.people_depths().await?;
            Ok::<_, crate::queue::QueueError>(
                depths
                    .into_iter()
                    .flat_map(|d| {
                        let (lane, person) = (d.lane.clone(), d.person.clone());
                        [
                            ((lane, d.priority, person, Held::Waiting), d.waiting),
                            ((d.lane, d.priority, d.person, Held::Running), d.running),
                        ]
                    })
                    .collect(),
            )
        };
        self.refresh(depths, "the queue's depths").await;
    }

    async fn waiting(&self, queue: &dyn Queue, lane: &Lane) -> usize {
        self.refresh_depths(queue).await;
        self.estimate(|(l, _, _, held)| l == lane && *held == Held::Waiting)
            .unwrap_or(0)
    }

    /// Calls `visit` with every lane that holds waiting jobs a fresh job of `priority`
    /// from `person` is taken after, by the queue's rule where only counts are known
    /// ([`crate::queue::turns::ahead_in_turn`]), and how many (see [`Self::waiting`]); with
    /// none when the depths cannot be read.
    async fn each_ahead(
        &self,
        queue: &dyn Queue,
        priority: Priority,
        person: &Person,
        mut visit: impl FnMut(&Lane, usize),
    ) {
        self.refresh_depths(queue).await;
        // One depth per count: a person's waiting and running jobs of a lane and class in
        // two, which `ahead_in_turn` sums as it would one.
        let depths: Vec<Depth> = {
            let seen = self.lock();
            if !Self::is_fresh(&seen) {
                return;
            }
            seen.each()
                .map(|((lane, priority, person, held), n)| Depth {
                    lane: lane.clone(),
                    priority: *priority,
                    person: person.clone(),
                    waiting: if *held == Held::Waiting { n } else { 0 },
                    running: if *held == Held::Running { n } else { 0 },
                })
                .collect()
        };
        for (lane, n) in crate::queue::turns::ahead_in_turn(&depths, priority, person) {
            visit(&lane, n);
        }
    }

    fn queued(&self, job: &Job) {
        self.added((
            job.lane.clone(),
            job.priority,
            job.person.clone(),
            Held::Waiting,
        ));
    }
}

/// Where cancellations are published for every process's workers: the Redis of the queue,
/// under its key prefix.
#[derive(Clone)]
pub struct CancelChannel {
    pub(super) redis: Arc<Redis>,
    pub(super) url: String,
    pub(super) prefix: String,
}

impl CancelChannel {
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        Ok(Self {
            redis: Arc::new(Redis::connect(url).await?),
            url: url.to_owned(),
            prefix: prefix.to_owned(),
        })
    }
}

impl Cluster {
    pub(super) fn new(
        store: Arc<dyn TaskStore>,
        queue: Arc<dyn Queue>,
        events: Arc<dyn EventBus>,
        cancel: Option<CancelChannel>,
    ) -> Self {
        Self {
            store,
            queue,
            events,
            cancels: Cancels::default(),
            cancel,
            backlog: Arc::default(),
            people: Arc::default(),
        }
    }

    /// About how many tasks `person` has waiting, across every process: the store's count
    /// (read at most twice a second) plus what this process queued since.
    pub(super) async fn waiting_of(&self, person: &Person) -> usize {
        self.people
            .refresh(self.store.queued_by_person(), "each person's waiting tasks")
            .await;
        self.people.estimate(|p| p == person).unwrap_or(0)
    }

    /// About how many tasks wait in `lane`, across every process (see [`Backlog`]).
    pub(super) async fn waiting(&self, lane: &Lane) -> usize {
        self.backlog.waiting(self.queue.as_ref(), lane).await
    }

    /// What waits before a fresh job of `priority` in `lane` (see
    /// [`super::Dispatcher::ahead`]): from the lanes' depths, the classes it goes after,
    /// their prompts unknown.
    pub(super) async fn ahead(
        &self,
        lane: &Lane,
        priority: Priority,
        person: &Person,
        statuses: &[crate::backend::registry::WorkerStatus],
    ) -> crate::placement::Waiting {
        let mut waiting = crate::placement::Waiting::default();
        self.backlog
            .each_ahead(self.queue.as_ref(), priority, person, |l, n| {
                waiting.count(statuses, lane, l, crate::placement::Ahead::jobs(n));
            })
            .await;
        waiting
    }

    /// Tells the other processes' workers that task `id` was cancelled (this one's are
    /// told directly, through [`Cancels`]).
    pub(super) async fn cancel(&self, id: TaskId) {
        let Some(channel) = &self.cancel else { return };
        let published: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(cancel::channel(&channel.prefix))
            .arg(id.to_string())
            .query_async(&mut channel.redis.commands())
            .await;
        if let Err(e) = published {
            // The row has ended: a worker elsewhere that still runs it has its result refused.
            tracing::warn!(task_id = %id, error = %e, "could not tell other processes of a cancellation");
        }
    }

    /// Takes cancelled task `id`'s job out of its Redis stream while it waits there (its
    /// row, read back, says which). A failure leaves it for a worker to skip.
    pub(super) async fn withdraw(&self, id: TaskId) {
        let task = match self.store.get(id).await {
            Ok(Some(task)) => task,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(task_id = %id, error = %e, "cannot read a cancelled task back; its job stays queued for a worker to skip");
                return;
            }
        };
        match self.queue.withdraw(&task.queue, task.priority, id).await {
            Ok(true) => {
                tracing::debug!(task_id = %id, "cancelled while waiting; taken out of the queue");
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(task_id = %id, error = %e, "cannot take a cancelled task out of the queue; a worker will skip it");
            }
        }
    }

    /// Hears the cancellations other processes publish, until `stop` (see [`cancel::listen`]).
    pub(super) fn listener(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        let channel = self.cancel.clone()?;
        Some(cancel::listen(
            channel.url,
            channel.prefix,
            self.cancels.clone(),
            stop,
        ))
    }

    pub(super) fn cancels(&self) -> &Cancels {
        &self.cancels
    }

    /// Inserts the row, waits until it is durable, subscribes to the task's events and
    /// queues the job, all in a task of its own that a client going away does not cancel.
    pub(super) async fn dispatch(
        &self,
        task: NewTask,
        job: Job,
    ) -> Result<EventStream, DispatchError> {
        let task_id = task.task_id;
        self.backlog.queued(&job);
        self.people.added(job.person.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::in_process::InProcessQueue;
    use crate::testkit::samples::sample_job;

    fn lane(s: &str) -> Lane {
        Lane::parse(s).unwrap()
    }

    /// What [`Backlog::each_ahead`] visits for a fresh job of `priority`, summed per lane.
    async fn ahead_of(
        backlog: &Backlog,
        queue: &dyn Queue,
        priority: Priority,
    ) -> Vec<(Lane, usize)> {
        let mut seen: Vec<(Lane, usize)> = Vec::new();
        backlog
            .each_ahead(queue, priority, &Person::default(), |l, n| {
                match seen.iter_mut().find(|(s, _)| s == l) {
                    Some((_, sum)) => *sum += n,
                    None => seen.push((l.clone(), n)),
                }
            })
            .await;
        seen.sort();
        seen
    }

    /// Each person's waiting tasks: the store's queued rows as read, plus those queued
    /// since.
    #[tokio::test]
    async fn each_persons_waiting_tasks_are_the_stores_count_plus_those_queued_since() {
        use crate::store::sqlite::SqliteStore;
        use crate::testkit::samples::sample_task;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("c.db")).await.unwrap();
        let (alice, bob) = (
            Person::parse("alice").unwrap(),
            Person::parse("bob").unwrap(),
        );
        for person in [&alice, &alice, &bob] {
            let mut t = sample_task("waiting");
            t.person = person.clone();
            store.insert(t).await.unwrap().await.unwrap();
        }
        let people = Tally::<Person>::default();
        let count = async |person: &Person| {
            people.refresh(store.queued_by_person(), "counts").await;
            people.estimate(|p| p == person).unwrap_or(0)
        };
        assert_eq!(count(&alice).await, 2);
        assert_eq!(count(&bob).await, 1);
        people.added(bob.clone());
        people.added(bob.clone());
        assert_eq!(count(&bob).await, 3, "queued since the read");
        assert_eq!(count(&Person::default()).await, 0);
    }

    /// A queue whose people's depths are given.
    struct Depths(Vec<Depth>);

    #[async_trait::async_trait]
    impl Queue for Depths {
        async fn enqueue(&self, _: Job) -> Result<(), crate::queue::QueueError> {
            Ok(())
        }
        async fn dequeue_from(
            &self,
            _: &crate::queue::Takes,
            _: &crate::domain::WorkerName,
        ) -> Result<crate::queue::Delivery, crate::queue::QueueError> {
            std::future::pending().await
        }
        async fn awaited(&self, _: &[Lane]) -> Result<Vec<Lane>, crate::queue::QueueError> {
            Ok(Vec::new())
        }
        async fn ack(&self, _: &crate::queue::Delivery) -> Result<(), crate::queue::QueueError> {
            Ok(())
        }
        async fn class_depths(
            &self,
        ) -> Result<Vec<(Lane, Priority, usize)>, crate::queue::QueueError> {
            Ok(Vec::new())
        }
        async fn people_depths(&self) -> Result<Vec<Depth>, crate::queue::QueueError> {
            Ok(self.0.clone())
        }
        async fn ahead(
            &self,
            _: &Lane,
            _: Priority,
            _: &Person,
        ) -> Result<crate::placement::Ahead, crate::queue::QueueError> {
            Ok(crate::placement::Ahead::NONE)
        }
        async fn position(
            &self,
            _: &Lane,
            _: TaskId,
        ) -> Result<Option<usize>, crate::queue::QueueError> {
            Ok(None)
        }
        async fn ping(&self) -> Result<(), crate::queue::QueueError> {
            Ok(())
        }
        async fn task_ids(
            &self,
        ) -> Result<std::collections::HashSet<TaskId>, crate::queue::QueueError> {
            Ok(std::collections::HashSet::new())
        }
    }

    /// One person's flood in a lane does not make the lane look busy to another person,
    /// whose turn comes first; it does to the flooding person, and the lane's bound counts
    /// every waiting job.
    #[tokio::test]
    async fn the_backlog_counts_another_persons_flood_only_up_to_ones_turn() {
        let chat = lane("tasks:llm:chat");
        let (u1, u2) = (Person::parse("u1").unwrap(), Person::parse("u2").unwrap());
        let depth = |person: &Person, waiting, running| Depth {
            lane: chat.clone(),
            priority: Priority::Interactive,
            person: person.clone(),
            waiting,
            running,
        };
        let queue = Depths(vec![depth(&u1, 20, 1), depth(&u2, 0, 0)]);
        let backlog = Backlog::default();
        let ahead = async |who: &Person| {
            let mut n = 0;
            backlog
                .each_ahead(&queue, Priority::Interactive, who, |_, k| n += k)
                .await;
            n
        };
        assert_eq!(
            ahead(&u2).await,
            0,
            "u2's first goes before u1's waiting ones"
        );
        assert_eq!(ahead(&u1).await, 20, "u1's next goes after all of theirs");
        backlog.queued(&Job {
            person: u2.clone(),
            ..sample_job(&chat)
        });
        assert_eq!(
            ahead(&u2).await,
            2,
            "u2's second goes after their first and, on an equal turn, u1's next"
        );
        assert_eq!(backlog.waiting(&queue, &chat).await, 21);
    }

    #[tokio::test]
    async fn the_backlog_counts_the_classes_a_fresh_job_goes_after_as_the_queue_orders_them() {
        let queue = InProcessQueue::default();
        let (coder, chat) = (lane("tasks:llm:coder"), lane("tasks:llm:chat"));
        for (l, p) in [
            (&coder, Priority::Batch),
            (&coder, Priority::Batch),
            (&coder, Priority::Background),
            (&coder, Priority::Interactive),
            (&chat, Priority::Batch),
        ] {
            queue.push(Job {
                priority: p,
                ..sample_job(l)
            });
        }
        let backlog = Backlog::default();
        // Queued by this process since the depths were read: counted in their class.
        assert_eq!(
            ahead_of(&backlog, &queue, Priority::Interactive).await,
            [(coder.clone(), 1)]
        );
        backlog.queued(&Job {
            priority: Priority::Background,
            ..sample_job(&chat)
        });
        assert_eq!(
            ahead_of(&backlog, &queue, Priority::Background).await,
            [(chat.clone(), 1), (coder.clone(), 2)]
        );
        assert_eq!(
            ahead_of(&backlog, &queue, Priority::Batch).await,
            [(chat.clone(), 2), (coder.clone(), 4)]
        );
        // The lane's bound counts every class.
        assert_eq!(backlog.waiting(&queue, &coder).await, 4);
        assert_eq!(backlog.waiting(&queue, &chat).await, 2);
    }
}
