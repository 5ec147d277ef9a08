//! Heartbeats read on this process's clock, through Redis's (`TIME`, see
//! [`crate::queue::redis::clock`]).
//!
//! A heartbeat tells its times (when each running answer began, its first token, the
//! conversations served lately, when each resident model expires) on its sender's clock,
//! with how far Redis's clock reads ahead of that one. A reader moves them onto its own
//! clock through Redis's. Without it, a worker machine whose clock drifted (Windows syncs
//! about once a week) would show its running answers seconds further along than they
//! are, or not begun, to placement in every other process.

use chrono::TimeDelta;

use super::Heartbeat;
use crate::backend::clock::moved;

impl Heartbeat {
    /// Moves the heartbeat's times from its sender's clock onto this process's, where
    /// Redis's clock reads `here` ahead. A heartbeat that does not say how its sender's
    /// clock reads against Redis's (an older version's) is left as it is.
    pub(crate) fn onto_this_clock(&mut self, here: TimeDelta) {
        let Some(sender) = self.redis_ahead_ms else {
            return;
        };
        let by = TimeDelta::milliseconds(sender) - here;
        if by == TimeDelta::zero() {
            return;
        }
        self.at = moved(self.at, by);
        let status = &mut self.status;
        for r in &mut status.running {
            r.started_at = moved(r.started_at, by);
            r.first_token_at = r.first_token_at.map(|t| moved(t, by));
        }
        for r in &mut status.recent {
            r.at = moved(r.at, by);
        }
        for r in &mut status.resident {
            r.expires_at = r.expires_at.map(|t| moved(t, by));
        }
        // The backend's clock against the sender's, now against this process's.
        if let Some(ms) = &mut status.clock_ahead_ms {
            *ms -= by.num_milliseconds();
        }
        // Told on this clock now.
        self.redis_ahead_ms = Some(here.num_milliseconds());
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::backend::activity::{Recent, Running};
    use crate::backend::registry::Resident;
    use crate::domain::{ModelName, ThreadId};

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    /// A laptop's heartbeat: an answer begun at 12:00:00 with its first token at
    /// 12:00:02, a conversation served at 11:58, a model resident until 12:05, all on the
    /// laptop's clock, whose Ollama agrees with it.
    fn laptops(redis_ahead_ms: Option<i64>) -> Heartbeat {
        let model = ModelName::parse("qwen2.5:7b").unwrap();
        let mut status = crate::testkit::samples::idle_worker("laptop", &["qwen2.5:7b"]);
        status.running = vec![Running {
            model: model.clone(),
            started_at: at("2026-12-07T12:00:00Z"),
            first_token_at: Some(at("2026-12-07T12:00:02Z")),
            tokens: 10,
            prompt_tokens: 100,
            cold: false,
            cached: false,
            priority: Default::default(),
        }];
        status.recent = vec![Recent {
            thread: ThreadId::parse("t1").unwrap(),
            model: model.clone(),
            at: at("2026-12-07T11:58:00Z"),
            tokens: 500,
        }];
        status.resident = vec![Resident {
            model: model.clone(),
            expires_at: Some(at("2026-12-07T12:05:00Z")),
            evict_rank: Some(300),
        }];
        status.clock_ahead_ms = Some(0);
        Heartbeat {
            status,
            tools: vec![(model, Some(false))],
            at: at("2026-12-07T12:00:03Z"),
            redis_ahead_ms,
        }
    }

    #[test]
    fn a_heartbeat_from_a_clock_ahead_is_read_on_this_one() {
        // Redis reads 20 s behind the laptop, and 1.5 s ahead of this process.
        let mut hb = laptops(Some(-20_000));
        hb.onto_this_clock(TimeDelta::milliseconds(1_500));
        assert_eq!(hb.at, at("2026-12-07T11:59:41.500Z"));
        let r = &hb.status.running[0];
        assert_eq!(r.started_at, at("2026-12-07T11:59:38.500Z"));
        assert_eq!(r.first_token_at, Some(at("2026-12-07T11:59:40.500Z")));
        assert_eq!(hb.status.recent[0].at, at("2026-12-07T11:57:38.500Z"));
        assert_eq!(
            hb.status.resident[0].expires_at,
            Some(at("2026-12-07T12:04:38.500Z"))
        );
        // Its Ollama agrees with the laptop, so reads 21.5 s ahead of this process.
        assert_eq!(hb.status.clock_ahead_ms, Some(21_500));
        // Read again, it stays where it is.
        let once = hb.clone();
        hb.onto_this_clock(TimeDelta::milliseconds(1_500));
        assert_eq!(hb, once);
    }

    #[test]
    fn a_heartbeat_that_does_not_say_its_clock_is_read_as_it_is() {
        let mut hb = laptops(None);
        hb.onto_this_clock(TimeDelta::seconds(7));
        assert_eq!(hb, laptops(None));
    }

    #[test]
    fn a_heartbeat_on_the_same_clock_as_redis_and_this_process_is_unchanged() {
        let mut hb = laptops(Some(0));
        hb.onto_this_clock(TimeDelta::zero());
        assert_eq!(hb, laptops(Some(0)));
    }
}
