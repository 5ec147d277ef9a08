//! Queues: how a routed, stored task travels to a worker that can run it.
//!
//! One lane per kind of work (`tasks:llm:<model>`, `tasks:llm:<model>@<worker>`,
//! `tasks:web`, `tasks:rag`, `tasks:utility`). In-process lanes in embedded mode; Redis
//! Streams with consumer groups in cluster mode, behind the same trait.

pub mod eta;
pub mod in_process;
pub mod priority;
pub mod redis;
pub mod turns;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::backend::BackendRequest;
use crate::chat::ResponseMode;
use crate::domain::{InternalTask, Lane, Person, Priority, TaskId, ThreadId, WorkerName};
use crate::lang::Lang;

/// What a worker is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub task_id: TaskId,
    /// The conversation the turn belongs to; absent from jobs queued before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<ThreadId>,
    pub lane: Lane,
    pub created_at: DateTime<Utc>,
    /// The composed request: system + history + memory + the original prompt.
    pub request: BackendRequest,
    #[serde(default)]
    pub internal_task: Option<InternalTask>,
    /// How many times the job was handed to a worker before.
    #[serde(default)]
    pub attempt: u32,
    /// Workers that already failed this job before the first token, or left it for a
    /// sooner one; others take it first.
    #[serde(default)]
    pub avoid: Vec<WorkerName>,
    /// For a job left for a sooner worker: until when the workers in `avoid` leave it to
    /// the others (as long as placement expected to gain by it). In Redis they do not take
    /// it before then, and take it as it comes after; without it (a job that failed
    /// there) one puts it back a bounded number of times. In process alike until then;
    /// without it, the in-process queue leaves the job to the others for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avoid_until: Option<DateTime<Utc>>,
    /// Whether the client reads the answer as it is generated. A job for a client that
    /// does not stream asks the backend for the whole answer in one piece. Written as
    /// `"stream": true|false`, as before the mode had a type.
    #[serde(rename = "stream", with = "stream_flag", default = "streamed")]
    pub response: ResponseMode,
    /// Set when the turn may become conversation memory once answered: what the worker
    /// needs to remember it without reading the task back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryNote>,
    /// The language of the user's prompt, for what the client is told if the job fails;
    /// English for jobs queued before it was kept.
    #[serde(default)]
    pub lang: Lang,
    /// Which waiting job is taken first (see [`priority`]); interactive for jobs queued
    /// before priorities existed.
    #[serde(default)]
    pub priority: Priority,
    /// When the job first began to wait, set as a worker takes it (from the in-process
    /// queue, or from Redis by its entry's time): a job queued again (held back by the
    /// guard, left for another worker, retried elsewhere) keeps its age and its place
    /// among equals. `None` for a job that has not waited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<DateTime<Utc>>,
    /// Whose turn it is: the waiting jobs of one person take turns with everyone else's
    /// (see [`in_process`]), and a person's waiting tasks are bounded
    /// (`[limits] queued_per_person`). The default person for jobs queued before it was
    /// kept (recovery reads it from the task's row).
    #[serde(default, skip_serializing_if = "Person::is_default")]
    pub person: Person,
}

impl Job {
    /// Moves the job's times by `by`: from the clock of the process that queued it onto
    /// this one's (see [`redis::clock`]).
    pub fn shift_times(&mut self, by: chrono::TimeDelta) {
        use crate::backend::clock::moved;
        self.created_at = moved(self.created_at, by);
        self.avoid_until = self.avoid_until.map(|t| moved(t, by));
        self.waiting_since = self.waiting_since.map(|t| moved(t, by));
    }

    /// Whether `worker` should leave the job to the others at `now`: it is in `avoid`,
    /// and the time the job was left for them until, if any, has not come.
    pub fn avoids(&self, worker: &WorkerName, now: DateTime<Utc>) -> bool {
        self.avoid.contains(worker) && self.avoid_until.is_none_or(|until| now < until)
    }
}

