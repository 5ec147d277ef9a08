//! How long Ollama keeps a model resident after a request (`keep_alive`), and how
//! Coordinator makes Ollama's choice of which model to push out the one placement weighs.
//!
//! Ollama does not evict the least recently used model. When a load needs room it sorts
//! the resident models by the `keep_alive` of the last request each served, shortest
//! first (one kept forever last), then by model file path, and unloads the first idle one
//! (`findRunnerToUnload` in its `server/sched.go`). With one keep-alive for every model,
//! the victim is the same model every time, however recently someone used it.
//!
//! So every request Coordinator sends an Ollama machine carries its keep-alive
//! *stamped*: the duration the person, the config or the server asked for, plus one
//! nanosecond per tenth of a second of the clock since [`EPOCH_MS`]. Within one keep-alive
//! the model last asked for then has the longest, and Ollama's order becomes the least
//! recently used first, as placement assumes ([`crate::placement::pushes_out`]); a
//! shorter keep-alive still goes before a longer one, as Ollama means it to. Requests a
//! tenth of a second apart are told apart; the stamp grows by a third of a second a year,
//! which nobody sees in how long a model stays (five minutes, and a third of a second in
//! 2027).
//!
//! A model kept forever (`-1`) is sent as [`FOREVER_SENT`], stamped: Ollama ranks every
//! `-1` alike and goes by file path among them, so a household that keeps two chat
//! models resident on one desktop would otherwise see the same one pushed out whenever a
//! third loads, the one used a moment ago included.
//!
//! Where neither the request nor the config sets a keep-alive, the server's own default
//! (`OLLAMA_KEEP_ALIVE`, five minutes unless set) applies; Coordinator learns it from
//! `/api/ps` once a load that a request setting none began has ended
//! ([`learned_default`]), and stamps from then on. Until then it sends none, so as never
//! to shorten what the machine's owner set; and an hour on it learns it again
//! ([`crate::backend::registry::RELEARN_KEEP_ALIVE_AFTER`]), the owner having perhaps
//! changed it.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// The stamp's zero: 2026-01-01T00:00:00Z, as Unix milliseconds.
pub const EPOCH_MS: i64 = 1_767_225_600_000;

/// Clock milliseconds per nanosecond of stamp.
const MS_PER_STAMP_NS: i64 = 100;

/// A keep-alive of forever as sent, before its stamp: two hundred years. Longer than any
/// a person sets as a duration, so it still ranks after them all; within Go's largest
/// duration (292 years), stamp included. Ollama's `/api/ps` shows its expiry two
/// centuries ahead, which [`learned_default`] reads back as forever.
pub const FOREVER_SENT: std::time::Duration = std::time::Duration::from_secs(200 * 365 * 86_400);

/// A `keep_alive` as Ollama reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Unload as soon as the request is done (`0`).
    Unload,
    /// Keep resident this long after the request.
    For(std::time::Duration),
    /// A negative value: keep until pushed out.
    Forever,
}

impl KeepAlive {
    /// Ollama's `keep_alive`: a number of seconds, or a Go duration (`"5m"`, `"1h30m"`,
    /// `"1.5s"`, `"-1m"`); a bare number in a string is taken as seconds. `None` when it is
    /// neither.
    pub fn parse(value: &Value) -> Option<Self> {
        let nanos = match value {
            // Ollama takes a number as seconds.
            Value::Number(n) => {
                let seconds = n.as_f64()?;
                if seconds < 0.0 {
                    return Some(Self::Forever);
                }
                let nanos = seconds * 1e9;
                // NaN and infinities are not JSON numbers; only too large is left.
                if nanos.is_nan() || nanos > i64::MAX as f64 {
                    return None;
                }
                nanos as i128
            }
            Value::String(s) => go_duration_ns(s.trim())?,
            _ => return None,
        };
        Some(match u64::try_from(nanos) {
            Err(_) => Self::Forever,
            Ok(0) => Self::Unload,
            Ok(n) => Self::For(std::time::Duration::from_nanos(n)),
        })
    }

