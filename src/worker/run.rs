//! Running one job: claim, call the backend, stream, record, acknowledge.

use chrono::{DateTime, Utc};
use futures::StreamExt;

use super::{MAX_ATTEMPTS, Worker};
use crate::backend::perf::{Began, Sample};
use crate::backend::registry::{InFlight, WorkerStatus};
use crate::backend::{BackendError, BackendRequest, ChunkStream};
use crate::chat::{Chunk, ToolCall, Usage};
use crate::domain::{Lane, ModelName, Priority, TaskId, TaskStatus, WorkerName};
use crate::events::TaskEvent;
use crate::memory::Exchange;
use crate::metrics::TaskTimes;
use crate::queue::{Delivery, Job};
use crate::store::{Claim, StoreError, TaskOutcome};
use crate::web::web_stream;

/// The least time a job left for a sooner worker is left to it: the worker that left it
/// does not look at it again at every turn of its loop (Redis's avoided consumers look
/// again every 200 ms at most, too).
const LEAVE_FOR: std::time::Duration = std::time::Duration::from_millis(200);

/// `job`'s avoid list with `me` on it, and until when `me` leaves it to the others: for
/// `seconds`, at least [`LEAVE_FOR`], and not before the time the workers it avoids
/// already leave it until (one time holds for the whole list: a worker that left a moved
/// job must not cut short the time the machine it moved from leaves it).
pub(super) fn left_by(
    job: &Job,
    me: &WorkerName,
    seconds: f64,
) -> (Vec<WorkerName>, DateTime<Utc>) {
    let mut avoid = job.avoid.clone();
    if !avoid.contains(me) {
        avoid.push(me.clone());
    }
    let leave_for = std::time::Duration::try_from_secs_f64(seconds)
        .unwrap_or_default()
        .max(LEAVE_FOR);
    let until = Utc::now() + leave_for;
    (avoid, job.avoid_until.map_or(until, |then| then.max(until)))
}

/// [`left_by`], and every other machine among `all` serving the job's model but `to` on
/// the avoid list too: the job is left for `to` alone for that while (a late move, a
/// keeper for the turns behind). `to` comes off the list if the job had left it before:
/// the new time holds for the whole list, and a `to` still on it would leave the job to
/// nobody until then.
pub(super) fn left_for(
    job: &Job,
    me: &WorkerName,
    seconds: f64,
    to: &WorkerName,
    all: &[WorkerStatus],
) -> (Vec<WorkerName>, DateTime<Utc>) {
    let (mut avoid, until) = left_by(job, me, seconds);
    avoid.retain(|w| w != to);
    for s in all {
        if &s.name != to && s.models.contains(&job.request.model) && !avoid.contains(&s.name) {
            avoid.push(s.name.clone());
        }
    }
    (avoid, until)
}

/// The machines among `all` that `me` may leave `job` to: any for a person's turn;
/// background work never goes where it would push out a model
/// ([`crate::placement::guard::may_push_out`]), unless it is already here.
fn may_hold<'a>(
    job: &'a Job,
    me: &'a WorkerName,
    all: &'a [WorkerStatus],
) -> impl Iterator<Item = &'a WorkerStatus> {
    all.iter().filter(move |s| {
        job.priority == Priority::Interactive
            || &s.name == me
            || !crate::placement::guard::may_push_out(s, &job.request.model)
    })
}

/// An answer that has started: its chunks, and why the web lane fell back to the local
/// model alone, if it did.
struct Opened {
    chunks: ChunkStream,
    fallback: Option<String>,
}

/// What a job's answer has sent its client so far: when the job started here, and each
/// chunk once it was passed on.
#[derive(Default)]
pub(super) struct Collected {
    started: Option<DateTime<Utc>>,
    content: String,
    tool_calls: Vec<ToolCall>,
    /// The token chunks passed on (content, reasoning, tool calls): one token each.
    tokens: i64,
    first_token_at: Option<DateTime<Utc>>,
    usage: Option<Usage>,
    /// Why the web lane answered from the local model alone, if it did.
    fallback: Option<String>,
    /// The window sent to the backend (Ollama's `num_ctx`), when one was.
    num_ctx: Option<u32>,
}

