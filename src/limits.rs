//! Bounded work: how much one person may ask for, and how much may wait in one lane.
//!
//! A device on the home network that floods the endpoint (a script gone wrong, a hostile
//! one with a key) must not push everyone else's chats behind thousands of its tasks.
//! Each person has a token bucket (governor's GCRA) over the requests that make work
//! (chats, `POST /route`), each person a bound on their tasks waiting, and each lane a
//! bound on the tasks waiting in it; past any, the request is refused with 429 and a
//! `Retry-After`, and nothing is recorded. The person's bound is below the lane's, so one
//! person's flood cannot fill a lane for everyone else (and in process the others' tasks
//! do not wait behind all of it: people take turns, see [`crate::queue::turns`]).
//!
//! Guessing keys is bounded too: a client address that presents wrong keys more often
//! than [`GUESSES_PER_MINUTE`] (after a burst of [`GUESS_BURST`]) is refused with 429 before
//! any key it sends is looked at, so the answers stop telling a right key from a wrong one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use serde::{Deserialize, Serialize};

use crate::domain::Person;

/// `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitsConfig {
    /// Requests that make work (chat turns, `/route`) each person may send per minute,
    /// on average; 0 turns the limit off.
    pub requests_per_minute: u32,
    /// How many such requests a person may send at once before the rate applies.
    pub burst: u32,
    /// Tasks that may wait in one lane; new work for a full lane is refused. 0 = no bound.
    pub queued_per_lane: usize,
    /// Tasks of one person that may wait (in every lane together); past it, that person's
    /// new work is refused while everyone else's is still taken. 0 = no bound.
    pub queued_per_person: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            requests_per_minute: 600,
            burst: 60,
            queued_per_lane: 1000,
            queued_per_person: 250,
        }
    }
}

impl LimitsConfig {
    pub fn validate(&self, problems: &mut Vec<String>) {
        if self.requests_per_minute > 0 && self.burst == 0 {
            problems.push(
                "limits.burst: must be at least 1 while limits.requests_per_minute is set"
                    .to_owned(),
            );
        }
    }
}

/// Why a request was refused, and when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The person sent more than their rate.
    TooFast { retry_after: Duration },
    /// The lane holds as many waiting tasks as it may.
    LaneFull { retry_after: Duration },
    /// The person has as many tasks waiting as they may.
    PersonFull { retry_after: Duration },
}

/// Every refusal's error code, in the order of [`Refusal::kind`].
pub const REFUSAL_CODES: [&str; 3] = ["rate_limit_exceeded", "queue_full", "too_many_waiting"];

impl Refusal {
    /// Where the refusal's code stands in [`REFUSAL_CODES`].
    pub fn kind(&self) -> usize {
        match self {
            Self::TooFast { .. } => 0,
            Self::LaneFull { .. } => 1,
            Self::PersonFull { .. } => 2,
        }
    }

    /// The error code the refusal is answered with (and counted under in
    /// `coordinator_limited_total`).
    pub fn code(&self) -> &'static str {
        REFUSAL_CODES[self.kind()]
    }

    /// Whole seconds for `Retry-After`, at least one.
    pub fn retry_after_s(&self) -> u64 {
        let (Self::TooFast { retry_after }
        | Self::LaneFull { retry_after }
        | Self::PersonFull { retry_after }) = self;
        (retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).max(1)
    }
}

/// How long a client is asked to wait before sending work to a full lane (or with as many
/// tasks waiting as they may have) again.
const FULL_LANE_RETRY: Duration = Duration::from_secs(10);

/// Wrong keys one client address may present per minute, after [`GUESS_BURST`] at once.
pub const GUESSES_PER_MINUTE: u32 = 30;
pub const GUESS_BURST: u32 = 10;

pub struct Limits {
    per_person: Option<DefaultKeyedRateLimiter<Person>>,
    queued_per_lane: usize,
    queued_per_person: usize,
    guesses: DefaultKeyedRateLimiter<IpAddr>,
    /// Addresses refused until the time given, for guessing; `any_blocked` lets every
    /// request skip the lock while there are none (the usual case).
    blocked: Mutex<HashMap<IpAddr, Instant>>,
    any_blocked: AtomicBool,
}

impl Limits {
    pub fn new(config: &LimitsConfig) -> Self {
        let per_person = NonZeroU32::new(config.requests_per_minute).map(|rate| {
            let burst = NonZeroU32::new(config.burst).unwrap_or(NonZeroU32::MIN);
            DefaultKeyedRateLimiter::keyed(Quota::per_minute(rate).allow_burst(burst))
        });
        let guess_rate = NonZeroU32::new(GUESSES_PER_MINUTE).unwrap_or(NonZeroU32::MIN);
        let guess_burst = NonZeroU32::new(GUESS_BURST).unwrap_or(NonZeroU32::MIN);
        Self {
            per_person,
            queued_per_lane: config.queued_per_lane,
            queued_per_person: config.queued_per_person,
            guesses: DefaultKeyedRateLimiter::keyed(
                Quota::per_minute(guess_rate).allow_burst(guess_burst),
            ),
            blocked: Mutex::new(HashMap::new()),
            any_blocked: AtomicBool::new(false),
        }
    }

    /// Refuses an address that guessed too often, before its key is looked at.
    pub fn not_guessing(&self, from: IpAddr) -> Result<(), Refusal> {
        if !self.any_blocked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut blocked = self
            .blocked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        blocked.retain(|_, until| *until > now);
        self.any_blocked
            .store(!blocked.is_empty(), Ordering::Relaxed);
        match blocked.get(&from) {
            Some(until) => Err(Refusal::TooFast {
                retry_after: until.saturating_duration_since(now),
            }),
            None => Ok(()),
        }
    }

