//! Turns: the household's people take turns in the in-process queue.
//!
//! Without them, one person's twenty waiting chats (a script, an agent that calls the
//! endpoint in a loop, a parent's batch of questions) would run before a child's one, in
//! the order they came. With them, among waiting jobs of one effective class (priority
//! and aging first: [`super::priority`]), the next is the one with the lowest [`Turn`]:
//! how many of its person's jobs run now or wait before it, then the person served
//! longest ago (or never). So a person whose job runs waits behind those with none
//! running, each person's first waiting job goes before anyone's second, people take the
//! machine in rounds when it frees one slot at a time, and one person's own jobs keep
//! their order. Among equal turns the one waiting longest goes first, as before.
//!
//! A job counts as running from the moment it is handed out (taken from the queue, or
//! handed straight to a free worker) until its [`Running`] is dropped with the delivery:
//! when it ends, whatever way, or goes back to the queue. Its person counts as served
//! once it begins on a worker ([`Running::began`]); a job taken and put straight back
//! for want of a slot does not count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use crate::domain::{Lane, Person, Priority, TaskId};

/// How many people's last service is remembered: past it the longest ago are forgotten,
/// which puts them where they would stand if they had not been served for a long time.
const SERVED_REMEMBERED: usize = 1024;

/// Where a job stands among the people's work, smaller first: how many of its person's
/// jobs run now or wait before it, then when its person was last served (never first).
pub type Turn = (u32, Option<Instant>);

/// The people's running jobs and last service, of those handed out by one queue.
#[derive(Debug, Default, Clone)]
pub struct Ledger(Arc<Mutex<People>>);

#[derive(Debug, Default)]
struct People {
    running: HashMap<Person, u32>,
    served: HashMap<Person, Instant>,
}

impl People {
    /// The turn of `person`'s next job, with `before` of theirs waiting ahead of it.
    fn turn(&self, person: &Person, before: u32) -> Turn {
        let running = self.running.get(person).copied().unwrap_or(0);
        (
            running.saturating_add(before),
            self.served.get(person).copied(),
        )
    }
}

impl Ledger {
    fn lock(&self) -> MutexGuard<'_, People> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a job of `person` as running until the returned token is dropped.
    pub fn start(&self, person: &Person) -> Running {
        *self.lock().running.entry(person.clone()).or_default() += 1;
        Running {
            ledger: self.clone(),
            person: person.clone(),
        }
    }

    /// Counts `person` as served now.
    fn served(&self, person: &Person) {
        let mut people = self.lock();
        people.served.insert(person.clone(), Instant::now());
        if people.served.len() > SERVED_REMEMBERED {
            let mut times: Vec<Instant> = people.served.values().copied().collect();
            times.sort_unstable();
            let keep_from = times[times.len() / 2];
            people.served.retain(|_, at| *at >= keep_from);
        }
    }

    /// The turn of a job of `person` with `before` of their jobs waiting ahead of it,
    /// `less` of their running ones set aside (the job itself, when it runs).
    pub fn turn(&self, person: &Person, before: u32, less: u32) -> Turn {
        let (turn, served) = self.lock().turn(person, before);
        (turn.saturating_sub(less), served)
    }
}

/// One job handed out and not yet ended (see the module's text).
#[derive(Debug)]
pub struct Running {
    ledger: Ledger,
    person: Person,
}

impl Running {
    /// The job begins to run on a machine: its person counts as served from now. (A job
    /// taken and put straight back, for want of a slot, never began.)
    pub fn began(&self) {
        self.ledger.served(&self.person);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut people = self.ledger.lock();
        if let Some(n) = people.running.get_mut(&self.person) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                people.running.remove(&self.person);
            }
        }
    }
}

/// Each waiting job's turn.
#[derive(Debug, Default)]
pub struct Turns(HashMap<TaskId, Turn>);

impl Turns {
    /// The turns of `waiting` (each job's task, person, and its order without turns).
    pub fn of<'a, O: Ord>(
        waiting: impl Iterator<Item = (TaskId, &'a Person, O)>,
        ledger: &Ledger,
    ) -> Self {
        let mut all: Vec<(TaskId, &Person, O)> = waiting.collect();
        all.sort_by(|a, b| a.2.cmp(&b.2));
        let people = ledger.lock();
        let mut before: HashMap<&Person, u32> = HashMap::new();
        let turns = all
            .into_iter()
            .map(|(id, person, _)| {
                let n = before.entry(person).or_default();
                let turn = people.turn(person, *n);
                *n += 1;
                (id, turn)
            })
            .collect();
        Self(turns)
    }

    /// The turn of waiting task `id` (the first, for one not among them).
    pub fn of_task(&self, id: TaskId) -> Turn {
        self.0.get(&id).copied().unwrap_or((0, None))
    }
}