impl Collected {
    fn response(&self) -> Option<String> {
        if self.tool_calls.is_empty() {
            return (!self.content.is_empty() || self.first_token_at.is_some())
                .then(|| self.content.clone());
        }
        Some(crate::store::recorded_response(
            &self.content,
            &self.tool_calls,
        ))
    }
}

fn ms_between(a: DateTime<Utc>, b: DateTime<Utc>) -> i64 {
    (b - a).num_milliseconds().max(0)
}

impl Collected {
    /// The task's outcome as this answer leaves it: done, until a failure says otherwise.
    fn outcome(&self, job: &Job, worker: &WorkerName, started: DateTime<Utc>) -> TaskOutcome {
        let finished = Utc::now();
        TaskOutcome {
            status: TaskStatus::Done,
            at: finished,
            worker_id: Some(worker.clone()),
            response: self.response(),
            error: None,
            fallback_used: self.fallback.is_some(),
            fallback_reason: self.fallback.clone(),
            queue_wait_ms: Some(ms_between(job.created_at, started)),
            first_token_ms: self.first_token_at.map(|t| ms_between(job.created_at, t)),
            total_ms: Some(ms_between(job.created_at, finished)),
            prompt_tokens: self.usage.as_ref().map(|u| i64::from(u.prompt_tokens)),
            completion_tokens: self.usage.as_ref().map(|u| i64::from(u.completion_tokens)),
            num_ctx: self.num_ctx.map(i64::from),
        }
    }

    /// What a cancelled task's row gets from this worker: the answer as far as it was
    /// passed on, and how many tokens that was (the backend's count is only in its final
    /// record); `None` when the job had not started here.
    fn partial(&self, job: &Job, worker: &WorkerName) -> Option<TaskOutcome> {
        let mut outcome = self.outcome(job, worker, self.started?);
        outcome.status = TaskStatus::Cancelled;
        if outcome.completion_tokens.is_none() && self.first_token_at.is_some() {
            outcome.completion_tokens = Some(self.tokens);
        }
        Some(outcome)
    }

    /// Keeps a chunk as it is passed on (before its event is published, which then takes
    /// it without a copy; a cancel during that publish keeps it in the partial answer).
    fn keep(&mut self, chunk: &Chunk) {
        self.tokens += 1;
        match chunk {
            Chunk::Content { text } => self.content.push_str(text),
            Chunk::ToolCalls { calls } => self.tool_calls.extend(calls.iter().cloned()),
            Chunk::Reasoning { .. } | Chunk::Done { .. } => {}
        }
    }
}

impl Worker {
    /// Runs one delivered job to its end. It is acknowledged once what it led to is
    /// settled (recorded and durable, handed on, or skipped), and a finished turn is
    /// remembered only after that, when its answer was delivered.
    ///
    /// `got` holds what the answer sent, for [`stopped`](Self::stopped) when a cancel
    /// drops this run.
    pub(super) async fn execute(&self, delivery: &Delivery, got: &mut Collected) {
        let outcome = self.settle(delivery, got).await;
        self.ack(delivery).await;
        if outcome.is_some() {
            self.handle.keep_learned().await;
        }
        if let Some(outcome) = outcome.filter(|o| o.status == TaskStatus::Done) {
            // After the client had the end of its answer: off its path.
            let job = &delivery.job;
            let times = TaskTimes::of(&outcome, &job.request.model, self.handle.name());
            self.metrics.task_ended(&times);
            self.remember(&delivery.job, &outcome).await;
        }
    }

