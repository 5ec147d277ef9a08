//! Redis's clock (`TIME`), the one clock every process of a cluster shares: a stream
//! entry and a heartbeat say how far it read from their writer's clock, and a reader
//! moves their times onto its own through it (see `crate::cluster`). A household's
//! machines drift apart by seconds a week between time syncs.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use redis::aio::ConnectionLike;

use crate::backend::clock::{self, ClockOffset};

/// How often a cached reading is asked again: drift is microseconds a second, so this
/// only catches a clock that was set.
const ASK_EVERY: Duration = Duration::from_secs(5);

/// How far Redis's clock reads ahead of this process's, from its `TIME`.
#[derive(Debug, Default)]
pub(crate) struct RedisClock {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    offset: ClockOffset,
    asked: Option<Instant>,
}

impl RedisClock {
    /// How far Redis's clock reads ahead of this process's (zero while they agree to
    /// within a call's length): asked again when the last answer is older than a few
    /// seconds (or there was none). A failed `TIME` changes nothing and is asked again
    /// as late; it fails nothing else (the call it precedes meets its own errors).
    pub(crate) async fn ask_if_stale(&self, conn: &mut impl ConnectionLike) -> TimeDelta {
        let fresh = self.lock().asked.is_some_and(|at| at.elapsed() < ASK_EVERY);
        if fresh {
            return self.ahead();
        }
        let sent = Utc::now();
        let answer: redis::RedisResult<(i64, i64)> = redis::cmd("TIME").query_async(conn).await;
        let received = Utc::now();
        let mut state = self.lock();
        state.asked = Some(Instant::now());
        match answer {
            Ok((seconds, micros)) => {
                let reading = DateTime::from_timestamp(seconds, 0)
                    .and_then(|t| t.checked_add_signed(TimeDelta::microseconds(micros)));
                if let Some(reading) = reading {
                    state
                        .offset
                        .observe(reading, TimeDelta::microseconds(1), sent, received);
                }
            }
            Err(e) => tracing::debug!(error = %e, "cannot ask Redis the time"),
        }
        state.offset.offset().unwrap_or_default()
    }

    /// How far Redis's clock read ahead at the last answer; zero before any.
    pub(crate) fn ahead(&self) -> TimeDelta {
        self.lock().offset.offset().unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Says so in the log when this process's clock comes to differ from Redis's by more
/// than a second (`before` and `after` are how far Redis's reads ahead), or to agree
/// again.
pub(crate) fn tell_apart(before: Option<TimeDelta>, after: TimeDelta) {
    match clock::crossed_a_second(before, Some(after)) {
        Some(true) => tracing::warn!(
            "this machine's clock reads {} Redis's; the cluster reads its times on each process's own clock through Redis's",
            clock::describe(-after)
        ),
        Some(false) => tracing::info!("this machine's clock agrees with Redis's again"),
        None => {}
    }
}
