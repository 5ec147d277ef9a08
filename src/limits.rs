//! Bounded work: how much one person may ask for, and how much may wait in one lane.
//!
//! A device on the home network that floods the endpoint (a script gone wrong, a hostile
//! one with a key) must not push everyone else's chats behind thousands of its tasks.
//! Each person has a token bucket (governor's GCRA) over the requests that make work
//! (chats, `POST /route`), and each lane a bound on the tasks waiting in it; past either,
//! the request is refused with 429 and a `Retry-After`, and nothing is recorded.

use std::num::NonZeroU32;
use std::time::Duration;

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
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            requests_per_minute: 600,
            burst: 60,
            queued_per_lane: 1000,
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
}

impl Refusal {
    /// Whole seconds for `Retry-After`, at least one.
    pub fn retry_after_s(&self) -> u64 {
        let (Self::TooFast { retry_after } | Self::LaneFull { retry_after }) = self;
        (retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).max(1)
    }
}

/// How long a client is asked to wait before sending work to a full lane again.
const FULL_LANE_RETRY: Duration = Duration::from_secs(10);

pub struct Limits {
    per_person: Option<DefaultKeyedRateLimiter<Person>>,
    queued_per_lane: usize,
}

impl Limits {
    pub fn new(config: &LimitsConfig) -> Self {
        let per_person = NonZeroU32::new(config.requests_per_minute).map(|rate| {
            let burst = NonZeroU32::new(config.burst).unwrap_or(NonZeroU32::MIN);
            DefaultKeyedRateLimiter::keyed(Quota::per_minute(rate).allow_burst(burst))
        });
        Self {
            per_person,
            queued_per_lane: config.queued_per_lane,
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
    fn zero_turns_each_limit_off() {
        let limits = Limits::new(&LimitsConfig {
            requests_per_minute: 0,
            burst: 0,
            queued_per_lane: 0,
        });
        let bob = person("bob");
        for _ in 0..10_000 {
            assert_eq!(limits.admit(&bob), Ok(()));
        }
        assert_eq!(limits.room_in_lane(usize::MAX), Ok(()));
        assert!(!limits.bounds_lanes());
    }

    #[test]
    fn a_full_lane_refuses_more() {
        let limits = Limits::default();
        assert_eq!(limits.room_in_lane(999), Ok(()));
        let refused = limits.room_in_lane(1000).unwrap_err();
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