    /// Everything a job leads to before its acknowledgement. Returns the outcome recorded
    /// when the job ran here; `None` when it did not run or was handed on.
    async fn settle(&self, delivery: &Delivery, got: &mut Collected) -> Option<TaskOutcome> {
        let job = &delivery.job;
        if let Some(reason) = &delivery.dead_letter {
            self.fail_dead_letter(delivery, reason).await;
            return None;
        }
        // A job handed over directly went to the best worker the service knew of.
        if !delivery.claimed && self.hand_to_sooner_worker(job).await {
            return None;
        }
        let started = Utc::now();
        got.started = Some(started);
        // The window this machine gives the request (the web lane sizes its own).
        let num_ctx = (job.lane != Lane::Web && job.lane != Lane::Rag)
            .then(|| self.handle.num_ctx_for(&job.request))
            .flatten();
        got.num_ctx = num_ctx;
        let tokens = job.request.estimated_prompt_tokens();
        let ahead = self.wait_ahead(job);
        let mut in_flight = self.handle.start_request(
            &job.request.model,
            job.thread_id.as_ref(),
            tokens,
            num_ctx,
            job.priority,
        );
        let began = Began {
            was_loaded: !in_flight.cold,
            alone: in_flight.alone,
            cached: in_flight.cached,
        };
        let opened = {
            let open = self.claim_and_open(delivery, started, in_flight.cold, num_ctx);
            let late = self.late_first_token(job, started, began, ahead);
            tokio::pin!(open, late);
            loop {
                tokio::select! {
                    opened = &mut open => break opened?,
                    moved = &mut late => {
                        if self.move_late(job, began, &moved).await {
                            // The backend call is dropped here, before its first token.
                            return None;
                        }
                        late.set(self.late_first_token(job, started, began, ahead));
                    }
                }
            }
        };
        let result = match opened {
            Ok(opened) => {
                got.fallback = opened.fallback;
                self.forward(job, opened.chunks, got, &mut in_flight).await
            }
            Err(e) => Err(e),
        };
        drop(in_flight);
        if result.is_ok() {
            self.learn(job, began, started, got);
        }
        let (outcome, terminal) = self.conclude(job, started, got, result).await?;
        self.record(job, &outcome, terminal)
            .await
            .then_some(outcome)
    }

    /// After a cancel dropped the job's run (and its backend call with it): the answer as
    /// far as it went goes onto the cancelled row, then the job is acknowledged. At
    /// shutdown nothing is written: the row stays running, and is queued again at the
    /// next start.
    pub(super) async fn stopped(&self, delivery: &Delivery, got: &Collected) {
        let me = self.handle.name();
        if self.abort.is_cancelled() {
            tracing::warn!(worker = %me, "task abandoned at shutdown; it will be queued again at the next start");
            return;
        }
        tracing::info!(worker = %me, tokens = got.tokens, "task cancelled; its backend call was dropped");
        if let Some(partial) = got.partial(&delivery.job, me) {
            self.record_partial(delivery.job.task_id, &partial).await;
        }
        self.ack(delivery).await;
    }

    /// Writes what a cancelled task's answer sent onto its row, which ends cancelled
    /// whether or not the cancel's own write landed first. Returns once it is durable.
    async fn record_partial(&self, task_id: TaskId, partial: &TaskOutcome) {
        let written = async { self.store.record_partial(task_id, partial).await?.await };
        if let Err(e) = written.await {
            tracing::error!(error = %e, "could not record the cancelled task's partial answer");
        }
    }

    /// Fails the task of a job the queue gave up on, without running it.
    async fn fail_dead_letter(&self, delivery: &Delivery, reason: &str) {
        let task_id = delivery.job.task_id;
        tracing::warn!(deliveries = delivery.deliveries, reason = %reason, "queue gave up on the task");
        let outcome = TaskOutcome::failed(Utc::now(), reason.to_owned());
        if let Err(e) = async { self.store.finish(task_id, &outcome).await?.await }.await {
            tracing::error!(error = %e, "could not record the failed task");
        }
        let message = reason.to_owned();
        self.events
            .publish(task_id, TaskEvent::Failed { message })
            .await;
    }

