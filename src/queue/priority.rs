//! Priorities: which waiting job a worker takes first.
//!
//! Three classes: a person waiting for a chat turn ([`Priority::Interactive`]), work sent
//! to a model on someone's behalf that nobody watches (Open WebUI's background tasks sent
//! to a model: [`Priority::Background`]), and bulk work ([`Priority::Batch`], `/route` with
//! `"priority": "batch"`). A worker takes the job with the best *effective* class across
//! its lanes, the oldest first among equals; waiting promotes a job one class every
//! `[scheduler] aging_s` ([`Aging`]), so batch work runs even while interactive work keeps
//! arriving. Both queues order jobs with [`Aging::rank`].

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::domain::{InternalTask, ParseError};

/// How urgent a task is: who waits for it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// A person waits for the answer.
    #[default]
    Interactive,
    /// Nobody watches it come (titles, tags, follow-ups, query rewriting, memory
    /// condensation sent to a model).
    Background,
    /// Bulk work: whenever nothing more urgent waits.
    Batch,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Self::Interactive, Self::Background, Self::Batch];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Background => "background",
            Self::Batch => "batch",
        }
    }

    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParseError {
                what: "priority",
                reason: format!("{s:?} is not interactive, background or batch"),
            })
    }

    /// The priority of a turn: what the client asked for, else background for an Open
    /// WebUI background task sent to a model, else interactive (a person waits).
    pub fn of_turn(asked: Option<Priority>, internal_task: Option<InternalTask>) -> Self {
        asked.unwrap_or(match internal_task {
            Some(_) => Self::Background,
            None => Self::Interactive,
        })
    }

    /// 0 for interactive, 1 for background, 2 for batch: lower is taken first.
    fn class(self) -> u8 {
        match self {
            Self::Interactive => 0,
            Self::Background => 1,
            Self::Batch => 2,
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for Priority {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// How waiting promotes a job: after each `every` in the queue it counts one class higher
/// (a batch job waiting twice that long competes with fresh interactive turns, and the
/// older goes first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aging {
    every: Duration,
}

impl Default for Aging {
    fn default() -> Self {
        Self::every(Duration::from_secs(DEFAULT_AGING_S))
    }
}

impl Aging {
    /// Promotion every `every` (at least 1 ms).
    pub fn every(every: Duration) -> Self {
        Self {
            every: every.max(Duration::from_millis(1)),
        }
    }

    /// The effective class of a job of `priority` that has waited `waited`: lower is
    /// taken first; jobs of equal rank are taken oldest first.
    pub fn rank(self, priority: Priority, waited: Duration) -> u8 {
        let steps = waited.as_millis() / self.every.as_millis();
        let steps = u8::try_from(steps).unwrap_or(u8::MAX);
        priority.class().saturating_sub(steps)
    }

    /// Whether a job of `priority` handed out now, without waiting, is taken before one
    /// of `other` that has waited `waited` (the older wins a tie).
    pub fn fresh_goes_before(self, priority: Priority, other: Priority, waited: Duration) -> bool {
        self.rank(priority, Duration::ZERO) < self.rank(other, waited)
    }
}

/// The classes whose waiting jobs a fresh job of `priority` is taken after, where the
/// queue knows how many wait of each class but not how long (waiting then promotes none):
/// its own class and the better ones. [`Aging::fresh_goes_before`] with no wait.
pub fn classes_ahead_of(priority: Priority) -> impl Iterator<Item = Priority> {
    Priority::ALL
        .into_iter()
        .filter(move |p| !Aging::default().fresh_goes_before(priority, *p, Duration::ZERO))
}

/// `[scheduler] aging_s` when the config does not say.
pub const DEFAULT_AGING_S: u64 = 60;

/// `[scheduler]`: how waiting work is promoted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerConfig {
    /// Seconds after which a waiting job counts one priority class higher (batch →
    /// background → interactive), so nothing starves. Default 60.
    pub aging_s: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            aging_s: DEFAULT_AGING_S,
        }
    }
}