/// The waiting jobs, per lane, that a fresh job of `priority` from `person` is taken
/// after, where the queue knows only how many jobs each person has waiting and running
/// per lane and class (Redis: [`super::Queue::people_depths`]). All of the better classes
/// count ([`super::priority::classes_ahead_of`]; waiting promotes none here), and in its
/// own class all of the person's own, and each other person's first few: the fresh job's
/// turn is its person's running jobs plus their waiting ones of its class, and another
/// person's k-th waiting job (from 0) has their running jobs plus k. An equal turn counts
/// as before it (it goes to whoever was served longer ago, which is not known here).
pub fn ahead_in_turn(
    depths: &[super::Depth],
    priority: Priority,
    person: &Person,
) -> Vec<(Lane, usize)> {
    let mut running: HashMap<&Person, usize> = HashMap::new();
    for d in depths {
        *running.entry(&d.person).or_default() += d.running;
    }
    let running_of = |p: &Person| running.get(p).copied().unwrap_or(0);
    let own: usize = depths
        .iter()
        .filter(|d| d.priority == priority && &d.person == person)
        .map(|d| d.waiting)
        .sum();
    let turn = running_of(person) + own;
    let mut out: Vec<(Lane, usize)> = Vec::new();
    for d in depths {
        if !super::priority::classes_ahead_of(priority).any(|c| c == d.priority) {
            continue;
        }
        let n = if d.priority != priority || &d.person == person {
            d.waiting
        } else {
            d.waiting
                .min((turn + 1).saturating_sub(running_of(&d.person)))
        };
        if n == 0 {
            continue;
        }
        match out.iter_mut().find(|(l, _)| *l == d.lane) {
            Some((_, sum)) => *sum += n,
            None => out.push((d.lane.clone(), n)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(p: &str) -> Person {
        Person::parse(p).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_running_job_counts_until_its_token_is_dropped_and_its_person_stays_served() {
        let ledger = Ledger::default();
        let (dad, mum) = (person("dad"), person("mum"));
        assert_eq!(ledger.turn(&dad, 0, 0), (0, None));
        let first = ledger.start(&dad);
        assert_eq!(
            ledger.turn(&dad, 0, 0),
            (1, None),
            "not served before it began"
        );
        first.began();
        let served = Instant::now();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let second = ledger.start(&dad);
        second.began();
        let again = Instant::now();
        assert_eq!(ledger.turn(&dad, 0, 0), (2, Some(again)));
        assert_eq!(ledger.turn(&dad, 3, 1), (4, Some(again)));
        assert_eq!(ledger.turn(&mum, 0, 0), (0, None));
        drop(first);
        assert_eq!(ledger.turn(&dad, 0, 0), (1, Some(again)));
        drop(second);
        assert_eq!(ledger.turn(&dad, 0, 0), (0, Some(again)));
        assert!(served < again);
        assert!(
            ledger.lock().running.is_empty(),
            "no person is kept with nothing running"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn turns_count_the_persons_running_and_earlier_jobs_then_their_last_service() {
        let ledger = Ledger::default();
        let (dad, mum, kid) = (person("dad"), person("mum"), person("kid"));
        ledger.start(&mum).began();
        let mum_served = Instant::now();
        let running = ledger.start(&dad);
        running.began();
        let dad_served = Instant::now();
        let ids: Vec<TaskId> = (0..5).map(|_| TaskId::new()).collect();
        // In the order they would go without turns: dad's three first, then mum, then kid.
        let waiting = [
            (ids[0], &dad, 1),
            (ids[3], &mum, 4),
            (ids[1], &dad, 2),
            (ids[4], &kid, 5),
            (ids[2], &dad, 3),
        ];
        let turns = Turns::of(waiting.into_iter(), &ledger);
        let of: Vec<Turn> = ids.iter().map(|id| turns.of_task(*id)).collect();
        assert_eq!(
            of,
            [
                (1, Some(dad_served)),
                (2, Some(dad_served)),
                (3, Some(dad_served)),
                (0, Some(mum_served)),
                (0, None)
            ]
        );
        assert_eq!(turns.of_task(TaskId::new()), (0, None));
    }

    #[test]
    fn where_only_counts_are_known_another_persons_jobs_count_up_to_ones_turn() {
        let (a, b) = (
            Lane::parse("tasks:llm:a").unwrap(),
            Lane::parse("tasks:llm:b").unwrap(),
        );
        let (dad, kid) = (person("dad"), person("kid"));
        let depth =
            |lane: &Lane, priority, person: &Person, waiting, running| super::super::Depth {
                lane: lane.clone(),
                priority,
                person: person.clone(),
                waiting,
                running,
            };
        let depths = [
            depth(&a, Priority::Interactive, &dad, 5, 1),
            depth(&b, Priority::Interactive, &dad, 2, 0),
            depth(&a, Priority::Background, &dad, 4, 0),
            depth(&a, Priority::Interactive, &kid, 1, 0),
        ];
        // The kid's turn is 1 (one waiting): dad's jobs with a turn of 1 or less in each
        // lane, dad having one running: one in a, one in b; and the kid's own.
        assert_eq!(
            ahead_in_turn(&depths, Priority::Interactive, &kid),
            [(a.clone(), 2), (b.clone(), 1)]
        );
        // Dad's turn is 1 + 7: all of his own, and the kid's one.
        assert_eq!(
            ahead_in_turn(&depths, Priority::Interactive, &dad),
            [(a.clone(), 6), (b.clone(), 2)]
        );
        // Background work goes after every interactive job; among its class, dad (one
        // running) comes after the kid (none).
        assert_eq!(
            ahead_in_turn(&depths, Priority::Background, &kid),
            [(a.clone(), 6), (b.clone(), 2)]
        );
        let nobody = person("nobody");
        assert_eq!(
            ahead_in_turn(&depths, Priority::Interactive, &nobody),
            [(a.clone(), 1)],
            "a person with nothing waiting or running goes after the kid's first only: \
             dad has one running"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_longest_ago_served_are_forgotten_past_the_bound() {
        let ledger = Ledger::default();
        let people: Vec<Person> = (0..=SERVED_REMEMBERED)
            .map(|n| person(&format!("p{n}")))
            .collect();
        for p in &people {
            ledger.start(p).began();
            tokio::time::advance(std::time::Duration::from_millis(1)).await;
        }
        let remembered = ledger.lock().served.len();
        assert!(remembered <= SERVED_REMEMBERED / 2 + 1, "{remembered}");
        assert_eq!(ledger.turn(&people[0], 0, 0), (0, None));
        assert!(ledger.turn(&people[SERVED_REMEMBERED], 0, 0).1.is_some());
    }
}