    /// Claims the task and opens the backend's answer; `None` when the job must not run.
    ///
    /// A fresh job's claim is written while the backend call starts: it almost never
    /// fails, and the row is then durable before the first token is passed on; when it
    /// says the job must not run (its task was cancelled while queued), the backend call
    /// is dropped there, before it answers. A
    /// redelivered job (its task may have finished meanwhile) is claimed first; a job
    /// handed over directly was claimed with its row. `Started` goes out as soon as
    /// the claim is made, while the backend call is under way: a client waiting for a
    /// whole answer knows from it that its task runs (and, by `loading`, whether its
    /// model must load first).
    async fn claim_and_open(
        &self,
        delivery: &Delivery,
        started: DateTime<Utc>,
        loading: bool,
        num_ctx: Option<u32>,
    ) -> Option<Result<Opened, BackendError>> {
        let job = &delivery.job;
        if delivery.deliveries > 1 || job.attempt > 0 {
            let claim = self.claim(delivery, started, loading).await;
            if !self.may_run(job, claim).await {
                return None;
            }
            return Some(self.open(job, num_ctx).await);
        }
        let open = self.open(job, num_ctx);
        let claim = self.claim(delivery, started, loading);
        tokio::pin!(open, claim);
        let mut opened = None;
        let claim = tokio::select! {
            claim = &mut claim => claim,
            result = &mut open => {
                opened = Some(result);
                claim.await
            }
        };
        if !self.may_run(job, claim).await {
            return None;
        }
        Some(match opened {
            Some(opened) => opened,
            None => open.await,
        })
    }

    /// Claims the task for this worker (unless its row was written claimed) and, once
    /// claimed, tells the client it runs.
    async fn claim(
        &self,
        delivery: &Delivery,
        started: DateTime<Utc>,
        loading: bool,
    ) -> Result<Claim, StoreError> {
        let (task_id, me) = (delivery.job.task_id, self.handle.name());
        let claim = if delivery.claimed {
            Ok(Claim::Claimed)
        } else {
            self.store.claim(task_id, me, started).await
        };
        if matches!(claim, Ok(Claim::Claimed) | Err(_)) {
            let worker = me.clone();
            self.events
                .publish(task_id, TaskEvent::Started { worker, loading })
                .await;
        }
        claim
    }

    /// Whether a job runs after its claim: not when its task already finished or is not in
    /// the store.
    async fn may_run(&self, job: &Job, claim: Result<Claim, StoreError>) -> bool {
        let me = self.handle.name();
        match claim {
            Ok(Claim::Claimed) => true,
            Ok(Claim::AlreadyFinished) => {
                tracing::info!(worker = %me, "task already finished; duplicate delivery skipped");
                false
            }
            Ok(Claim::Missing) => {
                // Its insert failed: whoever waits for it hears why from the recording.
                tracing::warn!(worker = %me, "task is not in the store; skipped");
                let message = format!("task {} is not in the task store", job.task_id);
                self.events
                    .publish(job.task_id, TaskEvent::Failed { message })
                    .await;
                false
            }
            Err(e) => {
                // Run it anyway: the answer matters more than the bookkeeping.
                tracing::error!(error = %e, "could not mark task running");
                true
            }
        }
    }

    /// The task's outcome and the event that ends it for the client, from what the answer
    /// produced and how it ended; `None` when it failed before its first token and was
    /// handed to another worker.
    async fn conclude(
        &self,
        job: &Job,
        started: DateTime<Utc>,
        got: &Collected,
        result: Result<Chunk, BackendError>,
    ) -> Option<(TaskOutcome, TaskEvent)> {
        let me = self.handle.name();
        let mut outcome = got.outcome(job, me, started);
        let terminal = match result {
            Ok(done) => {
                self.handle.mark_ok();
                tracing::debug!(worker = %me, total_ms = outcome.total_ms, "task done");
                TaskEvent::Chunk { chunk: done }
            }
            Err(e) if got.first_token_at.is_none() && self.try_failover(job, &e).await => {
                return None;
            }
            Err(e) => {
                if got.first_token_at.is_none() {
                    self.handle.mark_failed(&e.to_string());
                }
                // The whole error here, once (the span names the task); the row and the
                // client get what may be shown.
                tracing::warn!(worker = %me, error = %e, "task failed");
                let message = e.public_message(job.lang);
                outcome.status = TaskStatus::Failed;
                outcome.error = Some(message.clone());
                TaskEvent::Failed { message }
            }
        };
        Some((outcome, terminal))
    }