/// Jobs queued before `stream` existed were all streamed.
fn streamed() -> ResponseMode {
    ResponseMode::Streamed
}

/// [`Job::response`] as the `stream` flag jobs in Redis and in task rows carry.
mod stream_flag {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::chat::ResponseMode;

    pub fn serialize<S: Serializer>(mode: &ResponseMode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(mode.is_streamed())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ResponseMode, D::Error> {
        bool::deserialize(d).map(ResponseMode::from_stream)
    }
}

/// The part of a turn that memory keeps (see [`Job::memory`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryNote {
    /// Whose memory the turn becomes (a job queued before there were people has none:
    /// the default person, like every row of that time).
    #[serde(default)]
    pub person: crate::domain::Person,
    pub thread_id: String,
    /// The user's original prompt (the request holds the composed one).
    pub prompt: String,
}

/// A job handed to one worker, to be acknowledged when it is finished.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub job: Job,
    /// Queue-specific receipt (in Redis the stream and the entry id).
    pub receipt: String,
    /// How many times the queue has handed out this job, this time included: 1 on the
    /// first delivery, more when a consumer took it before and never acknowledged it (its
    /// process died). Always 1 in process.
    pub deliveries: u32,
    /// Set when the queue gives up on the job: it was handed out more often than the
    /// queue's retry limit without an acknowledgement. The worker must not run it; it
    /// fails the task with this reason (safe to show) and acknowledges the delivery.
    pub dead_letter: Option<String>,
    /// Whether the task's row was written already claimed by the worker this delivery goes
    /// to (see [`Delivery::direct`]). A worker claims any other job itself.
    pub claimed: bool,
    /// The task's span when the job comes straight from its submission in this process
    /// (the worker then logs in that span instead of opening another with the same fields).
    pub span: Option<tracing::Span>,
    /// For a job handed out in this process: it counts as its person's running job until
    /// the delivery is dropped (see [`turns`]).
    pub running: Option<std::sync::Arc<turns::Running>>,
}

impl Delivery {
    /// A job handed out in this process: its first and only delivery, acknowledged by
    /// nothing but its end.
    pub fn in_process(job: Job) -> Self {
        Self {
            receipt: job.task_id.to_string(),
            job,
            deliveries: 1,
            dead_letter: None,
            claimed: false,
            span: None,
            running: None,
        }
    }

    /// A fresh job the service handed straight to a worker of this process, without
    /// queueing it: the task's row was written already claimed by that worker.
    pub fn direct(job: Job, span: tracing::Span, running: turns::Running) -> Self {
        Self {
            claimed: true,
            span: Some(span),
            running: Some(std::sync::Arc::new(running)),
            ..Self::in_process(job)
        }
    }
}

/// Which jobs a worker takes: those of `lanes`, but from the lanes in `interactive_only`
/// only a person's (interactive by its own class): there, background work would push out
/// a model people need (see [`crate::placement::guard`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Takes {
    pub lanes: Vec<Lane>,
    pub interactive_only: Vec<Lane>,
}

impl Takes {
    /// Every job of `lanes`.
    pub fn all(lanes: Vec<Lane>) -> Self {
        Self {
            lanes,
            interactive_only: Vec::new(),
        }
    }

    /// Whether a job of `priority` in `lane` may be taken.
    pub fn allows(&self, lane: &Lane, priority: Priority) -> bool {
        priority == Priority::Interactive || !self.interactive_only.contains(lane)
    }

    /// The classes taken from `lane`.
    pub fn classes(&self, lane: &Lane) -> &'static [Priority] {
        if self.interactive_only.contains(lane) {
            &[Priority::Interactive]
        } else {
            &Priority::ALL
        }
    }
}

/// A person's jobs in one lane and class (see [`Queue::people_depths`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Depth {
    pub lane: Lane,
    pub priority: Priority,
    pub person: Person,
    /// Not yet handed out.
    pub waiting: usize,
    /// Handed out, not yet acknowledged.
    pub running: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue is closed")]
    Closed,
    #[error("queue backend error: {0}")]
    Backend(String),
}

