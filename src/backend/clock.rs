//! How far another machine's clock reads from this one's, from the times it tells.
//!
//! Ollama says when a resident model unloads (`/api/ps` `expires_at`) on its own clock,
//! and Coordinator weighs that against its own: whether the expiry is the one its
//! keep-alive set ([`super::keep_alive::expiry_set_by`], two seconds of slack), the
//! server's default keep-alive it learns, the time a model has left. Clocks at home drift
//! apart between syncs (Windows syncs about once a week) by more than that slack, so each
//! expiry is read on this machine's clock: less the offset the answers' `Date`s show.
//! In cluster mode, Redis's `TIME` is the clock every process's heartbeat is read
//! against (`crate::cluster`).

use chrono::{DateTime, TimeDelta, Utc};

/// What the `Date`s seen so far allow of the offset (the machine's clock minus this
/// one's): an interval that each answer narrows.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    bounds: Option<(TimeDelta, TimeDelta)>,
}

impl ClockOffset {
    /// Takes in an answer whose clock read `reading`, told to `resolution` (a whole
    /// second for an HTTP `Date`), asked at `sent` and received at `received` on this
    /// clock: the machine read `reading` (or up to `resolution` more) at some moment
    /// between the two. An answer that no longer fits what the earlier ones allowed (a
    /// clock was set meanwhile) starts the interval again.
    pub fn observe(
        &mut self,
        reading: DateTime<Utc>,
        resolution: TimeDelta,
        sent: DateTime<Utc>,
        received: DateTime<Utc>,
    ) {
        if received < sent {
            // This clock went back during the call: the answer places nothing.
            return;
        }
        let lo = reading - received;
        let hi = reading + resolution - sent;
        self.bounds = Some(match self.bounds {
            Some((l, h)) if l.max(lo) <= h.min(hi) => (l.max(lo), h.min(hi)),
            _ => (lo, hi),
        });
    }

    /// The machine's clock minus this one's: zero when the answers allow it (the clocks
    /// agree as far as whole-second `Date`s tell), else the middle of what they allow;
    /// `None` before any answer.
    pub fn offset(&self) -> Option<TimeDelta> {
        let (lo, hi) = self.bounds?;
        Some(if lo <= TimeDelta::zero() && TimeDelta::zero() <= hi {
            TimeDelta::zero()
        } else {
            lo + (hi - lo) / 2
        })
    }
}

/// `t` moved by `by` (from one clock onto another), or `t` as it is where that would
/// leave the calendar.
pub fn moved(t: DateTime<Utc>, by: TimeDelta) -> DateTime<Utc> {
    t.checked_add_signed(by).unwrap_or(t)
}