    /// Records the outcome, then sends the client the `terminal` event. The outcome is
    /// written before the client hears the end (so whoever reads the task after the
    /// answer sees it), and this returns once it is durable, so that the job is
    /// acknowledged only then. Returns false when the row had ended already: then a task
    /// cancelled just as its answer ended gets that answer as its partial one.
    async fn record(&self, job: &Job, outcome: &TaskOutcome, terminal: TaskEvent) -> bool {
        match self.store.finish(job.task_id, outcome).await {
            Ok(recording) => {
                self.events.publish(job.task_id, terminal).await;
                match recording.await {
                    Ok(true) => {}
                    Ok(false) => {
                        let kept =
                            async { self.store.record_partial(job.task_id, outcome).await?.await };
                        if let Err(e) = kept.await {
                            tracing::error!(error = %e, "could not record the cancelled task's answer");
                        }
                        return false;
                    }
                    Err(e) => tracing::error!(error = %e, "could not record the task's result"),
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "could not record the task's result");
                self.events.publish(job.task_id, terminal).await;
            }
        }
        true
    }

    /// Writes a finished turn to memory, after its answer was delivered, from what the job
    /// and its outcome hold (the service decided at submission whether it may be kept).
    async fn remember(&self, job: &Job, outcome: &TaskOutcome) {
        let (Some(memory), Some(note)) = (&self.memory, &job.memory) else {
            return;
        };
        let exchange = Exchange {
            task_id: job.task_id,
            person: &note.person,
            thread_id: &note.thread_id,
            prompt: &note.prompt,
            response: outcome.response.as_deref().unwrap_or(""),
            ended_at: outcome.at,
        };
        if let Err(e) = memory.remember_exchange(&exchange).await {
            tracing::warn!(error = %e, "could not write the turn to memory");
        }
    }

    /// The model this worker answers `job` with: the RAG lane's configured model where
    /// this backend serves it, a web or RAG job's own model where it does, else this
    /// backend's first model; any other job's own model.
    pub(crate) fn answer_model(&self, job: &Job) -> ModelName {
        let own = || self.handle.models().into_iter().next().map(|m| m.name);
        let served = |m: &ModelName| self.handle.serves(m);
        match &job.lane {
            Lane::Rag => self
                .rag
                .as_ref()
                .and_then(|ctx| ctx.model.clone())
                .filter(served)
                .or_else(own),
            Lane::Web => Some(job.request.model.clone()).filter(served).or_else(own),
            Lane::Llm { .. } | Lane::Utility => None,
        }
        .unwrap_or_else(|| job.request.model.clone())
    }

    /// Calls the backend (through the web lane for web jobs) and returns its answer's
    /// chunks once the answer has started.
    async fn open(&self, job: &Job, num_ctx: Option<u32>) -> Result<Opened, BackendError> {
        if let (Some(ctx), Lane::Rag) = (&self.rag, &job.lane) {
            let model = self.answer_model(job);
            let answer =
                crate::docs::lane::rag_stream(ctx, &self.handle.backend, &job.request, model)
                    .await?;
            return Ok(Opened {
                chunks: answer.chunks,
                fallback: answer.fallback,
            });
        }
        match (&self.web, job.lane == Lane::Web) {
            (Some(ctx), true) => {
                let mut request = job.request.clone();
                request.model = self.answer_model(job);
                let answer = web_stream(ctx, &self.handle.backend, &request).await?;
                let fallback = answer
                    .outcome
                    .fallback_used
                    .then(|| answer.outcome.fallback_reason.clone().unwrap_or_default());
                Ok(Opened {
                    chunks: answer.chunks,
                    fallback,
                })
            }
            _ => {
                let adjusted = self.as_sent_here(job, num_ctx);
                let request = adjusted.as_ref().unwrap_or(&job.request);
                let chunks = if job.response.is_streamed() {
                    self.handle.backend.chat(request).await?
                } else {
                    self.handle.backend.complete(request).await?
                };
                Ok(Opened {
                    chunks,
                    fallback: None,
                })
            }
        }
    }