    /// How long the model stays resident once idle: none for `0`, `None` for forever.
    pub fn lasts(self) -> Option<std::time::Duration> {
        match self {
            Self::Unload => Some(std::time::Duration::ZERO),
            Self::For(d) => Some(d),
            Self::Forever => None,
        }
    }

    /// What Ollama's eviction order compares: the duration in nanoseconds, one kept
    /// forever as the longest (Ollama stores it as the largest duration).
    pub fn rank(self) -> u64 {
        match self {
            Self::Unload => 0,
            Self::For(d) => u64::try_from(d.as_nanos()).unwrap_or(i64::MAX as u64),
            Self::Forever => i64::MAX as u64,
        }
    }

    /// This keep-alive stamped with `at` (see the module doc): a positive duration grows
    /// by one nanosecond per tenth of a second since [`EPOCH_MS`], forever becomes
    /// [`FOREVER_SENT`] grown so; `0` is sent as it is.
    pub fn stamped(self, at: DateTime<Utc>) -> Self {
        let stamp = std::time::Duration::from_nanos(stamp_ns(at));
        match self {
            Self::For(d) => Self::For(d + stamp),
            Self::Forever => Self::For(FOREVER_SENT + stamp),
            Self::Unload => Self::Unload,
        }
    }

    /// As sent to Ollama: seconds with nanoseconds in a duration string for a positive
    /// one (exact, where a floating-point number of seconds may lose the stamp), `0` or
    /// `-1` else.
    pub fn to_json(self) -> Value {
        match self {
            Self::Unload => Value::from(0),
            Self::For(d) => Value::from(format!("{}.{:09}s", d.as_secs(), d.subsec_nanos())),
            Self::Forever => Value::from(-1),
        }
    }
}

/// Nanoseconds of stamp at `at`: tenths of a second since [`EPOCH_MS`] (none before).
fn stamp_ns(at: DateTime<Utc>) -> u64 {
    u64::try_from((at.timestamp_millis() - EPOCH_MS) / MS_PER_STAMP_NS).unwrap_or(0)
}

/// Where Ollama puts a resident model in its order of models to push out
/// ([`KeepAlive::rank`]), as far as its expiry (`/api/ps` `expires_at`, seen at `now`)
/// tells when no request from this process set its keep-alive: the nanoseconds it has
/// left (none once past). That is at most the keep-alive Ollama holds for it (an idle
/// model expires that long after its last request ended), so one the owner keeps for
/// hours or forever ranks after those Coordinator stamps with minutes, and models that
/// share a keep-alive rank in the order they were last used, as the stamp orders them.
pub fn rank_from_expiry(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    let left = expires_at
        .signed_duration_since(now)
        .max(chrono::TimeDelta::zero());
    left.num_nanoseconds()
        .map_or(KeepAlive::Forever.rank(), i64::unsigned_abs)
}

/// How far from the expiry a keep-alive set may `/api/ps` show one, and still be taken
/// as set by it: Ollama sets the expiry as the request's connection closes, and this
/// process notes the end as its answer's last piece arrives, milliseconds apart (more
/// under load).
pub const EXPIRY_SLACK: chrono::TimeDelta = chrono::TimeDelta::seconds(2);

/// Whether the expiry `/api/ps` shows (`expires_at`) is the one a keep-alive of `rank`
/// nanoseconds ([`KeepAlive::rank`]) set when the request that carried it ended at
/// `ended`, give or take [`EXPIRY_SLACK`]. When it is not, another client's request set
/// the model's keep-alive since (or loaded it again after it was pushed out).
pub fn expiry_set_by(rank: u64, ended: DateTime<Utc>, expires_at: DateTime<Utc>) -> bool {
    let Some(expected) = i64::try_from(rank)
        .ok()
        .and_then(|ns| ended.checked_add_signed(chrono::TimeDelta::nanoseconds(ns)))
    else {
        // Beyond the calendar: no expiry tells it apart.
        return true;
    };
    (expires_at - expected).abs() <= EXPIRY_SLACK
}

