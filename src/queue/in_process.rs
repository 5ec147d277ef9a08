//! In-process lanes for embedded mode, shared by the workers of one process: a worker
//! takes the waiting job of best effective priority across its lanes ([`Aging::rank`],
//! see [`super::priority`]), then of the person whose turn it is ([`super::turns`]), the
//! oldest first among equals. A job taken and queued again
//! (held back by the guard, or left for another worker) keeps its age
//! ([`Job::waiting_since`]). A job left for a sooner worker waits for it until its
//! [`Job::avoid_until`], as in Redis: the workers it avoids take other work meanwhile and
//! look again when that time comes. Nothing survives a restart here; the store keeps the
//! jobs of unfinished tasks and start-up queues them again.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::priority::{Aging, Priority};
use super::turns::{Ledger, Running, Turn, Turns};
use super::{Delivery, Job, Queue, QueueError, Takes};
use crate::backend::registry::WorkerStatus;
use crate::domain::{Lane, Person, TaskId, WorkerName};
use crate::placement::{Ahead, Waiting as PlacementWaiting};

#[derive(Debug, Default)]
pub struct InProcessQueue {
    inner: Mutex<Inner>,
    notify: Notify,
    aging: Aging,
    /// The jobs handed out and not yet ended, per person, for their turns.
    running: Ledger,
}

/// Where a waiting job stands in the order jobs are taken: smaller first (effective
/// class, turn, when it began to wait, enqueue order).
type Order = (u8, Turn, Instant, u64);

/// The turn of every job while turns change no order (see [`InProcessQueue::turns`]).
const NO_TURN: Turn = (0, None);

#[derive(Debug, Default)]
struct Inner {
    /// Each lane's waiting jobs, in enqueue order.
    lanes: HashMap<Lane, Vec<Waiting>>,
    /// Enqueue order across lanes, so jobs of equal rank go oldest first.
    seq: u64,
    /// How many jobs each person has waiting, in every lane (none: not a key).
    by_person: HashMap<Person, usize>,
}

#[derive(Debug)]
struct Waiting {
    seq: u64,
    since: Instant,
    /// The composed prompt's estimated tokens, figured once when queued.
    prompt_tokens: u32,
    job: Job,
}

impl Inner {
    /// Takes the job at `pos` out of `lane`: the lane goes once empty, and its person
    /// counts it no more.
    fn take_out(&mut self, lane: &Lane, pos: usize) -> Option<Waiting> {
        let q = self.lanes.get_mut(lane)?;
        let gone = q.remove(pos);
        if q.is_empty() {
            self.lanes.remove(lane);
        }
        let person = &gone.job.person;
        if let Some(n) = self.by_person.get_mut(person) {
            *n -= 1;
            if *n == 0 {
                self.by_person.remove(person);
            }
        }
        Some(gone)
    }
}

impl Waiting {
    /// The order in which jobs are taken at `now`, turns aside: smaller first (the
    /// better rank, then the one waiting longer, then the one queued first).
    fn order(&self, aging: Aging, now: Instant) -> (u8, Instant, u64) {
        (
            aging.rank(self.job.priority, now.duration_since(self.since)),
            self.since,
            self.seq,
        )
    }

    /// The job, handed out: it carries when it began to wait, on the wall clock, so it
    /// keeps its age if it is queued again.
    fn into_job(self, now: Instant) -> Job {
        let waited = chrono::Duration::from_std(now.duration_since(self.since)).unwrap_or_default();
        Job {
            waiting_since: Some(Utc::now() - waited),
            ..self.job
        }
    }
}

/// When a job queued at `now` began to wait: now for a fresh one; for one queued again,
/// as long ago as it began (on this queue's clock, paused in tests).
fn waiting_since(job: &Job, now: Instant) -> Instant {
    job.waiting_since
        .and_then(|t| (Utc::now() - t).to_std().ok())
        .and_then(|waited| now.checked_sub(waited))
        .unwrap_or(now)
}

/// `waiting` as jobs ahead: how many, and their prompts' tokens (known for every job here).
fn counted<'a>(waiting: impl Iterator<Item = &'a Waiting>) -> Ahead {
    waiting.fold(
        Ahead {
            jobs: 0,
            prompt_tokens: Some(0),
        },
        |ahead, w| Ahead {
            jobs: ahead.jobs + 1,
            prompt_tokens: ahead.prompt_tokens.map(|t| t + u64::from(w.prompt_tokens)),
        },
    )
}

impl InProcessQueue {
    /// A queue that promotes waiting jobs after the default `[scheduler] aging_s`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A queue that promotes a waiting job one class each `aging`.
    pub fn with_aging(aging: Aging) -> Self {
        Self {
            aging,
            ..Self::default()
        }
    }

    /// How many jobs wait in `lane`.
    pub fn waiting(&self, lane: &Lane) -> usize {
        self.lock().lanes.get(lane).map_or(0, Vec::len)
    }

    /// Takes task `id`'s waiting job out of its lane (its task ended while it waited);
    /// whether it was there.
    pub fn withdraw(&self, id: TaskId) -> bool {
        let mut inner = self.lock();
        let found = inner.lanes.iter().find_map(|(lane, q)| {
            let pos = q.iter().position(|w| w.job.task_id == id)?;
            Some((lane.clone(), pos))
        });
        found.is_some_and(|(lane, pos)| inner.take_out(&lane, pos).is_some())
    }