    /// Counts a wrong or missing key from `from`; past the guess rate, the address is
    /// refused (by [`not_guessing`](Self::not_guessing)) until a guess is allowed again.
    pub fn wrong_key(&self, from: IpAddr) {
        if let Err(not_until) = self.guesses.check_key(&from) {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            self.blocked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(from, Instant::now() + wait);
            self.any_blocked.store(true, Ordering::Relaxed);
        }
    }

    /// Takes one request of `person` from their bucket, or says when one is free again.
    pub fn admit(&self, person: &Person) -> Result<(), Refusal> {
        let Some(limiter) = &self.per_person else {
            return Ok(());
        };
        limiter
            .check_key(person)
            .map_err(|not_until| Refusal::TooFast {
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            })
    }

    /// Refuses new work for a lane where `waiting` tasks wait already.
    pub fn room_in_lane(&self, waiting: usize) -> Result<(), Refusal> {
        if self.queued_per_lane > 0 && waiting >= self.queued_per_lane {
            return Err(Refusal::LaneFull {
                retry_after: FULL_LANE_RETRY,
            });
        }
        Ok(())
    }

    /// Whether a lane bound is set (only then is the backlog worth reading).
    pub fn bounds_lanes(&self) -> bool {
        self.queued_per_lane > 0
    }

    /// Refuses new work of a person who has `waiting` tasks waiting already.
    pub fn room_for_person(&self, waiting: usize) -> Result<(), Refusal> {
        if self.queued_per_person > 0 && waiting >= self.queued_per_person {
            return Err(Refusal::PersonFull {
                retry_after: FULL_LANE_RETRY,
            });
        }
        Ok(())
    }

    /// Whether a bound on each person's waiting tasks is set.
    pub fn bounds_people(&self) -> bool {
        self.queued_per_person > 0
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new(&LimitsConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(p: &str) -> Person {
        Person::parse(p).unwrap()
    }

    #[test]
    fn a_person_gets_their_burst_then_waits_and_others_are_not_affected() {
        let limits = Limits::new(&LimitsConfig {
            requests_per_minute: 60,
            burst: 3,
            queued_per_lane: 0,
            queued_per_person: 0,
        });
        let bob = person("bob");
        for _ in 0..3 {
            assert_eq!(limits.admit(&bob), Ok(()));
        }
        let Err(refused @ Refusal::TooFast { retry_after }) = limits.admit(&bob) else {
            panic!("the fourth request in a burst of three was let through");
        };
        assert!(retry_after <= Duration::from_secs(1), "{retry_after:?}");
        assert_eq!(refused.retry_after_s(), 1);
        assert_eq!(
            limits.admit(&person("alice")),
            Ok(()),
            "alice has her own bucket"
        );
    }

    #[test]
    fn an_address_that_guesses_is_refused_whatever_it_sends_and_others_are_not() {
        let limits = Limits::default();
        let guesser: IpAddr = "192.168.1.66".parse().unwrap();
        let neighbour: IpAddr = "192.168.1.10".parse().unwrap();
        for _ in 0..GUESS_BURST {
            assert_eq!(limits.not_guessing(guesser), Ok(()));
            limits.wrong_key(guesser);
        }
        // One more past the burst: from now on refused before any key is looked at.
        limits.wrong_key(guesser);
        let Err(Refusal::TooFast { retry_after }) = limits.not_guessing(guesser) else {
            panic!("the guesser was not refused");
        };
        assert!(retry_after <= Duration::from_secs(2), "{retry_after:?}");
        assert_eq!(limits.not_guessing(neighbour), Ok(()));
        limits.wrong_key(neighbour);
        assert_eq!(limits.not_guessing(neighbour), Ok(()));
    }

    #[test]
    fn zero_turns_each_limit_off() {
        let limits = Limits::new(&LimitsConfig {
            requests_per_minute: 0,
            burst: 0,
            queued_per_lane: 0,
            queued_per_person: 0,
        });
        let bob = person("bob");
        for _ in 0..10_000 {
            assert_eq!(limits.admit(&bob), Ok(()));
        }
        assert_eq!(limits.room_in_lane(usize::MAX), Ok(()));
        assert!(!limits.bounds_lanes());
        assert_eq!(limits.room_for_person(usize::MAX), Ok(()));
        assert!(!limits.bounds_people());
    }

    #[test]
    fn a_full_lane_refuses_more() {
        let limits = Limits::default();
        assert_eq!(limits.room_in_lane(999), Ok(()));
        let refused = limits.room_in_lane(1000).unwrap_err();
        assert_eq!(refused.retry_after_s(), 10);
    }

    #[test]
    fn a_person_with_their_share_waiting_is_refused_below_a_full_lane() {
        let limits = Limits::default();
        let config = LimitsConfig::default();
        assert!(config.queued_per_person < config.queued_per_lane);
        assert_eq!(limits.room_for_person(config.queued_per_person - 1), Ok(()));
        let refused = limits
            .room_for_person(config.queued_per_person)
            .unwrap_err();
        assert!(matches!(refused, Refusal::PersonFull { .. }), "{refused:?}");
        assert_eq!(refused.retry_after_s(), 10);
    }

    #[test]
    fn a_rate_without_a_burst_is_a_config_problem() {
        let mut problems = Vec::new();
        LimitsConfig {
            burst: 0,
            ..Default::default()
        }
        .validate(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
}