/// The server's default keep-alive, from a model that a request setting none loaded,
/// left idle at `ended`, and that `/api/ps` says unloads at `expires_at`: the difference,
/// to the whole second (a server's default is whole seconds, and the look is a few
/// milliseconds off). `None` when it makes no sense (the look came before Ollama had set
/// the expiry: not a second after the end).
pub fn learned_default(ended: DateTime<Utc>, expires_at: DateTime<Utc>) -> Option<KeepAlive> {
    let d = expires_at.signed_duration_since(ended);
    if d > chrono::Duration::days(365 * 100) {
        return Some(KeepAlive::Forever);
    }
    let seconds = (d.num_milliseconds() as f64 / 1000.0).round();
    (seconds >= 1.0).then(|| KeepAlive::For(std::time::Duration::from_secs_f64(seconds)))
}

/// Nanoseconds in a Go duration (`"5m"`, `"1h30m"`, `"1.5s"`, `"300ms"`, `"-1m"`), or a
/// bare number of seconds, exact as Go's `time.ParseDuration` reads it: a stamped
/// keep-alive of two hundred years differs from the next in its last nanosecond, which a
/// floating-point number of seconds cannot hold. `None` beyond Go's largest duration.
fn go_duration_ns(s: &str) -> Option<i128> {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest.is_empty() {
        return None;
    }
    let total = match decimal_ns(rest, NS_PER_S) {
        Some(bare) => bare,
        None => {
            let mut rest = rest;
            let mut total = 0i128;
            while !rest.is_empty() {
                let digits = rest
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(rest.len());
                let number = &rest[..digits];
                rest = &rest[digits..];
                let (unit, scale) = [
                    ("ns", 1),
                    ("us", 1_000),
                    ("µs", 1_000),
                    ("ms", 1_000_000),
                    ("h", 3_600 * NS_PER_S),
                    ("m", 60 * NS_PER_S),
                    ("s", NS_PER_S),
                ]
                .into_iter()
                .find(|(u, _)| rest.starts_with(u))?;
                rest = &rest[unit.len()..];
                total += decimal_ns(number, scale)?;
                if total > i128::from(i64::MAX) {
                    return None;
                }
            }
            total
        }
    };
    (total <= i128::from(i64::MAX)).then_some(sign * total)
}

const NS_PER_S: i128 = 1_000_000_000;

