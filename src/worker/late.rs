//! A first token that is late, or sooner elsewhere: a streamed turn that has shown
//! nothing on the machine it started on moves to another machine that would now give it
//! sooner, in two cases.
//!
//! - **It is late.** Placement chooses with the figures it has, and in a household's
//!   first minutes it has none: a laptop nothing is known of may look sooner than a busy
//!   desktop and take a minute to load. Waiting on it while the desktop frees up is what
//!   a person notices. The rule bounds the loss: the task moves once the time it has lost
//!   to the overrun (beyond what placement expected here, within [`SAME_WITHIN`]) is as
//!   long as the other machine would take to its first token, so a task that moves gets
//!   its first token at most that much later than had it stayed, and a machine that is a
//!   little slow is never left. What placement expected here counts the wait for what
//!   already ran here when the task started ([`Worker::wait_ahead`]): a load that waits
//!   for a busy model to finish is on time while that model is.
//! - **It still waits for what runs ahead of it here**, its load not begun (a machine of
//!   unknown room tries a model beside a busy one, see `placement::wait_if_full`), and
//!   another machine now clearly gives its first token sooner than what is left here (a
//!   person stopped an answer there): leaving costs this machine nothing. Whether such a
//!   try waits is looked at once, at the first look: a load Ollama already lists has
//!   begun (the machine had room), and waits for nothing.
//!
//! Runs beside the backend call in [`Worker::settle`](super::Worker) (see `run.rs`);
//! only while no token has come, only for streamed answers of a model's lane not pinned
//! to a machine (a whole answer, a web search or a document search shows no first token),
//! and only to a machine that has shown its speed for the model: an untried one is as
//! uncertain as the machine being left. The move goes through the queue as a failover
//! does (an attempt; for a while every other machine leaves the job to the one it moved
//! for, so that an untried one does not take it on the way). A task that left late makes
//! the machine's figures for the model as slow as the wait showed them to be, so the next
//! turn is not sent there on the same hopes.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::run::left_for;
use super::{MAX_ATTEMPTS, Worker};
use crate::backend::perf::{Began, Rates};
use crate::backend::registry::WorkerStatus;
use crate::domain::{Lane, Priority, WorkerName};
use crate::lang::Lang;
use crate::placement::{self, Ask, SAME_WITHIN, guard};
use crate::queue::Job;

/// The first look: an answer whose first token comes sooner costs nothing but a timer.
const FIRST_LOOK: Duration = Duration::from_millis(100);

/// How long a late task waits before it looks again, at most (another machine may free
/// up at any time; nothing announces it) and at least.
const LOOK_AGAIN: (Duration, Duration) = (Duration::from_millis(100), Duration::from_millis(10));

/// A late task's way out: the machine that would give its first token sooner.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Move {
    pub to: WorkerName,
    /// Seconds since the task started here.
    pub waited_s: f64,
    /// Of those, seconds beyond what was expected here.
    pub late_s: f64,
    /// Seconds to the first token there, as placement expects it.
    pub there_s: f64,
    /// This machine's figures for the model as they were when it was found late.
    pub here: Rates,
}

/// What a look finds.
enum Look {
    Move(Move),
    Again(Duration),
}

/// What a job started here may wait for before its own load or prompt begins.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct WaitsHere {
    /// Seconds placement counts: for a slot, or for a busy model to make room on a
    /// machine known to be full.
    pub known_s: f64,
    /// Seconds a load beside busy models would wait for room were the machine full, on a
    /// machine of unknown room, which placement counted as fitting
    /// ([`placement::wait_if_full`]); none otherwise.
    pub if_full_s: f64,
}

impl Worker {
    /// What `job` may wait for here, were it to start now, for what already runs on the
    /// machine before its own load or prompt begins ([`WaitsHere`]). That wait is no
    /// lateness. Read before the job starts (once it runs, it counts among what runs
    /// here); `None` when the job may not move.
    pub(super) fn wait_ahead(&self, job: &Job) -> Option<WaitsHere> {
        if !self.may_move(job) {
            return None;
        }
        let all = self.directory.statuses();
        let Some(here) = all.iter().find(|s| &s.name == self.handle.name()) else {
            return Some(WaitsHere::default());
        };
        let ask = Ask::of(&job.request, job.thread_id.as_ref());
        let now = Utc::now();
        Some(WaitsHere {
            known_s: placement::estimate_on(here, &ask, &all, now).wait_s,
            if_full_s: placement::wait_if_full(here, ask.model, &all, now),
        })
    }