    /// The job's request as this machine gets it, when that differs from the job's: the
    /// window it gives it (Ollama's `num_ctx`, unless the request set its own) and its
    /// residency (`keep_alive`: the request's, else the config's for the model, else the
    /// server's default, stamped so that Ollama pushes out the least recently used model:
    /// see [`crate::backend::keep_alive`]).
    fn as_sent_here(&self, job: &Job, num_ctx: Option<u32>) -> Option<BackendRequest> {
        let num_ctx = num_ctx.filter(|n| job.request.params.num_ctx != Some(*n));
        let asked = job.request.params.keep_alive.as_ref();
        let keep_alive = self
            .handle
            .keep_alive_to_send(&job.request.model, asked)
            .filter(|k| Some(k) != asked);
        if num_ctx.is_none() && keep_alive.is_none() {
            return None;
        }
        let mut request = match num_ctx {
            Some(n) => job.request.with_num_ctx(n),
            None => job.request.clone(),
        };
        if keep_alive.is_some() {
            request.params.keep_alive = keep_alive;
        }
        Some(request)
    }

    /// Forwards an answer's chunks as events, all but the final `Done`, which it returns
    /// so that the outcome is recorded before the client hears the end.
    async fn forward(
        &self,
        job: &Job,
        mut chunks: ChunkStream,
        got: &mut Collected,
        in_flight: &mut InFlight,
    ) -> Result<Chunk, BackendError> {
        while let Some(item) = chunks.next().await {
            let chunk = item?;
            if got.first_token_at.is_none() {
                got.first_token_at = Some(Utc::now());
            }
            match &chunk {
                Chunk::Done { usage, .. } => {
                    got.usage = Some(usage.clone());
                    return Ok(chunk);
                }
                Chunk::Content { .. } => in_flight.token(),
                Chunk::Reasoning { .. } | Chunk::ToolCalls { .. } => {}
            }
            got.keep(&chunk);
            self.events
                .publish(job.task_id, TaskEvent::Chunk { chunk })
                .await;
        }
        Err(BackendError::Protocol {
            backend: self.handle.name().to_string(),
            message: "the stream ended without a final record".to_owned(),
        })
    }

    /// What the task showed of this machine's speed, for placement (`began`: how it
    /// started here, see [`Began`]). The fresh look at its resident models that follows
    /// every answer is [`InFlight`]'s, when it ends.
    fn learn(&self, job: &Job, began: Began, started: DateTime<Utc>, got: &Collected) {
        let (Some(first), Some(usage)) = (got.first_token_at, got.usage.as_ref()) else {
            return;
        };
        let seconds = |a: DateTime<Utc>, b: DateTime<Utc>| (b - a).as_seconds_f64().max(0.0);
        let sample = Sample {
            was_loaded: began.was_loaded,
            alone: began.alone,
            cached: began.cached,
            ttft_s: seconds(started, first),
            generation_s: seconds(first, Utc::now()),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            backend: usage.backend_timings,
        };
        self.handle.learn(&job.request.model, sample);
    }