/// A decimal number (`"300"`, `"1.5"`, `".5"`) of units of `scale` nanoseconds, in
/// nanoseconds, the fraction's part of a nanosecond dropped (as Go does); `None` when it
/// is no such number or too large.
fn decimal_ns(number: &str, scale: i128) -> Option<i128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    // Past twenty digits the whole part is beyond any duration; past eighteen the
    // fraction adds nothing a nanosecond shows.
    if whole.len() > 20 {
        return None;
    }
    let whole: i128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction = &fraction[..fraction.len().min(18)];
    let part = if fraction.is_empty() {
        0
    } else {
        fraction.parse::<i128>().ok()? * scale / 10i128.pow(fraction.len() as u32)
    };
    Some(whole * scale + part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn reads_what_ollama_reads() {
        let cases = [
            (json!("5m"), KeepAlive::For(Duration::from_secs(300))),
            (json!("1h30m"), KeepAlive::For(Duration::from_secs(5400))),
            (json!("1.5s"), KeepAlive::For(Duration::from_millis(1500))),
            (json!("300ms"), KeepAlive::For(Duration::from_millis(300))),
            (json!(600), KeepAlive::For(Duration::from_secs(600))),
            (json!("600"), KeepAlive::For(Duration::from_secs(600))),
            (json!(0), KeepAlive::Unload),
            (json!("0s"), KeepAlive::Unload),
            (json!(-1), KeepAlive::Forever),
            (json!("-1m"), KeepAlive::Forever),
            // Exact to the nanosecond, as Go reads it, however long.
            (
                json!("6307200000.293256001s"),
                KeepAlive::For(Duration::new(6_307_200_000, 293_256_001)),
            ),
            (json!(".5s"), KeepAlive::For(Duration::from_millis(500))),
            (json!("1.0000000019s"), KeepAlive::For(Duration::new(1, 1))),
            (
                json!("+1m1.5s"),
                KeepAlive::For(Duration::from_millis(61_500)),
            ),
            (json!("-1ns"), KeepAlive::Forever),
            (json!(-0.5), KeepAlive::Forever),
            (json!("-0s"), KeepAlive::Unload),
        ];
        for (value, want) in cases {
            assert_eq!(KeepAlive::parse(&value), Some(want), "{value}");
        }
        for bad in [
            json!("9223372036.854775808s"),
            json!("3000000h"),
            json!(1e300),
            json!("1..5s"),
            json!("."),
            json!("5m3"),
            json!("soon"),
            json!("5x"),
            json!(true),
            json!(null),
            json!(""),
        ] {
            assert_eq!(KeepAlive::parse(&bad), None, "{bad}");
        }
    }

    #[test]
    fn a_later_stamp_ranks_longer_within_one_keep_alive_and_below_a_longer_one() {
        let five = KeepAlive::For(Duration::from_secs(300));
        let early = five.stamped(at("2026-12-06T10:00:00.000Z"));
        let later = five.stamped(at("2026-12-06T10:00:00.100Z"));
        assert!(early.rank() < later.rank(), "a tenth of a second apart");
        assert!(early.rank() > five.rank());
        // A year adds about a third of a second.
        let a_year_on = five.stamped(at("2027-12-06T10:00:00.000Z"));
        let grown = a_year_on.rank() - early.rank();
        assert!((315_000_000..316_000_000).contains(&grown), "{grown} ns");
        // Years on, a five-minute keep-alive still ranks below a five-minute-and-one-
        // second one sent at the epoch.
        let far = five.stamped(at("2028-12-31T23:59:59Z"));
        let longer = KeepAlive::For(Duration::from_secs(301)).stamped(at("2026-01-01T00:00:00Z"));
        assert!(far.rank() < longer.rank());
        // Before the epoch (a clock set wrong) the stamp is none, never negative.
        assert_eq!(five.stamped(at("2020-01-01T00:00:00Z")), five);
        // Zero is what it says, whenever sent.
        assert_eq!(
            KeepAlive::Unload.stamped(at("2026-12-06T10:00:00Z")),
            KeepAlive::Unload
        );
        // Forever is two hundred years, stamped: models kept forever go least recently
        // used first among themselves, after every model kept for a while, and before a
        // `-1` another client sent (Ollama's largest duration).
        let forever = KeepAlive::Forever;
        let early = forever.stamped(at("2026-12-06T10:00:00.000Z"));
        let later = forever.stamped(at("2026-12-06T10:00:00.100Z"));
        assert!(early.rank() < later.rank());
        let a_year = KeepAlive::For(Duration::from_secs(365 * 86_400));
        assert!(a_year.stamped(at("2030-01-01T00:00:00Z")).rank() < early.rank());
        assert!(later.rank() < forever.rank());
        // Centuries on, still within Go's largest duration.
        assert!(forever.stamped(at("2300-01-01T00:00:00Z")).rank() < i64::MAX as u64);
    }

    #[test]
    fn a_stamped_keep_alive_is_sent_exactly_and_reads_back_the_same() {
        let sent = KeepAlive::For(Duration::from_secs(300)).stamped(at("2026-12-06T10:00:00Z"));
        let json = sent.to_json();
        // 339 days and 10 hours after the epoch: 293,256,000 tenths of a second, one
        // nanosecond each.
        assert_eq!(json, json!("300.293256000s"));
        assert_eq!(KeepAlive::parse(&json), Some(sent));
        assert_eq!(KeepAlive::Unload.to_json(), json!(0));
        assert_eq!(KeepAlive::Forever.to_json(), json!(-1));
        // Forever, stamped: a duration Go's ParseDuration reads (under 2^63 ns).
        let forever = KeepAlive::Forever.stamped(at("2026-12-06T10:00:00Z"));
        assert_eq!(forever.to_json(), json!("6307200000.293256000s"));
        assert_eq!(KeepAlive::parse(&forever.to_json()), Some(forever));
    }

    #[test]
    fn the_servers_default_is_learned_to_the_second_from_an_idle_models_expiry() {
        let ended = at("2026-12-06T10:00:00.000Z");
        assert_eq!(
            learned_default(ended, at("2026-12-06T10:05:00.012Z")),
            Some(KeepAlive::For(Duration::from_secs(300)))
        );
        assert_eq!(
            learned_default(ended, at("2026-12-06T10:04:59.990Z")),
            Some(KeepAlive::For(Duration::from_secs(300)))
        );
        // Kept forever: Ollama's expiry is centuries away (two, where Coordinator sent it).
        assert_eq!(
            learned_default(ended, at("2318-01-01T00:00:00Z")),
            Some(KeepAlive::Forever)
        );
        assert_eq!(
            learned_default(ended, at("2226-12-06T10:00:00Z")),
            Some(KeepAlive::Forever)
        );
        // An expiry from before the answer ended (Ollama had not yet set the new one).
        assert_eq!(learned_default(ended, at("2026-12-06T09:59:00Z")), None);
        assert_eq!(learned_default(ended, at("2026-12-06T10:00:00.300Z")), None);
    }

    #[test]
    fn a_model_no_request_here_kept_ranks_by_the_time_its_expiry_has_left() {
        let now = at("2026-12-06T10:00:00Z");
        let stamped = KeepAlive::For(Duration::from_secs(300)).stamped(now).rank();
        // Loaded with five minutes and idle since: before the ones Coordinator stamps.
        let five = rank_from_expiry(at("2026-12-06T10:04:00Z"), now);
        assert_eq!(five, 240_000_000_000);
        assert!(five < stamped);
        // Kept for an hour, or forever (Ollama's expiry 292 years on): after them, and
        // forever after what Coordinator sends for forever.
        assert!(rank_from_expiry(at("2026-12-06T10:50:00Z"), now) > stamped);
        let forever = rank_from_expiry(now + chrono::TimeDelta::nanoseconds(i64::MAX), now);
        assert!(forever > KeepAlive::Forever.stamped(now).rank());
        assert_eq!(
            rank_from_expiry(at("2400-01-01T00:00:00Z"), now),
            KeepAlive::Forever.rank()
        );
        // Expired, not yet gone: first.
        assert_eq!(rank_from_expiry(at("2026-12-06T09:59:00Z"), now), 0);
    }

    #[test]
    fn an_expiry_is_taken_as_set_by_a_keep_alive_only_within_the_slack() {
        let sent = at("2026-12-06T10:00:00Z");
        let ended = at("2026-12-06T10:00:07Z");
        let rank = KeepAlive::For(Duration::from_secs(300))
            .stamped(sent)
            .rank();
        let expected = ended + chrono::TimeDelta::nanoseconds(i64::try_from(rank).unwrap());
        assert!(expiry_set_by(rank, ended, expected));
        // Ollama set it a second after the answer's end here, or a little before.
        assert!(expiry_set_by(
            rank,
            ended,
            expected + chrono::TimeDelta::seconds(1)
        ));
        assert!(expiry_set_by(rank, ended, expected - EXPIRY_SLACK));
        // Another client's request ended ten seconds later with the same five minutes,
        // or kept it two hours.
        assert!(!expiry_set_by(
            rank,
            ended,
            expected + chrono::TimeDelta::seconds(10)
        ));
        assert!(!expiry_set_by(
            rank,
            ended,
            ended + chrono::TimeDelta::hours(2)
        ));
        // Unloaded at the end (`0`): only an expiry at the end is its own.
        assert!(expiry_set_by(KeepAlive::Unload.rank(), ended, ended));
        assert!(!expiry_set_by(KeepAlive::Unload.rank(), ended, expected));
        // Forever as sent (two hundred years): its expiry two centuries on.
        let forever = KeepAlive::Forever.stamped(sent).rank();
        let far = ended + chrono::TimeDelta::nanoseconds(i64::try_from(forever).unwrap());
        assert!(far.to_rfc3339().starts_with("22"), "{far}");
        assert!(expiry_set_by(forever, ended, far));
        assert!(!expiry_set_by(forever, ended, expected));
    }
}