#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Adds a job to its lane.
    async fn enqueue(&self, job: Job) -> Result<(), QueueError>;

    /// Waits for the next job that `consumer` may take from `takes`. Cancel-safe: dropping
    /// the future never loses a job.
    async fn dequeue_from(
        &self,
        takes: &Takes,
        consumer: &WorkerName,
    ) -> Result<Delivery, QueueError>;

    /// Waits for the next job of any class from any of `lanes` (see [`Self::dequeue_from`]).
    async fn dequeue(&self, lanes: &[Lane], consumer: &WorkerName) -> Result<Delivery, QueueError> {
        self.dequeue_from(&Takes::all(lanes.to_vec()), consumer)
            .await
    }

    /// The lanes among `lanes` where a person's job (interactive by its own class, not
    /// by age) waits to be taken.
    async fn awaited(&self, lanes: &[Lane]) -> Result<Vec<Lane>, QueueError>;

    /// Confirms a delivered job is finished (done, failed, or handed on).
    async fn ack(&self, delivery: &Delivery) -> Result<(), QueueError>;

    /// The jobs waiting in `lane` that a fresh job of `priority` from `person` would be
    /// taken after (a better or equal effective priority: see [`priority`]; in process, of
    /// its class, a turn no later: see [`turns`]), for placement
    /// ([`crate::placement::Ahead`]): a machine the lane's backlog will keep busy looks
    /// busy. In process with their prompts' sizes; in Redis only their count, by class
    /// (waiting promotes no entry there) and by the people's turns from each person's
    /// waiting and running jobs in the lane ([`turns::ahead_in_turn`]).
    async fn ahead(
        &self,
        lane: &Lane,
        priority: Priority,
        person: &Person,
    ) -> Result<crate::placement::Ahead, QueueError>;

    /// The jobs waiting in `lane` that `job`, taken from the queue after waiting since
    /// its [`Job::waiting_since`], would have been taken after (a better effective
    /// priority, or the same and waiting longer): what a worker that took it weighs
    /// before it leaves it for a sooner one. Jobs queued after it do not count. A queue
    /// that does not know the waiting jobs' ages (Redis) counts those a fresh job of its
    /// priority goes after ([`Self::ahead`]).
    async fn ahead_of(
        &self,
        lane: &Lane,
        job: &Job,
    ) -> Result<crate::placement::Ahead, QueueError> {
        self.ahead(lane, job.priority, &job.person).await
    }

    /// The jobs waiting in `lane` that `job`, taken from the queue, goes before among
    /// those of its own effective class (the wait of a worse class weighs less, and a
    /// better class goes first anyway): what a worker weighs before it leaves the job
    /// for a sooner machine, where it would hold the slot they wait for
    /// ([`crate::placement::keeper_for_those_behind`]). A queue that does not know the
    /// waiting jobs' ages (Redis) counts those a fresh job of its priority goes after
    /// ([`Self::ahead`]): the job was delivered first, so those of its class came after
    /// it.
    async fn behind_of(
        &self,
        lane: &Lane,
        job: &Job,
    ) -> Result<crate::placement::Ahead, QueueError> {
        self.ahead(lane, job.priority, &job.person).await
    }

    /// Takes task `task_id`'s job (queued in `lane` with `priority`) out of the queue
    /// while it waits there, because its task ended (cancelled); whether it did. A job
    /// already handed to a worker is left alone: the worker skips it. A queue that cannot
    /// do this leaves every job for a worker to skip.
    async fn withdraw(
        &self,
        _lane: &Lane,
        _priority: Priority,
        _task_id: TaskId,
    ) -> Result<bool, QueueError> {
        Ok(false)
    }

    /// Jobs waiting in each lane per priority class, by the class each was queued with
    /// (waiting promotes none here), sorted; lanes and classes with none are left out.
    async fn class_depths(&self) -> Result<Vec<(Lane, Priority, usize)>, QueueError>;

    /// Jobs of each lane, class and person: waiting, and handed out but not yet
    /// acknowledged (running), for the people's turns where only counts are known
    /// ([`turns::ahead_in_turn`]). A queue that does not know its jobs' people counts
    /// every waiting job as the default person's and none as running.
    async fn people_depths(&self) -> Result<Vec<Depth>, QueueError> {
        Ok(self
            .class_depths()
            .await?
            .into_iter()
            .map(|(lane, priority, waiting)| Depth {
                lane,
                priority,
                person: Person::default(),
                waiting,
                running: 0,
            })
            .collect())
    }

    /// Jobs waiting in each lane, all classes together, sorted.
    async fn depths(&self) -> Result<Vec<(Lane, usize)>, QueueError> {
        let mut out: Vec<(Lane, usize)> = Vec::new();
        for (lane, _, n) in self.class_depths().await? {
            match out.last_mut() {
                Some((last, sum)) if *last == lane => *sum += n,
                _ => out.push((lane, n)),
            }
        }
        Ok(out)
    }

    /// Where the job of `task_id` stands among the jobs waiting in `lane`, in the order
    /// workers will take them as of now: `Some(1)` when it is taken next, `Some(n)` when
    /// `n - 1` jobs of the lane go before it (a better effective priority, or the same
    /// and older; see [`priority`]). `None` when it does not wait there (it was never
    /// queued, already handed to a worker, or is in another lane).
    ///
    /// Only the lane's own jobs count: a worker that also serves other lanes (the pinned
    /// lane of its model, `tasks:utility`) may take one of theirs first, and a job that
    /// must avoid the next free worker waits for another. Positions change as time
    /// promotes waiting jobs ([`priority::Aging`]) and as more urgent work arrives.
    async fn position(&self, lane: &Lane, task_id: TaskId) -> Result<Option<usize>, QueueError>;

    /// Checks the queue's server answers (always true in process).
    async fn ping(&self) -> Result<(), QueueError>;

    /// The tasks the queue holds, waiting or handed out and not yet acknowledged.
    async fn task_ids(&self) -> Result<std::collections::HashSet<TaskId>, QueueError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::samples;

    fn sample_job() -> Job {
        samples::sample_job(&Lane::Utility)
    }

    #[test]
    fn the_response_mode_is_the_stream_flag_on_the_wire() {
        for (mode, flag) in [(ResponseMode::Streamed, true), (ResponseMode::Whole, false)] {
            let job = Job {
                response: mode,
                ..sample_job()
            };
            let json: serde_json::Value = serde_json::to_value(&job).unwrap();
            assert_eq!(json["stream"], flag);
            assert!(json.get("response").is_none(), "{json}");
            assert_eq!(serde_json::from_value::<Job>(json).unwrap(), job);
        }
    }

    #[test]
    fn a_job_carries_its_person_and_the_default_one_costs_nothing_on_the_wire() {
        let json = serde_json::to_value(sample_job()).unwrap();
        assert!(json.get("person").is_none(), "{json}");
        assert!(
            serde_json::from_value::<Job>(json)
                .unwrap()
                .person
                .is_default()
        );
        let alices = Job {
            person: crate::domain::Person::parse("alice").unwrap(),
            ..sample_job()
        };
        let json = serde_json::to_value(&alices).unwrap();
        assert_eq!(json["person"], "alice");
        assert_eq!(serde_json::from_value::<Job>(json).unwrap(), alices);
    }

    #[test]
    fn a_job_written_before_the_stream_flag_is_streamed() {
        let mut json = serde_json::to_value(sample_job()).unwrap();
        json.as_object_mut().unwrap().remove("stream");
        let job: Job = serde_json::from_value(json).unwrap();
        assert_eq!(job.response, ResponseMode::Streamed);
    }
}