    /// How many jobs of `person` wait, in every lane.
    pub fn waiting_of(&self, person: &Person) -> usize {
        self.lock().by_person.get(person).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the job of best effective priority (then turn, then the oldest) across the
    /// lanes of `takes` that `consumer` is not asked to avoid now ([`Job::avoids`]). (A
    /// worker only hands a job on with an avoid list when another healthy worker serves
    /// its lane.) The job runs and ends at once, as far as turns go.
    #[cfg(test)]
    fn try_take(&self, takes: &Takes, consumer: &WorkerName) -> Option<Job> {
        let (job, running) = self.take_or_next(takes, consumer).ok()?;
        running.began();
        Some(job)
    }

    /// Counts a job of `person`, handed straight to a worker, as running (see
    /// [`super::turns`]) until the returned token is dropped.
    pub fn start_running(&self, person: &Person) -> Running {
        self.running.start(person)
    }

    /// The turns of the waiting jobs at `now`, when they may change an order: when more
    /// than one person (`also` counted: the person of a job weighed against those
    /// waiting) has work waiting. One person's jobs keep their order whatever their
    /// turns, so the usual queue (one person's, or nobody's) costs nothing here.
    fn turns(&self, inner: &Inner, now: Instant, also: Option<&Person>) -> Option<Turns> {
        let mut people = inner.by_person.keys().chain(also);
        let first = people.next()?;
        if people.all(|p| p == first) {
            return None;
        }
        let waiting = inner.lanes.values().flatten();
        Some(Turns::of(
            waiting.map(|w| (w.job.task_id, &w.job.person, w.order(self.aging, now))),
            &self.running,
        ))
    }

    /// Where `w` stands at `now`, with its turn when turns are taken.
    fn fair(&self, w: &Waiting, turns: Option<&Turns>, now: Instant) -> Order {
        let (rank, since, seq) = w.order(self.aging, now);
        let turn = turns.map_or(NO_TURN, |t| t.of_task(w.job.task_id));
        (rank, turn, since, seq)
    }

    /// The turn of a job of `person` that does not wait here, placed at `base` among
    /// those that do (its order without turns): its person's running jobs and their
    /// waiting jobs before it, then when they were last served. When `it_runs` (a worker
    /// took it), it is not one of its own running jobs, and its own service is not held
    /// against it (it stands as one not served).
    fn turn_outside(
        &self,
        inner: &Inner,
        person: &Person,
        base: (u8, Instant, u64),
        it_runs: bool,
        now: Instant,
    ) -> Turn {
        let before = inner
            .lanes
            .values()
            .flatten()
            .filter(|w| &w.job.person == person && w.order(self.aging, now) < base)
            .count();
        let before = u32::try_from(before).unwrap_or(u32::MAX);
        let (turn, served) = self.running.turn(person, before, u32::from(it_runs));
        (turn, served.filter(|_| !it_runs))
    }

    /// The turns of the waiting jobs (see [`Self::turns`]) and, weighed against them, the
    /// turn of a job of `person` that does not wait here (see [`Self::turn_outside`]).
    fn turns_beside(
        &self,
        inner: &Inner,
        person: &Person,
        base: (u8, Instant, u64),
        it_runs: bool,
        now: Instant,
    ) -> (Option<Turns>, Turn) {
        let turns = self.turns(inner, now, Some(person));
        let turn = match turns {
            Some(_) => self.turn_outside(inner, person, base, it_runs, now),
            None => NO_TURN,
        };
        (turns, turn)
    }

    /// The turns of the waiting jobs, and a fresh job of `priority` from `person` as it
    /// would stand among them at `now`: its effective class and its turn. It has waited
    /// least: it goes after every job of its class and turn.
    fn fresh(
        &self,
        inner: &Inner,
        priority: Priority,
        person: &Person,
        now: Instant,
    ) -> (Option<Turns>, (u8, Turn)) {
        let rank = self.aging.rank(priority, std::time::Duration::ZERO);
        let (turns, turn) = self.turns_beside(inner, person, (rank, now, u64::MAX), false, now);
        (turns, (rank, turn))
    }

    /// [`Self::try_take`], or when nothing may be taken, the soonest time a job it avoids
    /// now is no longer left to the others (`None` when no such job waits).
    fn take_or_next(
        &self,
        takes: &Takes,
        consumer: &WorkerName,
    ) -> Result<(Job, Running), Option<DateTime<Utc>>> {
        let now = Instant::now();
        let wall = Utc::now();
        let mut inner = self.lock();
        let turns = self.turns(&inner, now, None);
        let mut best: Option<(Order, &Lane, usize)> = None;
        let mut next: Option<DateTime<Utc>> = None;
        for lane in &takes.lanes {
            let Some(q) = inner.lanes.get(lane) else {
                continue;
            };
            for (pos, w) in q.iter().enumerate() {
                if !takes.allows(lane, w.job.priority) {
                    continue;
                }
                if w.job.avoids(consumer, wall) {
                    if let Some(until) = w.job.avoid_until {
                        next = Some(next.map_or(until, |n| n.min(until)));
                    }
                    continue;
                }
                let order = self.fair(w, turns.as_ref(), now);
                if best.is_none_or(|(o, _, _)| order < o) {
                    best = Some((order, lane, pos));
                }
            }
        }
        let Some((_, lane, pos)) = best else {
            return Err(next);
        };
        let lane = lane.clone();
        let Some(taken) = inner.take_out(&lane, pos) else {
            return Err(next);
        };
        let taken = taken.into_job(now);
        let running = self.running.start(&taken.person);
        Ok((taken, running))
    }

    /// The lanes among `lanes` where a person's job waits (see [`Queue::awaited`]),
    /// without an await.
    pub fn awaited_now(&self, lanes: &[Lane]) -> Vec<Lane> {
        let inner = self.lock();
        lanes
            .iter()
            .filter(|l| {
                inner
                    .lanes
                    .get(*l)
                    .is_some_and(|q| q.iter().any(|w| w.job.priority == Priority::Interactive))
            })
            .cloned()
            .collect()
    }

    /// Queues `job` at once (what [`Queue::enqueue`] does, without an await: the embedded
    /// dispatcher, which must not be interrupted between recording a task and queueing
    /// it, uses this).
    pub fn push(&self, job: Job) {
        {
            let mut inner = self.lock();
            inner.seq += 1;
            let seq = inner.seq;
            let prompt_tokens = job.request.estimated_prompt_tokens();
            let since = waiting_since(&job, Instant::now());
            *inner.by_person.entry(job.person.clone()).or_default() += 1;
            inner
                .lanes
                .entry(job.lane.clone())
                .or_default()
                .push(Waiting {
                    seq,
                    since,
                    prompt_tokens,
                    job,
                });
        }
        self.notify.notify_waiters();
    }

    /// Whether a fresh job of `priority` from `person` for `lane` would be taken before
    /// every job waiting there (it may then go to a free worker directly without
    /// overtaking anyone): true when none waits, or only jobs of a worse effective class,
    /// or of its class but a later turn.
    pub fn first_in_line(&self, lane: &Lane, priority: Priority, person: &Person) -> bool {
        let now = Instant::now();
        let inner = self.lock();
        let Some(q) = inner.lanes.get(lane) else {
            return true;
        };
        let (turns, fresh) = self.fresh(&inner, priority, person, now);
        q.iter()
            .all(|w| !self.goes_before(w, fresh, turns.as_ref(), now))
    }

    /// The jobs waiting in `lane` that a fresh job of `priority` from `person` would be
    /// taken after, and their prompts (see [`Queue::ahead`]), without an await.
    pub fn ahead_now(&self, lane: &Lane, priority: Priority, person: &Person) -> Ahead {
        let now = Instant::now();
        let inner = self.lock();
        let q = inner.lanes.get(lane).map_or(&[][..], Vec::as_slice);
        let (turns, fresh) = self.fresh(&inner, priority, person, now);
        counted(
            q.iter()
                .filter(|w| self.goes_before(w, fresh, turns.as_ref(), now)),
        )
    }

    /// The jobs waiting in `lane` that `job` would have been taken after (see
    /// [`Queue::ahead_of`]), without an await.
    pub fn ahead_of_now(&self, lane: &Lane, job: &Job) -> Ahead {
        self.counted_beside(lane, job, |theirs, mine| theirs < mine)
    }

    /// The jobs waiting in `lane` that `job` goes before, of its effective class (see
    /// [`Queue::behind_of`]), without an await.
    pub fn behind_of_now(&self, lane: &Lane, job: &Job) -> Ahead {
        self.counted_beside(lane, job, |theirs, mine| {
            theirs.0 == mine.0 && theirs > mine
        })
    }

    /// The jobs waiting in `lane` whose order (effective class, turn, when they began to
    /// wait) `pick` takes, given the order of `job`, which a worker took (and runs: it
    /// is not its own turn's rival).
    fn counted_beside(
        &self,
        lane: &Lane,
        job: &Job,
        pick: impl Fn((u8, Turn, Instant), (u8, Turn, Instant)) -> bool,
    ) -> Ahead {
        let now = Instant::now();
        let since = waiting_since(job, now);
        let rank = self.aging.rank(job.priority, now.duration_since(since));
        let inner = self.lock();
        let (turns, turn) = self.turns_beside(&inner, &job.person, (rank, since, 0), true, now);
        let mine = (rank, turn, since);
        let q = inner.lanes.get(lane).map_or(&[][..], Vec::as_slice);
        counted(q.iter().filter(|w| {
            let (rank, turn, since, _) = self.fair(w, turns.as_ref(), now);
            pick((rank, turn, since), mine)
        }))
    }

    /// What waits before a fresh job of `priority` in `lane`, for placement and the
    /// expected wait ([`crate::dispatch::Dispatcher::ahead`]): per lane, the jobs a fresh
    /// one would be taken after, counted by [`PlacementWaiting::count`] among `statuses`;
    /// but a job left for a sooner worker, that every other worker serving its lane
    /// avoids now, is that worker's backlog wherever it waits ([`PlacementWaiting::left`]):
    /// it runs there, before whatever that worker takes next. One pass over the queue
    /// under its lock; nothing is allocated unless some machine owes work.
    pub fn waiting_before(
        &self,
        lane: &Lane,
        priority: Priority,
        person: &Person,
        statuses: &[WorkerStatus],
    ) -> PlacementWaiting {
        let now = Instant::now();
        let inner = self.lock();
        let (turns, fresh) = self.fresh(&inner, priority, person, now);
        self.waiting_where(&inner, lane, statuses, |w| {
            self.goes_before(w, fresh, turns.as_ref(), now)
        })
    }

    /// What waits before task `task_id`, waiting in `lane`, as [`Self::waiting_before`]
    /// counts it for a fresh job, but of the jobs the queue takes before this one now: a
    /// job queued after it, in another lane, runs after it, and a job that has aged past
    /// it runs before. `None` when it does not wait in `lane`.
    pub fn waiting_before_task(
        &self,
        lane: &Lane,
        task_id: TaskId,
        statuses: &[WorkerStatus],
    ) -> Option<PlacementWaiting> {
        let now = Instant::now();
        let inner = self.lock();
        let turns = self.turns(&inner, now, None);
        let mine = inner
            .lanes
            .get(lane)?
            .iter()
            .find(|w| w.job.task_id == task_id)?;
        let mine = self.fair(mine, turns.as_ref(), now);
        Some(self.waiting_where(&inner, lane, statuses, |w| {
            self.fair(w, turns.as_ref(), now) < mine
        }))
    }

    /// What waits in every lane of `inner` among the jobs that `before` holds for, as
    /// placement counts it for a task of `lane` (see [`Self::waiting_before`]).
    fn waiting_where(
        &self,
        inner: &Inner,
        lane: &Lane,
        statuses: &[WorkerStatus],
        before: impl Fn(&Waiting) -> bool,
    ) -> PlacementWaiting {
        let wall = Utc::now();
        let mut waiting = PlacementWaiting::default();
        for (l, q) in &inner.lanes {
            let mut free = Ahead::NONE;
            for w in q.iter().filter(|w| before(w)) {
                let one = counted(std::iter::once(w));
                if w.job.avoid.is_empty()
                    || !waiting.left(statuses, l, |s| w.job.avoids(s, wall), one)
                {
                    free = free.plus(one);
                }
            }
            if free.jobs > 0 {
                waiting.count(statuses, lane, l, free);
            }
        }
        waiting
    }

    /// Whether `w` goes before a fresh job that stands at `fresh` (see [`Self::fresh`])
    /// at `now`: a better effective class, or the same and a turn no later.
    fn goes_before(
        &self,
        w: &Waiting,
        fresh: (u8, Turn),
        turns: Option<&Turns>,
        now: Instant,
    ) -> bool {
        let (rank, turn, _, _) = self.fair(w, turns, now);
        (rank, turn) <= fresh
    }

    /// The place of `task_id` among the jobs waiting in `lane`, in the order they will be
    /// taken now (see [`Queue::position`]).
    fn place(&self, lane: &Lane, task_id: TaskId) -> Option<usize> {
        let now = Instant::now();
        let inner = self.lock();
        let turns = self.turns(&inner, now, None);
        let q = inner.lanes.get(lane)?;
        let mine = q.iter().find(|w| w.job.task_id == task_id)?;
        let mine = self.fair(mine, turns.as_ref(), now);
        Some(
            1 + q
                .iter()
                .filter(|w| self.fair(w, turns.as_ref(), now) < mine)
                .count(),
        )
    }
}

#[async_trait]
impl Queue for InProcessQueue {
    async fn enqueue(&self, job: Job) -> Result<(), QueueError> {
        self.push(job);
        Ok(())
    }