    /// Resolves when `job`, started here at `at` as `began` says, expected to wait
    /// `ahead` for what ran here then ([`Worker::wait_ahead`]), should move (see the
    /// module doc); never when it may not (`ahead` is `None`).
    pub(super) async fn late_first_token(
        &self,
        job: &Job,
        at: DateTime<Utc>,
        began: Began,
        ahead: Option<WaitsHere>,
    ) -> Move {
        let Some(ahead) = ahead else {
            return std::future::pending().await;
        };
        tokio::time::sleep(FIRST_LOOK).await;
        let ahead_s = self.seen_ahead(job, ahead).await;
        loop {
            match self.look(job, at, began, ahead_s).await {
                Look::Move(to) => return to,
                Look::Again(after) => {
                    let (most, least) = LOOK_AGAIN;
                    tokio::time::sleep(after.clamp(least, most)).await;
                }
            }
        }
    }

    /// Seconds the job waits here for what ran here when it started, as far as the
    /// machine shows by now: a load tried beside busy models on a machine of unknown room
    /// ([`WaitsHere::if_full_s`]) that Ollama already lists has begun, and waits for none
    /// of them; one it does not list waits for room, as far as anyone can tell (a load
    /// only just begun may not be listed yet: it is then taken as waiting, as it was
    /// before anyone looked). One look at the resident models, only for such a try.
    async fn seen_ahead(&self, job: &Job, ahead: WaitsHere) -> f64 {
        if ahead.if_full_s <= ahead.known_s {
            return ahead.known_s;
        }
        // A look that failed shows nothing: the model this process counted resident as
        // its load began is no sign that the load has begun.
        if self.handle.refresh_loaded().await && self.handle.has_loaded(&job.request.model) {
            tracing::debug!(model = %job.request.model, "a load tried beside busy models has begun: the machine had room");
            ahead.known_s
        } else {
            ahead.if_full_s
        }
    }

    fn may_move(&self, job: &Job) -> bool {
        matches!(
            job.lane,
            Lane::Llm {
                pinned_worker: None,
                ..
            }
        ) && job.response.is_streamed()
            && job.attempt + 1 < MAX_ATTEMPTS
            && self
                .directory
                .others_serving(&job.request.model, &[self.handle.name().clone()])
                > 0
    }

    /// One look at the machines: how late the task is here, and where it would start
    /// sooner than that.
    async fn look(&self, job: &Job, at: DateTime<Utc>, began: Began, ahead_s: f64) -> Look {
        let now = Utc::now();
        let all = self.directory.statuses();
        let me = self.handle.name();
        let Some(here) = all.iter().find(|s| &s.name == me) else {
            return Look::Again(LOOK_AGAIN.0);
        };
        let ask = Ask::of(&job.request, job.thread_id.as_ref());
        let waited_s = (now - at).as_seconds_f64();
        let rates = placement::rates_on(here, ask.model, &all);
        let expected_s = expected_s(rates, &ask, began, ahead_s);
        let (factor, seconds) = SAME_WITHIN;
        let late_s = waited_s - (expected_s * factor + seconds);
        // While the task still waits for what runs ahead of it here, its load has not
        // begun: leaving costs this machine nothing.
        let left_s = (waited_s < ahead_s).then_some(expected_s - waited_s);
        let others: Vec<WorkerStatus> = all
            .iter()
            .filter(|s| &s.name != me && s.healthy && !job.avoids(&s.name, now))
            .filter(|s| shown(s, job))
            .filter(|s| job.priority == Priority::Interactive || !guard::may_push_out(s, ask.model))
            .cloned()
            .collect();
        if others.is_empty() {
            tracing::trace!(late_s, "no first token yet; no known machine to move to");
            return Look::Again(LOOK_AGAIN.0);
        }
        let waiting = self.waiting_before(job, &others, &all).await;
        let ask = ask.after(&waiting);
        let serving: Vec<&WorkerStatus> = others.iter().collect();
        let best = placement::estimates_among(&serving, &all, &ask, now)
            .into_iter()
            .min_by(|a, b| a.score().total_cmp(&b.score()));
        let Some(best) = best else {
            return Look::Again(LOOK_AGAIN.0);
        };
        let there_s = best.score();
        tracing::trace!(late_s, ?left_s, there_s, to = %best.worker, "no first token yet");
        let sooner = left_s.is_some_and(|left| there_s * factor + seconds < left);
        if sooner || (late_s > 0.0 && there_s <= late_s) {
            return Look::Move(Move {
                to: best.worker,
                waited_s,
                late_s,
                there_s,
                here: rates,
            });
        }
        Look::Again(Duration::try_from_secs_f64(there_s - late_s).unwrap_or(LOOK_AGAIN.0))
    }