impl SchedulerConfig {
    pub fn validate(&self, problems: &mut Vec<String>) {
        if self.aging_s == 0 {
            problems.push(
                "scheduler.aging_s: must be at least 1 (seconds a job waits before it counts \
                 one priority class higher)"
                    .to_owned(),
            );
        }
    }

    pub fn aging(&self) -> Aging {
        Aging::every(Duration::from_secs(self.aging_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn priorities_parse_and_print_as_lowercase_words() {
        for p in Priority::ALL {
            assert_eq!(Priority::parse(p.as_str()), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::json!(p.as_str())
            );
            assert_eq!(
                serde_json::from_value::<Priority>(serde_json::json!(p.as_str())).unwrap(),
                p
            );
        }
        assert_eq!(Priority::parse(" Batch "), Ok(Priority::Batch));
        let e = Priority::parse("urgent").unwrap_err();
        assert_eq!(e.what, "priority");
        assert!(e.reason.contains("urgent"), "{e}");
        assert!(Priority::parse("").is_err());
    }

    #[test]
    fn a_turn_is_interactive_unless_it_is_a_background_task_or_asks() {
        assert_eq!(Priority::of_turn(None, None), Priority::Interactive);
        assert_eq!(
            Priority::of_turn(None, Some(InternalTask::TitleGeneration)),
            Priority::Background
        );
        assert_eq!(
            Priority::of_turn(Some(Priority::Batch), None),
            Priority::Batch
        );
        assert_eq!(
            Priority::of_turn(
                Some(Priority::Interactive),
                Some(InternalTask::QueryGeneration)
            ),
            Priority::Interactive
        );
    }

    #[test]
    fn waiting_promotes_one_class_per_aging_step() {
        let a = Aging::every(MIN);
        assert_eq!(a.rank(Priority::Batch, Duration::ZERO), 2);
        assert_eq!(a.rank(Priority::Batch, MIN - Duration::from_millis(1)), 2);
        assert_eq!(a.rank(Priority::Batch, MIN), 1);
        assert_eq!(a.rank(Priority::Batch, 2 * MIN), 0);
        assert_eq!(a.rank(Priority::Batch, 100 * MIN), 0);
        assert_eq!(a.rank(Priority::Background, MIN), 0);
        assert_eq!(a.rank(Priority::Interactive, 5 * MIN), 0);
        assert_eq!(a.rank(Priority::Batch, Duration::MAX), 0);
    }

    #[test]
    fn a_fresh_job_goes_first_only_past_a_worse_effective_class() {
        let a = Aging::every(MIN);
        assert!(a.fresh_goes_before(Priority::Interactive, Priority::Background, MIN / 2));
        assert!(!a.fresh_goes_before(Priority::Interactive, Priority::Background, MIN));
        assert!(!a.fresh_goes_before(Priority::Background, Priority::Background, Duration::ZERO));
        assert!(!a.fresh_goes_before(Priority::Batch, Priority::Interactive, Duration::ZERO));
    }

    #[test]
    fn aging_zero_is_refused_by_name() {
        let mut problems = Vec::new();
        SchedulerConfig { aging_s: 0 }.validate(&mut problems);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with("scheduler.aging_s:"),
            "{problems:?}"
        );
        let mut problems = Vec::new();
        SchedulerConfig::default().validate(&mut problems);
        assert!(problems.is_empty());
        assert_eq!(SchedulerConfig::default().aging(), Aging::every(MIN));
    }

    #[test]
    fn the_config_loader_takes_aging_s_and_names_a_bad_one() {
        let cfg = crate::config::load_str("[scheduler]\naging_s = 15\n", Vec::new()).unwrap();
        assert_eq!(cfg.scheduler.aging_s, 15);
        let cfg = crate::config::load_str("", Vec::new()).unwrap();
        assert_eq!(cfg.scheduler.aging_s, DEFAULT_AGING_S);
        let e = crate::config::load_str("[scheduler]\naging_s = 0\n", Vec::new()).unwrap_err();
        let problems = e.problems().join("\n");
        assert!(problems.contains("scheduler.aging_s"), "{problems}");
    }
}