    /// Placement, seen from the worker that got a job from the lane rather than directly:
    /// when placement ([`crate::placement::best_of`], among the workers the job has not
    /// been left by yet) prefers another worker (a warm model where this one would load
    /// it, a faster machine that frees up first, or an equal one configured earlier), the
    /// job is left for it, and this worker is added to the job's avoid list, so a job
    /// moves at most once per worker; it waits for the others for as long as placement
    /// expects it to start sooner there ([`Job::avoid_until`], at least [`LEAVE_FOR`]).
    /// When that time has passed and this worker gets the job back, it looks again with
    /// what it sees now: the other may still be sooner (its running answer took longer
    /// than expected), and then the job is left to it once more; a machine that has gone
    /// out of service meanwhile is sooner no longer. A job that avoids this worker still
    /// (the queue gave up putting it back) runs here. A job that moved because its first
    /// token was late ([`super::late`]) is placed like a fresh one: it was queued for the
    /// machine that gives it sooner, and whichever worker is free first takes it from the
    /// lane (in the household, the mini PC took a turn moved to the desktop, and it had to
    /// move a second time). Never for a failover's retry (the failed worker must stay
    /// avoided, and the retry runs on the first that takes it) or jobs pinned to this
    /// worker, and background work is never handed to a machine where it would push out a
    /// model.
    pub(super) async fn hand_to_sooner_worker(&self, job: &Job) -> bool {
        let me = self.handle.name();
        let model = &job.request.model;
        let now = Utc::now();
        let failed_over = job.attempt > 0 && job.avoid_until.is_none();
        if failed_over || job.avoids(me, now) || job.lane.is_pinned() {
            return false;
        }
        let all = self.directory.statuses();
        // Never back to a machine the job has left (late, or for a sooner one), even once
        // the time it left the job to the others has passed: with figures that favour it
        // again, a turn would go back and forth between two machines for as long as each
        // looked sooner to the other (56 s, seen). That machine may still take the job
        // from the queue when it is free; it is only not handed there.
        let statuses: Vec<WorkerStatus> = may_hold(job, me, &all)
            .filter(|s| !job.avoid.contains(&s.name) || &s.name == me)
            .cloned()
            .collect();
        let waiting = self.waiting_before(job, &statuses, &all).await;
        let ask = crate::placement::Ask::of(&job.request, job.thread_id.as_ref()).after(&waiting);
        let weighed = crate::placement::weighed(&statuses, &ask);
        let Some(best) = crate::placement::best_among(&weighed) else {
            return false;
        };
        if &best == me {
            return false;
        }
        match self.queue.behind_of(&job.lane, job).await {
            Ok(behind) if behind.jobs > 0 => {
                if let Some(handed) = self
                    .keep_for_those_behind(job, &all, &ask, &best, behind)
                    .await
                {
                    return handed;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(lane = %job.lane, error = %e, "could not read the jobs waiting behind a task; placing without them");
            }
        }
        // It waits for the others as long as placement expects to gain by it; after
        // that this worker looks again.
        let gain = crate::placement::sooner_by(&weighed, me, &best).unwrap_or(0.0);
        let (avoid, until) = left_by(job, me, gain);
        if !self.leave(job, avoid, until).await {
            return false;
        }
        tracing::info!(worker = %me, to = %best, model = %model, "placement prefers another worker; left for it");
        true
    }

    /// The turns-behind rule ([`crate::placement::keeper_for_those_behind`]) for `job`,
    /// which placement would leave for the busy `best` while `behind` waits after it: every
    /// machine that would take it without waiting is weighed as its keeper (this one
    /// first), those the job has left for a sooner one included, so that the outcome does
    /// not hang on which idle worker took it from the lane. `Some(false)` when this worker
    /// keeps it, `Some(true)` when it was handed to another keeper (every other machine
    /// serving the model leaves it to that one for a moment, as for a late move), `None`
    /// when no machine should keep it.
    async fn keep_for_those_behind(
        &self,
        job: &Job,
        all: &[WorkerStatus],
        ask: &crate::placement::Ask<'_>,
        best: &WorkerName,
        behind: crate::placement::Ahead,
    ) -> Option<bool> {
        let me = self.handle.name();
        let model = &job.request.model;
        let now = Utc::now();
        let statuses: Vec<WorkerStatus> = may_hold(job, me, all).cloned().collect();
        let weighed = crate::placement::estimates(&statuses, ask, now);
        let mut keepers = vec![me.clone()];
        keepers.extend(
            weighed
                .iter()
                .filter(|e| &e.worker != me && &e.worker != best && !e.waits())
                .filter(|e| statuses.iter().any(|s| s.name == e.worker && s.healthy))
                .map(|e| e.worker.clone()),
        );
        let keeper = crate::placement::keeper_for_those_behind(
            &statuses, ask, &weighed, &keepers, best, behind,
        )?;
        if &keeper == me {
            tracing::info!(worker = %me, sooner = %best, model = %model, waiting_behind = behind.jobs, "kept here: on the sooner worker it would hold the slot the turns behind it wait for");
            return Some(false);
        }
        let (avoid, until) = left_for(job, me, 0.0, &keeper, all);
        if !self.leave(job, avoid, until).await {
            return Some(false);
        }
        tracing::info!(worker = %me, to = %keeper, sooner = %best, model = %model, waiting_behind = behind.jobs, "handed to the machine that should keep it: on the sooner worker it would hold the slot the turns behind it wait for");
        Some(true)
    }

    /// Queues `job` again, for the others: those of `avoid` leave it until `until`. Not
    /// an attempt. Returns whether it was queued (when not, it runs here).
    async fn leave(&self, job: &Job, avoid: Vec<WorkerName>, until: DateTime<Utc>) -> bool {
        let next = Job {
            avoid,
            avoid_until: Some(until),
            ..job.clone()
        };
        if let Err(e) = self.queue.enqueue(next).await {
            tracing::warn!(error = %e, "could not hand the task on; running it here");
            return false;
        }
        true
    }

    /// What waits in the queue before `job`, which this worker took: the jobs of its lane
    /// that were to go before it (not those queued since: [`crate::queue::Queue::ahead_of`]),
    /// and the backlog of each other machine among `candidates` (what only it serves, among
    /// `all`: see [`crate::placement::backlog`]). This worker's own
    /// backlog does not count: it took this job before its other work. The queue is asked
    /// lane by lane; a lane it cannot read counts as empty.
    pub(super) async fn waiting_before(
        &self,
        job: &Job,
        candidates: &[WorkerStatus],
        all: &[WorkerStatus],
    ) -> crate::placement::Waiting {
        let me = self.handle.name();
        let mut lanes = vec![job.lane.clone()];
        for s in candidates.iter().filter(|s| &s.name != me) {
            lanes.extend(crate::placement::backlog::lanes_owed_by(all, s, &job.lane));
        }
        let mut waiting = crate::placement::Waiting::default();
        for lane in &lanes {
            match self.queue.ahead_of(lane, job).await {
                Ok(ahead) => waiting.count(all, &job.lane, lane, ahead),
                Err(e) => {
                    tracing::warn!(lane = %lane, error = %e, "could not read the jobs waiting in a lane; placing without them");
                }
            }
        }
        waiting
    }

    /// Hands a job that failed before its first token to another worker, when one serves
    /// the model and attempts remain. Returns whether it did.
    async fn try_failover(&self, job: &Job, error: &BackendError) -> bool {
        let me = self.handle.name().clone();
        self.handle.mark_failed(&error.to_string());
        let pinned = job.lane.is_pinned();
        let mut avoid = job.avoid.clone();
        avoid.push(me.clone());
        if self.directory.others_serving(&job.request.model, &avoid) == 0 {
            // Workers avoided only for placement may still serve it.
            avoid = vec![me.clone()];
        }
        if pinned
            || !error.is_retryable()
            || job.attempt + 1 >= MAX_ATTEMPTS
            || self.directory.others_serving(&job.request.model, &avoid) == 0
        {
            return false;
        }
        // Avoided because it failed: no longer left for anyone.
        if !self
            .hand_on(job, avoid, None, error.public_message(job.lang))
            .await
        {
            return false;
        }
        tracing::warn!(worker = %me, error = %error, "backend failed before the first token; handed to another worker");
        true
    }

    /// Queues `job` again as its next attempt, avoiding the workers of `avoid` until
    /// `until` (with `None`, not only for a while), records it on the task's row, and
    /// tells the client why (`reason`, in the prompt's language). Returns whether it was
    /// queued.
    pub(super) async fn hand_on(
        &self,
        job: &Job,
        avoid: Vec<WorkerName>,
        until: Option<DateTime<Utc>>,
        reason: String,
    ) -> bool {
        let next = Job {
            attempt: job.attempt + 1,
            avoid,
            avoid_until: until,
            ..job.clone()
        };
        let Ok(text) = serde_json::to_string(&next) else {
            return false;
        };
        if let Err(e) = self.store.requeue(job.task_id, &text, Utc::now()).await {
            tracing::error!(error = %e, "could not record the retry");
        }
        if let Err(e) = self.queue.enqueue(next).await {
            tracing::error!(error = %e, "could not queue the retry");
            return false;
        }
        let worker = self.handle.name().clone();
        self.events
            .publish(job.task_id, TaskEvent::Retrying { worker, reason })
            .await;
        true
    }

    pub(super) async fn ack(&self, delivery: &Delivery) {
        if let Err(e) = self.queue.ack(delivery).await {
            tracing::error!(error = %e, "could not acknowledge the job");
        }
    }
}