/// An HTTP `Date` header (`Mon, 07 Dec 2026 11:18:03 GMT`) in UTC; `None` when it does
/// not parse.
pub fn parse_http_date(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(text.trim())
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

/// Whether an offset (`None`: not known) moved across a second either way, for a log
/// line: `Some(true)` when the clocks came to differ by more than a second, `Some(false)`
/// when they came back within it.
pub fn crossed_a_second(before: Option<TimeDelta>, after: Option<TimeDelta>) -> Option<bool> {
    let apart = |o: Option<TimeDelta>| o.is_some_and(|o| o.abs() > TimeDelta::seconds(1));
    let (was, is) = (apart(before), apart(after));
    (was != is).then_some(is)
}

/// How an offset reads in a log line: "12.3 s ahead of", "0.8 s behind".
pub fn describe(offset: TimeDelta) -> String {
    let s = offset.num_milliseconds() as f64 / 1000.0;
    if s >= 0.0 {
        format!("{s:.1} s ahead of")
    } else {
        format!("{:.1} s behind", -s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_796_000_000_000 + ms).unwrap()
    }

    /// The `Date` a machine `ahead_ms` ahead sends when it answers at `ms` on this clock.
    fn date(ms: i64, ahead_ms: i64) -> DateTime<Utc> {
        let theirs = at(ms + ahead_ms);
        DateTime::from_timestamp(theirs.timestamp(), 0).unwrap()
    }

    impl ClockOffset {
        fn observe_date(
            &mut self,
            date: DateTime<Utc>,
            sent: DateTime<Utc>,
            received: DateTime<Utc>,
        ) {
            self.observe(date, TimeDelta::seconds(1), sent, received);
        }
    }

    #[test]
    fn nothing_is_known_before_an_answer() {
        assert_eq!(ClockOffset::default().offset(), None);
    }

    #[test]
    fn clocks_in_step_read_as_zero_whatever_the_answers_fraction_of_a_second() {
        let mut clock = ClockOffset::default();
        for ms in [0, 130, 480, 999, 1_500, 7_770] {
            clock.observe_date(date(ms + 2, 0), at(ms), at(ms + 4));
            assert_eq!(clock.offset(), Some(TimeDelta::zero()), "at {ms}");
        }
    }

    #[test]
    fn a_clock_ahead_or_behind_is_found_closer_with_every_answer() {
        for ahead_ms in [30_400, -12_250, 2_900] {
            let mut clock = ClockOffset::default();
            clock.observe_date(date(0, ahead_ms), at(0), at(3));
            let first = clock.offset().unwrap().num_milliseconds();
            assert!((first - ahead_ms).abs() <= 503, "{ahead_ms}: {first}");
            // Answers at other fractions of a second (37 ms apart, as looks every 1.037 s
            // would come) narrow it to about that and the calls' length.
            for k in 1..=40 {
                let ms = k * 1_037;
                clock.observe_date(date(ms + 1, ahead_ms), at(ms), at(ms + 3));
            }
            let later = clock.offset().unwrap().num_milliseconds();
            assert!((later - ahead_ms).abs() <= 25, "{ahead_ms}: {later}");
        }
    }

    #[test]
    fn a_clock_set_meanwhile_starts_the_estimate_again() {
        let mut clock = ClockOffset::default();
        for ms in [0, 1_300, 2_600, 3_900] {
            clock.observe_date(date(ms, 20_000), at(ms), at(ms + 2));
        }
        assert!((clock.offset().unwrap().num_milliseconds() - 20_000).abs() <= 500);
        // The machine synced: its clock agrees with this one from now on.
        clock.observe_date(date(5_000, 0), at(5_000), at(5_002));
        assert_eq!(clock.offset(), Some(TimeDelta::zero()));
    }

    #[test]
    fn a_call_during_which_this_clock_went_back_is_left_out() {
        let mut clock = ClockOffset::default();
        clock.observe_date(date(0, 20_000), at(10), at(0));
        assert_eq!(clock.offset(), None);
    }

    #[test]
    fn a_reading_to_the_microsecond_places_the_clock_within_the_calls_length() {
        let mut clock = ClockOffset::default();
        let reading = at(2_500) + TimeDelta::microseconds(1_250_001);
        clock.observe(reading, TimeDelta::microseconds(1), at(2_000), at(2_003));
        let found = clock.offset().unwrap();
        assert!(
            (found - TimeDelta::milliseconds(1_750)).abs() <= TimeDelta::milliseconds(2),
            "{found}"
        );
    }

    #[test]
    fn a_time_moves_by_an_offset_and_stays_where_the_calendar_ends() {
        assert_eq!(moved(at(0), TimeDelta::milliseconds(-1_500)), at(-1_500));
        assert_eq!(
            moved(DateTime::<Utc>::MAX_UTC, TimeDelta::seconds(1)),
            DateTime::<Utc>::MAX_UTC
        );
    }

    #[test]
    fn http_dates_parse_as_go_writes_them() {
        assert_eq!(
            parse_http_date("Mon, 07 Dec 2026 11:18:03 GMT"),
            Some(
                DateTime::parse_from_rfc3339("2026-12-07T11:18:03Z")
                    .unwrap()
                    .with_timezone(&Utc)
            )
        );
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn an_offset_is_told_when_it_crosses_a_second_either_way() {
        let ms = |n| Some(TimeDelta::milliseconds(n));
        assert_eq!(crossed_a_second(None, ms(0)), None);
        assert_eq!(crossed_a_second(None, ms(1_500)), Some(true));
        assert_eq!(crossed_a_second(ms(400), ms(-2_000)), Some(true));
        assert_eq!(crossed_a_second(ms(1_500), ms(30_000)), None);
        assert_eq!(crossed_a_second(ms(-1_500), ms(0)), Some(false));
        assert_eq!(crossed_a_second(ms(900), ms(1_000)), None);
    }

    #[test]
    fn offsets_are_described_both_ways() {
        assert_eq!(describe(TimeDelta::milliseconds(12_340)), "12.3 s ahead of");
        assert_eq!(describe(TimeDelta::milliseconds(-800)), "0.8 s behind");
    }
}