    async fn dequeue_from(
        &self,
        takes: &Takes,
        consumer: &WorkerName,
    ) -> Result<Delivery, QueueError> {
        loop {
            // Register interest before looking, so an enqueue between the look and the
            // wait still wakes us.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.take_or_next(takes, consumer) {
                Ok((job, running)) => {
                    return Ok(Delivery {
                        running: Some(std::sync::Arc::new(running)),
                        ..Delivery::in_process(job)
                    });
                }
                Err(None) => notified.await,
                // A job left to the others until a time: look again then, if nothing
                // else comes first.
                Err(Some(until)) => {
                    let wait = (until - Utc::now()).to_std().unwrap_or_default();
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    async fn ack(&self, _delivery: &Delivery) -> Result<(), QueueError> {
        Ok(())
    }

    async fn awaited(&self, lanes: &[Lane]) -> Result<Vec<Lane>, QueueError> {
        Ok(self.awaited_now(lanes))
    }

    async fn ahead(
        &self,
        lane: &Lane,
        priority: Priority,
        person: &Person,
    ) -> Result<Ahead, QueueError> {
        Ok(self.ahead_now(lane, priority, person))
    }

    async fn ahead_of(&self, lane: &Lane, job: &Job) -> Result<Ahead, QueueError> {
        Ok(self.ahead_of_now(lane, job))
    }

    async fn behind_of(&self, lane: &Lane, job: &Job) -> Result<Ahead, QueueError> {
        Ok(self.behind_of_now(lane, job))
    }

    async fn ping(&self) -> Result<(), QueueError> {
        Ok(())
    }

    async fn task_ids(&self) -> Result<std::collections::HashSet<TaskId>, QueueError> {
        let inner = self.lock();
        Ok(inner
            .lanes
            .values()
            .flatten()
            .map(|w| w.job.task_id)
            .collect())
    }

    async fn position(&self, lane: &Lane, task_id: TaskId) -> Result<Option<usize>, QueueError> {
        Ok(self.place(lane, task_id))
    }

    async fn withdraw(
        &self,
        _lane: &Lane,
        _priority: Priority,
        task_id: TaskId,
    ) -> Result<bool, QueueError> {
        Ok(InProcessQueue::withdraw(self, task_id))
    }

    async fn class_depths(&self) -> Result<Vec<(Lane, Priority, usize)>, QueueError> {
        let inner = self.lock();
        let mut out: Vec<(Lane, Priority, usize)> = Vec::new();
        for (lane, q) in &inner.lanes {
            for class in Priority::ALL {
                let n = q.iter().filter(|w| w.job.priority == class).count();
                if n > 0 {
                    out.push((lane.clone(), class, n));
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::domain::ModelName;

    use crate::testkit::samples::sample_job as job;

    fn of(lane: &Lane, priority: Priority) -> Job {
        Job {
            priority,
            ..job(lane)
        }
    }

    const AGING: std::time::Duration = std::time::Duration::from_secs(60);

    async fn take_all(q: &InProcessQueue, lanes: &[Lane]) -> Vec<TaskId> {
        let w = WorkerName::parse("w").unwrap();
        let mut out = Vec::new();
        while let Some(j) = q.try_take(&Takes::all(lanes.to_vec()), &w) {
            out.push(j.task_id);
        }
        out
    }

    fn person(p: &str) -> Person {
        Person::parse(p).unwrap()
    }

    fn of_person(lane: &Lane, priority: Priority, who: &Person) -> Job {
        Job {
            person: who.clone(),
            ..of(lane, priority)
        }
    }

    /// Takes the next job as a worker would, keeping it running (its token held).
    fn take_running(q: &InProcessQueue, lanes: &[Lane], running: &mut Vec<Running>) -> TaskId {
        let w = WorkerName::parse("w").unwrap();
        let (job, token) = q.take_or_next(&Takes::all(lanes.to_vec()), &w).unwrap();
        token.began();
        running.push(token);
        job.task_id
    }

    #[tokio::test(start_paused = true)]
    async fn people_take_turns_within_a_class_and_one_persons_jobs_keep_their_order() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let (a, b) = (
            Lane::parse("tasks:llm:a").unwrap(),
            Lane::parse("tasks:llm:b").unwrap(),
        );
        let (dad, mum, kid) = (person("dad"), person("mum"), person("kid"));
        let dads: Vec<Job> = (0..3)
            .map(|_| of_person(&a, Priority::Interactive, &dad))
            .collect();
        for j in &dads {
            q.push(j.clone());
            tokio::time::advance(std::time::Duration::from_millis(10)).await;
        }
        let mums = of_person(&b, Priority::Interactive, &mum);
        q.push(mums.clone());
        tokio::time::advance(std::time::Duration::from_millis(10)).await;
        let kids: Vec<Job> = (0..2)
            .map(|_| of_person(&a, Priority::Interactive, &kid))
            .collect();
        for j in &kids {
            q.push(j.clone());
        }
        // Dad's background job is older than everyone's chats but of a worse class.
        let dads_title = of_person(&a, Priority::Background, &dad);
        // Before any runs: each person's first, oldest first, then each one's second.
        assert_eq!(q.place(&a, dads[0].task_id), Some(1));
        assert_eq!(q.place(&a, kids[0].task_id), Some(2));
        assert_eq!(q.place(&a, dads[1].task_id), Some(3));
        assert_eq!(q.place(&a, kids[1].task_id), Some(4));
        assert_eq!(q.place(&a, dads[2].task_id), Some(5));
        q.push(dads_title.clone());

        let mut running = Vec::new();
        let lanes = [a.clone(), b.clone()];
        let order: Vec<TaskId> = (0..7)
            .map(|_| take_running(&q, &lanes, &mut running))
            .collect();
        assert_eq!(
            order,
            [
                &dads[0],
                &mums,
                &kids[0],
                &dads[1],
                &kids[1],
                &dads[2],
                &dads_title
            ]
            .map(|j| j.task_id)
        );
    }

    /// One slot, freed one job at a time: nobody has a job running when the next is
    /// taken, and the person served longest ago (here never) goes first.
    #[tokio::test(start_paused = true)]
    async fn people_take_the_machine_in_rounds_when_it_frees_one_slot_at_a_time() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:a").unwrap();
        let (u1, u2) = (person("webui/u1"), person("webui/u2"));
        let u1s: Vec<Job> = (0..3)
            .map(|_| of_person(&lane, Priority::Interactive, &u1))
            .collect();
        for j in &u1s {
            q.push(j.clone());
            tokio::time::advance(std::time::Duration::from_millis(10)).await;
        }
        let u2s = of_person(&lane, Priority::Interactive, &u2);
        q.push(u2s.clone());
        assert_eq!(q.place(&lane, u2s.task_id), Some(2));
        let w = WorkerName::parse("w").unwrap();
        let mut order = Vec::new();
        while let Some(job) = q.try_take(&Takes::all(vec![lane.clone()]), &w) {
            order.push(job.task_id);
            tokio::time::advance(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(order, [&u1s[0], &u2s, &u1s[1], &u1s[2]].map(|j| j.task_id));
    }

    #[tokio::test(start_paused = true)]
    async fn a_person_whose_job_runs_waits_behind_those_with_none() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:a").unwrap();
        let (dad, mum) = (person("dad"), person("mum"));
        let dads: Vec<Job> = (0..3)
            .map(|_| of_person(&lane, Priority::Interactive, &dad))
            .collect();
        for j in &dads {
            q.push(j.clone());
        }
        let mut running = Vec::new();
        assert_eq!(
            take_running(&q, std::slice::from_ref(&lane), &mut running),
            dads[0].task_id
        );
        // Mum's chat comes while dad's first runs: it is next, and a fresh one of hers
        // would go straight to a free worker; a fresh one of dad's would not.
        assert!(q.first_in_line(&lane, Priority::Interactive, &mum));
        assert!(!q.first_in_line(&lane, Priority::Interactive, &dad));
        assert_eq!(q.ahead_now(&lane, Priority::Interactive, &mum).jobs, 0);
        assert_eq!(q.ahead_now(&lane, Priority::Interactive, &dad).jobs, 2);
        let mums = of_person(&lane, Priority::Interactive, &mum);
        q.push(mums.clone());
        assert_eq!(q.place(&lane, mums.task_id), Some(1));
        assert_eq!(q.place(&lane, dads[1].task_id), Some(2));
        let statuses = [];
        let before = |id| {
            q.waiting_before_task(&lane, id, &statuses)
                .map(|w| w.ahead.jobs)
        };
        assert_eq!(before(mums.task_id), Some(0));
        assert_eq!(before(dads[2].task_id), Some(2));
        // A worker that took dad's second would have had mum's before it.
        assert_eq!(q.ahead_of_now(&lane, &dads[1]).jobs, 0);

        assert_eq!(
            take_running(&q, std::slice::from_ref(&lane), &mut running),
            mums.task_id
        );
        // Dad's first ends while mum's runs: his second is his first in progress again,
        // and mum's next chat is her second, as is dad's third: the older goes first.
        running.remove(0);
        assert_eq!(q.place(&lane, dads[1].task_id), Some(1));
        let mums_next = of_person(&lane, Priority::Interactive, &mum);
        q.push(mums_next.clone());
        assert_eq!(q.place(&lane, mums_next.task_id), Some(3));
        drop(running);
        assert_eq!(
            take_all(&q, &[lane]).await,
            [&dads[1], &dads[2], &mums_next].map(|j| j.task_id)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn each_persons_waiting_jobs_are_counted_across_lanes_until_taken() {
        let q = InProcessQueue::new();
        let (a, b) = (
            Lane::parse("tasks:llm:a").unwrap(),
            Lane::parse("tasks:utility").unwrap(),
        );
        let (alice, bob) = (
            Person::parse("alice").unwrap(),
            Person::parse("bob").unwrap(),
        );
        let of_person = |lane: &Lane, person: &Person| Job {
            person: person.clone(),
            ..job(lane)
        };
        q.push(of_person(&a, &alice));
        q.push(of_person(&b, &alice));
        q.push(of_person(&a, &bob));
        assert_eq!(q.waiting_of(&alice), 2);
        assert_eq!(q.waiting_of(&bob), 1);
        assert_eq!(q.waiting_of(&Person::default()), 0);
        let w = WorkerName::parse("w").unwrap();
        let first = q.try_take(&Takes::all(vec![a.clone()]), &w).unwrap();
        assert_eq!(first.person, alice);
        assert_eq!((q.waiting_of(&alice), q.waiting_of(&bob)), (1, 1));
        take_all(&q, &[a, b]).await;
        assert_eq!((q.waiting_of(&alice), q.waiting_of(&bob)), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_withdrawn_job_leaves_its_lane_and_its_persons_count() {
        let q = InProcessQueue::new();
        let lane = Lane::parse("tasks:llm:a").unwrap();
        let alice = person("alice");
        let first = of_person(&lane, Priority::Interactive, &alice);
        let second = of_person(&lane, Priority::Interactive, &alice);
        q.push(first.clone());
        q.push(second.clone());
        assert!(q.withdraw(first.task_id));
        assert!(!q.withdraw(first.task_id), "once");
        assert_eq!(q.waiting_of(&alice), 1);
        assert_eq!(q.place(&lane, second.task_id), Some(1));
        assert!(q.withdraw(second.task_id));
        assert_eq!(q.waiting(&lane), 0);
        assert!(q.lock().lanes.is_empty() && q.lock().by_person.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_best_priority_goes_first_across_lanes_then_the_oldest() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let (a, b) = (
            Lane::parse("tasks:llm:a").unwrap(),
            Lane::parse("tasks:utility").unwrap(),
        );
        let batch = of(&a, Priority::Batch);
        let bg1 = of(&b, Priority::Background);
        let bg2 = of(&a, Priority::Background);
        let chat1 = of(&a, Priority::Interactive);
        let chat2 = of(&b, Priority::Interactive);
        for j in [&batch, &bg1, &bg2, &chat1, &chat2] {
            q.push(j.clone());
        }
        assert_eq!(
            take_all(&q, &[a, b]).await,
            [chat1, chat2, bg1, bg2, batch].map(|j| j.task_id)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_jobs_ahead_of_a_fresh_one_are_those_it_does_not_overtake_with_their_prompts() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let (a, b) = (
            Lane::parse("tasks:llm:a").unwrap(),
            Lane::parse("tasks:llm:b").unwrap(),
        );
        let asking = |chars: usize, priority| {
            let mut j = of(&a, priority);
            j.request.messages = vec![crate::chat::ChatMessage::user("x".repeat(chars))];
            j
        };
        let chat = asking(400, Priority::Interactive);
        let batch = asking(4000, Priority::Batch);
        let tokens = |j: &Job| u64::from(j.request.estimated_prompt_tokens());
        assert!(tokens(&chat) > 0 && tokens(&batch) > tokens(&chat));
        q.push(chat.clone());
        q.push(batch.clone());
        q.push(of(&b, Priority::Interactive));
        // A person's turn goes before the batch job, after the other person's: one ahead.
        assert_eq!(
            q.ahead(&a, Priority::Interactive, &Person::default())
                .await
                .unwrap(),
            Ahead {
                jobs: 1,
                prompt_tokens: Some(tokens(&chat)),
            }
        );
        // A batch job goes after both.
        assert_eq!(
            q.ahead_now(&a, Priority::Batch, &Person::default()),
            Ahead {
                jobs: 2,
                prompt_tokens: Some(tokens(&chat) + tokens(&batch)),
            }
        );
        // Once the batch job has waited two promotions, a fresh turn goes after it too.
        tokio::time::advance(AGING * 2).await;
        assert_eq!(
            q.ahead_now(&a, Priority::Interactive, &Person::default())
                .jobs,
            2
        );
        assert_eq!(
            q.ahead_now(
                &Lane::parse("tasks:web").unwrap(),
                Priority::Batch,
                &Person::default()
            )
            .jobs,
            0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_queued_again_keeps_its_age_and_its_place() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let w = WorkerName::parse("w").unwrap();
        let a = Lane::parse("tasks:llm:a").unwrap();
        let all = Takes::all(vec![a.clone()]);
        let held = of(&a, Priority::Background);
        let later = of(&a, Priority::Background);
        q.push(held.clone());
        tokio::time::advance(AGING * 5 / 6).await;
        q.push(later.clone());
        // A worker takes it after 50 s and holds it back: it is queued again.
        let taken = q.try_take(&all, &w).unwrap();
        assert_eq!(taken.task_id, held.task_id);
        assert!(taken.waiting_since.is_some());
        q.push(taken);
        // It still goes before the background job queued after it.
        assert_eq!(q.place(&a, held.task_id), Some(1));
        assert_eq!(q.place(&a, later.task_id), Some(2));
        // 20 s on it has waited 70 s in all, more than one promotion: a person's turn
        // queued now goes after it, and the later background job (30 s) after that turn.
        tokio::time::advance(AGING / 3).await;
        let chat = of(&a, Priority::Interactive);
        q.push(chat.clone());
        assert_eq!(
            take_all(&q, std::slice::from_ref(&a)).await,
            [held.task_id, chat.task_id, later.task_id]
        );
    }

    #[tokio::test]
    async fn a_lane_taken_for_people_only_leaves_background_work_waiting() {
        let q = InProcessQueue::new();
        let w = WorkerName::parse("w").unwrap();
        let (a, b) = (
            Lane::parse("tasks:llm:a").unwrap(),
            Lane::parse("tasks:llm:b").unwrap(),
        );
        let background = of(&a, Priority::Background);
        q.push(background.clone());
        assert!(q.awaited_now(&[a.clone(), b.clone()]).is_empty());
        let chat = of(&b, Priority::Interactive);
        q.push(chat.clone());
        assert_eq!(
            q.awaited(&[a.clone(), b.clone()]).await.unwrap(),
            vec![b.clone()]
        );
        let people_only = Takes {
            lanes: vec![a.clone(), b.clone()],
            interactive_only: vec![a.clone()],
        };
        assert_eq!(q.try_take(&people_only, &w).unwrap().task_id, chat.task_id);
        assert!(
            q.try_take(&people_only, &w).is_none(),
            "background work was taken"
        );
        assert_eq!(
            q.try_take(&Takes::all(vec![a]), &w).unwrap().task_id,
            background.task_id
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_promotes_a_job_one_class_per_aging_step() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:m").unwrap();
        let batch = of(&lane, Priority::Batch);
        q.push(batch.clone());
        tokio::time::advance(AGING).await;
        // Now it counts as background: older than a fresh background job, behind a chat.
        let chat = of(&lane, Priority::Interactive);
        let bg = of(&lane, Priority::Background);
        q.push(chat.clone());
        q.push(bg.clone());
        assert_eq!(q.place(&lane, chat.task_id), Some(1));
        assert_eq!(q.place(&lane, batch.task_id), Some(2));
        assert_eq!(q.place(&lane, bg.task_id), Some(3));
        // Another step: all three count as interactive now, and go oldest first.
        tokio::time::advance(AGING).await;
        assert_eq!(q.place(&lane, batch.task_id), Some(1));
        assert_eq!(
            take_all(&q, std::slice::from_ref(&lane)).await,
            [batch, chat, bg].map(|j| j.task_id)
        );
    }

    /// Interactive work arriving all the time does not starve a batch job: it runs once
    /// it has waited two aging steps.
    #[tokio::test(start_paused = true)]
    async fn a_batch_job_is_not_starved_by_a_stream_of_chats() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:m").unwrap();
        let w = WorkerName::parse("w").unwrap();
        let batch = of(&lane, Priority::Batch);
        q.push(batch.clone());
        let step = std::time::Duration::from_secs(10);
        let mut waited = std::time::Duration::ZERO;
        loop {
            q.push(of(&lane, Priority::Interactive));
            tokio::time::advance(step).await;
            waited += step;
            let taken = q.try_take(&Takes::all(vec![lane.clone()]), &w).unwrap();
            if taken.task_id == batch.task_id {
                break;
            }
            assert!(waited <= 2 * AGING, "the batch job waited {waited:?}");
        }
        assert!(waited >= 2 * AGING - step, "it ran at {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn positions_count_who_goes_first_in_the_lane_only() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:m").unwrap();
        let other = Lane::parse("tasks:llm:n").unwrap();
        let bg = of(&lane, Priority::Background);
        let elsewhere = of(&other, Priority::Interactive);
        let chat = of(&lane, Priority::Interactive);
        for j in [&bg, &elsewhere, &chat] {
            q.push(j.clone());
        }
        assert_eq!(q.position(&lane, chat.task_id).await.unwrap(), Some(1));
        assert_eq!(q.position(&lane, bg.task_id).await.unwrap(), Some(2));
        assert_eq!(
            q.position(&other, elsewhere.task_id).await.unwrap(),
            Some(1)
        );
        assert_eq!(q.position(&other, bg.task_id).await.unwrap(), None);
        assert_eq!(q.position(&lane, TaskId::new()).await.unwrap(), None);
        let w = WorkerName::parse("w").unwrap();
        q.try_take(&Takes::all(vec![lane.clone()]), &w).unwrap();
        assert_eq!(q.position(&lane, chat.task_id).await.unwrap(), None);
        assert_eq!(q.position(&lane, bg.task_id).await.unwrap(), Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_job_is_first_in_line_only_past_worse_waiting_work() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:m").unwrap();
        assert!(q.first_in_line(&lane, Priority::Batch, &Person::default()));
        q.push(of(&lane, Priority::Background));
        assert!(q.first_in_line(&lane, Priority::Interactive, &Person::default()));
        assert!(!q.first_in_line(&lane, Priority::Background, &Person::default()));
        assert!(!q.first_in_line(&lane, Priority::Batch, &Person::default()));
        // Promoted by its wait, the background job goes before a fresh chat.
        tokio::time::advance(AGING).await;
        assert!(!q.first_in_line(&lane, Priority::Interactive, &Person::default()));
        let other = Lane::parse("tasks:llm:n").unwrap();
        assert!(q.first_in_line(&other, Priority::Batch, &Person::default()));
    }

    #[tokio::test]
    async fn oldest_job_across_lanes_first_among_equal_priorities() {
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
        assert!(q.try_take(&Takes::all(vec![lane.clone()]), &bad).is_none());
        assert_eq!(
            q.dequeue(&[lane], &good).await.unwrap().job.task_id,
            j.task_id
        );
    }

    /// A job left for a sooner worker until a time, as in Redis: the worker it was left
    /// by takes other work meanwhile, and takes it once that time has come, waking for it
    /// without anything queued. A job avoided without a time (it failed there) stays the
    /// others'.
    #[tokio::test]
    async fn a_job_left_for_another_worker_until_a_time_is_taken_back_after_it() {
        let q = InProcessQueue::new();
        let lane = Lane::parse("tasks:llm:m").unwrap();
        let left_by = WorkerName::parse("ai-core").unwrap();
        let all = Takes::all(vec![lane.clone()]);
        let left = |until: Option<chrono::Duration>| Job {
            avoid: vec![left_by.clone()],
            avoid_until: until.map(|d| Utc::now() + d),
            ..job(&lane)
        };
        let later = left(Some(chrono::Duration::hours(1)));
        let other = job(&lane);
        q.push(later.clone());
        q.push(other.clone());
        assert_eq!(q.try_take(&all, &left_by).unwrap().task_id, other.task_id);
        assert!(
            q.try_take(&all, &left_by).is_none(),
            "taken before its time"
        );
        let failed = left(None);
        q.push(failed.clone());
        assert!(
            q.try_take(&all, &left_by).is_none(),
            "taken where it failed"
        );
        let due = left(Some(chrono::Duration::zero()));
        q.push(due.clone());
        assert_eq!(q.try_take(&all, &left_by).unwrap().task_id, due.task_id);
        // A worker already waiting when the time comes takes it then.
        let soon = left(Some(chrono::Duration::milliseconds(50)));
        q.push(soon.clone());
        let taken = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            q.dequeue(std::slice::from_ref(&lane), &left_by),
        )
        .await
        .expect("the worker it was left by never took it back")
        .unwrap();
        assert_eq!(taken.job.task_id, soon.task_id);
    }

    /// A job a worker took after it waited counts only the jobs that were to go before
    /// it, not those queued since (a fresh job's count: in the household, a chat turn
    /// looked at again after 2 s saw a later coder turn and a later chat turn before it,
    /// and went to the laptop).
    #[tokio::test(start_paused = true)]
    async fn the_jobs_ahead_of_a_taken_job_are_those_queued_before_it() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:a").unwrap();
        q.push(of(&lane, Priority::Interactive));
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
        q.push(of(&lane, Priority::Interactive));
        // Taken a second after the first was queued, a second before the second.
        let mine = Job {
            waiting_since: Some(Utc::now() - chrono::Duration::seconds(1)),
            ..of(&lane, Priority::Interactive)
        };
        assert_eq!(q.ahead_of(&lane, &mine).await.unwrap().jobs, 1);
        assert_eq!(
            q.ahead_now(&lane, Priority::Interactive, &Person::default())
                .jobs,
            2
        );
    }

    /// The jobs behind a taken job are those of its class queued after it: not those
    /// queued before it, nor background work (its wait weighs less than a person's).
    #[tokio::test(start_paused = true)]
    async fn the_jobs_behind_a_taken_job_are_those_of_its_class_queued_after_it() {
        let q = InProcessQueue::with_aging(Aging::every(AGING));
        let lane = Lane::parse("tasks:llm:a").unwrap();
        q.push(of(&lane, Priority::Interactive));
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
        q.push(of(&lane, Priority::Interactive));
        q.push(of(&lane, Priority::Background));
        let mine = Job {
            waiting_since: Some(Utc::now() - chrono::Duration::seconds(1)),
            ..of(&lane, Priority::Interactive)
        };
        let behind = q.behind_of(&lane, &mine).await.unwrap();
        assert_eq!(behind, counted(q.lock().lanes[&lane][1..2].iter()));
        assert_eq!(behind.jobs, 1);
        // Nothing of another lane.
        let other = Lane::parse("tasks:llm:b").unwrap();
        assert_eq!(q.behind_of(&other, &mine).await.unwrap().jobs, 0);
    }

    /// A one-slot machine serving `models`, healthy, idle.
    fn machine(name: &str, models: &[&str]) -> WorkerStatus {
        crate::testkit::samples::idle_worker(name, models)
    }

    /// A chat turn ai-core left for moon runs on moon, before moon's next job of any
    /// lane: it is moon's backlog, for a coder turn (only moon serves the coder) and for
    /// a chat turn alike (in the household, coder turns were shown 12 s sooner than they
    /// came). Once its time has come, ai-core may take it too: the lane's again.
    #[tokio::test]
    async fn a_job_left_for_one_machine_is_that_machines_backlog_in_every_lane() {
        let q = InProcessQueue::new();
        let statuses = [
            machine("moon", &["chat", "coder"]),
            machine("ai-core", &["chat"]),
        ];
        let (chat, coder) = (
            Lane::parse("tasks:llm:chat").unwrap(),
            Lane::parse("tasks:llm:coder").unwrap(),
        );
        let left = |until: chrono::Duration| {
            let mut j = of(&chat, Priority::Interactive);
            j.request.model = ModelName::parse("chat").unwrap();
            j.request.messages = vec![crate::chat::ChatMessage::user("x".repeat(4000))];
            j.avoid = vec![WorkerName::parse("ai-core").unwrap()];
            j.avoid_until = Some(Utc::now() + until);
            j
        };
        let job = left(chrono::Duration::hours(1));
        let tokens = u64::from(job.request.estimated_prompt_tokens());
        q.push(job);
        let owed = |w: &PlacementWaiting| -> Vec<(String, String, Ahead)> {
            let moon = WorkerName::parse("moon").unwrap();
            w.backlog
                .of(&moon)
                .map(|o| (o.worker.to_string(), o.model.to_string(), o.ahead))
                .collect()
        };
        let on_moon = vec![(
            "moon".to_owned(),
            "chat".to_owned(),
            Ahead {
                jobs: 1,
                prompt_tokens: Some(tokens),
            },
        )];
        for lane in [&coder, &chat] {
            let w = q.waiting_before(lane, Priority::Interactive, &Person::default(), &statuses);
            assert_eq!(owed(&w), on_moon, "{lane}");
            assert_eq!(w.ahead.jobs, 0, "{lane}");
        }
        // Its time has come: either machine may take it.
        let q = InProcessQueue::new();
        q.push(left(-chrono::Duration::seconds(1)));
        let w = q.waiting_before(&chat, Priority::Interactive, &Person::default(), &statuses);
        assert!(w.backlog.is_empty(), "{w:?}");
        assert_eq!(w.ahead.jobs, 1);
    }

    /// A waiting task's expected wait counts the jobs the queue takes before it: a coder
    /// turn queued before a chat turn is moon's backlog for it, one queued after is not
    /// (moon takes the older chat turn first), and neither is background work queued
    /// earlier, which an interactive turn overtakes. A fresh chat turn counts the coder
    /// turn that went before it.
    #[tokio::test]
    async fn a_waiting_task_counts_the_other_lanes_jobs_taken_before_it() {
        let q = InProcessQueue::new();
        let statuses = [
            machine("moon", &["chat", "coder"]),
            machine("ai-core", &["chat"]),
        ];
        let (chat, coder) = (
            Lane::parse("tasks:llm:chat").unwrap(),
            Lane::parse("tasks:llm:coder").unwrap(),
        );
        let moon = WorkerName::parse("moon").unwrap();
        let owed = |w: &PlacementWaiting| w.backlog.of(&moon).map(|o| o.ahead.jobs).sum::<usize>();
        let background = of(&coder, Priority::Background);
        let first = of(&chat, Priority::Interactive);
        let coder_turn = of(&coder, Priority::Interactive);
        let second = of(&chat, Priority::Interactive);
        for j in [&background, &first, &coder_turn, &second] {
            q.push(j.clone());
        }
        let before = |task: &Job| {
            q.waiting_before_task(&chat, task.task_id, &statuses)
                .unwrap()
        };
        assert_eq!(owed(&before(&first)), 0);
        assert_eq!(before(&first).ahead.jobs, 0);
        assert_eq!(owed(&before(&second)), 1);
        assert_eq!(before(&second).ahead.jobs, 1, "the first chat turn");
        assert_eq!(
            owed(&q.waiting_before(&chat, Priority::Interactive, &Person::default(), &statuses)),
            1
        );
        assert!(
            q.waiting_before_task(&coder, first.task_id, &statuses)
                .is_none(),
            "not waiting in that lane"
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