    /// Moves a late task: queued again for the machine that would give its first token
    /// sooner. This one, and every other machine serving the model, leaves it to that one
    /// for as long again as this one has had it without a first token (see [`left_by`]);
    /// after that any takes it (the one it was moved for may have gone). Left to the
    /// others, whichever took it from the queue would weigh it again among all of them,
    /// untried machines included, which the look passed over as no surer than this one:
    /// in the household's seed 2, a turn moved for moon went on to the untried laptop and
    /// waited there for a 5 s load. When the task left late, placement learns that this
    /// machine is slower than it thought (see [`ModelPerf::left_late`]). Returns whether
    /// it moved (when it could not be queued, it stays here).
    ///
    /// [`ModelPerf::left_late`]: crate::backend::perf::ModelPerf::left_late
    pub(super) async fn move_late(&self, job: &Job, began: Began, late: &Move) -> bool {
        let me = self.handle.name().clone();
        let (avoid, until) = left_for(
            job,
            &me,
            late.waited_s,
            &late.to,
            &self.directory.statuses(),
        );
        let reason = moved(job.lang, &late.to);
        if !self.hand_on(job, avoid, Some(until), reason).await {
            return false;
        }
        if late.late_s > 0.0 {
            self.handle.left_late(
                &job.request.model,
                began,
                job.request.estimated_prompt_tokens(),
                late.waited_s,
                late.here,
            );
        }
        tracing::info!(worker = %me, to = %late.to, late_s = late.late_s, there_s = late.there_s, "no first token yet; moved to a machine that gives it sooner");
        true
    }
}

/// Seconds placement expects the task's first token to take here: the wait it expected
/// for what ran here when the task started (`ahead_s`), then the load (when the model was
/// not resident) and the whole prompt at this machine's figures as known now (`rates`).
/// The whole prompt even where the machine's prompt cache may hold the conversation: a
/// cache that turns out not to hold it costs the same prompt on any other machine, and is
/// no reason to leave.
fn expected_s(rates: Rates, ask: &Ask<'_>, began: Began, ahead_s: f64) -> f64 {
    let load = if began.was_loaded { 0.0 } else { rates.load_s };
    ahead_s.max(0.0) + load + f64::from(ask.prompt_tokens) / rates.prompt_tps.max(1.0)
}

/// Whether `s` has shown its speed for the job's model.
fn shown(s: &WorkerStatus, job: &Job) -> bool {
    s.perf
        .iter()
        .any(|p| p.model == job.request.model && p.known())
}

/// What the client hears of a move, in the prompt's language.
fn moved(lang: Lang, to: &WorkerName) -> String {
    match lang {
        Lang::Ja => format!("最初の応答が遅れているため、より早く応答できる {to} に移しました"),
        Lang::En => format!("no first token yet; moved to {to}, which answers sooner"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_move_is_told_in_the_prompts_language() {
        let to = WorkerName::parse("moon").unwrap();
        assert_eq!(
            moved(Lang::En, &to),
            "no first token yet; moved to moon, which answers sooner"
        );
        assert!(moved(Lang::Ja, &to).contains("moon に移しました"));
    }
}
