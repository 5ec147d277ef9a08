//! Placement: which machine gives a task's first token soonest, at what cost to others.
//!
//! For every healthy worker serving the model, the expected time to first token is the
//! wait for a slot (the running answers' remaining work, from how far along they are),
//! plus the load when the model is not resident, plus the prompt at the machine's rate
//! (only the new part of it when the machine's prompt cache holds the conversation). A
//! load on a machine that is full evicts its least recently used idle model; what that
//! costs the conversations that came back to it lately is added to the score, so one
//! person's occasional model does not push out the model two others are using.
//!
//! The wait for a slot counts the jobs already waiting in Coordinator's queue that go
//! before the task ([`Ahead`]): they take the slots first, each where its own first token
//! comes soonest ([`queued::after_ahead`]), so a machine with a backlog looks as busy as it
//! is. The queue's expected wait for a waiting task ([`crate::queue::eta`]) is the same
//! figure. Before those, each machine takes its own backlog ([`backlog`]): the waiting
//! jobs of other lanes that only it serves (pinned to it, or of a model no other machine
//! has).
//!
//! The rates are what each machine has shown ([`crate::backend::perf`]); where a machine
//! has not run the model, the fleet's best for it, scaled by how this machine compares on
//! the models both ran; where it compares with no other, what it showed of its other
//! models scaled by the models' sizes; or taken with caution when nothing at all is known
//! of it.

pub mod backlog;
pub mod guard;
pub mod learned;
pub mod queued;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};

use crate::backend::BackendRequest;
use crate::backend::activity::{RECENT_FOR, Running, capacity};
use crate::backend::perf::{self, Rates};
use crate::backend::registry::WorkerStatus;
use crate::chat::Role;
use crate::domain::{ModelName, ThreadId, WorkerName};

pub use backlog::{Backlog, Waiting};

/// Expected times within this factor and these seconds of the soonest count as the same.
pub const SAME_WITHIN: (f64, f64) = (1.1, 0.1);

/// A machine nothing is known of is assumed this much slower than the best known one:
/// a person is waiting, so an untried machine is tried when the known ones are busy, not
/// because it might be fast.
const UNKNOWN_MACHINE: f64 = 1.5;

/// At most this many returning conversations count toward what an eviction costs.
const MAX_DEMAND: f64 = 2.0;

/// What placement needs of a task.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub model: &'a ModelName,
    /// The whole composed prompt.
    pub prompt_tokens: u32,
    /// Its new part: what follows the conversation's earlier turns (the last user
    /// message and anything after it). A machine holding the conversation in its prompt
    /// cache processes at least this, and more when the history it holds was cut since.
    pub fresh_tokens: u32,
    pub thread: Option<&'a ThreadId>,
    /// The request itself, when placement may look at the window it needs (a resident
    /// model whose window must change reloads).
    pub request: Option<&'a BackendRequest>,
    /// The jobs waiting in the queue that workers take before this task.
    pub ahead: Ahead,
    /// What each machine owes first, in lanes only it serves.
    pub backlog: &'a Backlog,
}

/// The jobs waiting in Coordinator's queue that the workers take before a task: those of
/// its lane that a fresh job of its priority does not overtake (see
/// [`crate::queue::Queue::ahead`]). Read once per placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ahead {
    pub jobs: usize,
    /// Their composed prompts' estimated tokens, summed; `None` when the queue does not
    /// know them (Redis): each then counts as long as the task's own prompt.
    pub prompt_tokens: Option<u64>,
}

impl Ahead {
    /// Nothing waits before the task.
    pub const NONE: Self = Self {
        jobs: 0,
        prompt_tokens: None,
    };

    /// `jobs` waiting whose prompts are not known.
    pub fn jobs(jobs: usize) -> Self {
        Self {
            jobs,
            prompt_tokens: None,
        }
    }

    /// These jobs and `more`: their prompts known only when both know them.
    pub fn plus(self, more: Self) -> Self {
        let prompt_tokens = match (self.jobs, more.jobs) {
            (0, _) => more.prompt_tokens,
            (_, 0) => self.prompt_tokens,
            _ => self
                .prompt_tokens
                .zip(more.prompt_tokens)
                .map(|(a, b)| a + b),
        };
        Self {
            jobs: self.jobs + more.jobs,
            prompt_tokens,
        }
    }

    /// The prompt assumed for each job ahead, in tokens: their mean when known, else
    /// `otherwise`.
    fn prompt_each(&self, otherwise: u32) -> f64 {
        match (self.prompt_tokens, self.jobs) {
            (Some(sum), n) if n > 0 => sum as f64 / n as f64,
            _ => f64::from(otherwise),
        }
    }
}

impl<'a> Ask<'a> {
    /// The ask of a composed request for `thread`.
    pub fn of(request: &'a BackendRequest, thread: Option<&'a ThreadId>) -> Self {
        let last_user = request
            .messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .unwrap_or(0);
        let fresh_tokens = request.messages[last_user..]
            .iter()
            .map(|m| crate::context::estimate_text_tokens(&m.content))
            .sum();
        Self {
            model: &request.model,
            prompt_tokens: request.estimated_prompt_tokens(),
            fresh_tokens,
            thread,
            request: Some(request),
            ahead: Ahead::NONE,
            backlog: &backlog::NONE,
        }
    }

    /// The same ask, behind `ahead` in the queue.
    pub fn behind(self, ahead: Ahead) -> Self {
        Self { ahead, ..self }
    }

    /// The same ask, behind what `waiting` says: its lane's jobs ahead, and what each
    /// machine owes first.
    pub fn after(self, waiting: &'a Waiting) -> Self {
        Self {
            ahead: waiting.ahead,
            backlog: &waiting.backlog,
            ..self
        }
    }

    /// An ask with no conversation behind it: the whole prompt is new.
    pub fn fresh(model: &'a ModelName, prompt_tokens: u32) -> Self {
        Self {
            model,
            prompt_tokens,
            fresh_tokens: prompt_tokens,
            thread: None,
            request: None,
            ahead: Ahead::NONE,
            backlog: &backlog::NONE,
        }
    }
}

/// What placement expects of one worker for one task.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub worker: WorkerName,
    /// Seconds until the task's first token there.
    pub ttft_s: f64,
    /// Seconds the load there would cost the conversations using the model it evicts.
    pub eviction_s: f64,
    /// The model it would evict, if any.
    pub evicts: Option<ModelName>,
    /// Whether the model is resident there.
    pub resident: bool,
    /// Whether its prompt cache holds the conversation.
    pub cached: bool,
    /// Seconds the task would wait there for a slot (or for a busy model to make room)
    /// before its load or prompt begins.
    pub wait_s: f64,
    /// Whether the figures are a guess: the machine has shown nothing of the model nor
    /// anything that compares it with the others ([`rates_shown`]).
    pub guessed: bool,
}

impl Estimate {
    /// Whether the task would wait there for a slot (or for a busy model to make room).
    pub fn waits(&self) -> bool {
        self.wait_s > 0.0
    }

    /// The expected time to first token plus what the load costs others: what placement
    /// minimises.
    pub fn score(&self) -> f64 {
        self.ttft_s + self.eviction_s
    }
}

/// Among workers serving the ask's model, a healthy one (any, when none is) with the best
/// expected time to first token plus eviction cost. Scores within [`SAME_WITHIN`] of the
/// best count as the same, and then one holding the conversation in its cache wins, then
/// one with the model resident and a slot free, then one with a slot free whose load
/// evicts nothing, then one with the model resident, then the worker configured (or, in a
/// cluster, heard from) first: with nothing learned yet the first machine in the config is
/// preferred, and noise in the figures does not move work around.
///
/// After the first two, a machine whose figures are a guess ([`Estimate::guessed`]) is
/// not preferred to one whose figures it has shown: a close call is close only as far as
/// both figures hold. (Seed 6: a paste found moon's chat model pushed out; moon's reload
/// and the untried laptop's load from the fleet's figures were close, and the laptop,
/// which pushed out nothing, took it; its load took 10 s, not the 6.6 s assumed, and the
/// turn moved back to moon after 13 s.)
///
/// A machine that is free now goes before a busy one expected as soon: the task waiting
/// for the busy one would hold its slot next, and whoever asks after it would wait for
/// both, while the free machine's time would go unused. (Three chats starting at once on
/// a desktop with one slot for their model: the second goes to the idle mini PC, whose
/// load takes as long as the first answer, and the third waits for one answer, not two.)
pub fn best_of(statuses: &[WorkerStatus], ask: &Ask<'_>) -> Option<WorkerName> {
    sole_server(statuses, ask.model).or_else(|| best_among(&weighed(statuses, ask)))
}

/// The one worker serving `model`, when no other does: placement has nothing to weigh (a
/// household with one machine), and whatever its figures say, the work goes there.
pub fn sole_server(statuses: &[WorkerStatus], model: &ModelName) -> Option<WorkerName> {
    let mut serving = statuses.iter().filter(|s| s.models.contains(model));
    let only = serving.next()?;
    serving.next().is_none().then(|| only.name.clone())
}

/// The estimates for `ask` now ([`estimates`]), logged: what one decision weighs, figured
/// once for [`best_among`], [`sooner_by`] and [`keeper_for_those_behind`].
pub fn weighed(statuses: &[WorkerStatus], ask: &Ask<'_>) -> Vec<Estimate> {
    let estimates = estimates(statuses, ask, Utc::now());
    tracing::debug!(model = %ask.model, prompt_tokens = ask.prompt_tokens, ahead = ask.ahead.jobs, backlog = ?ask.backlog, estimates = ?estimates, "placement");
    estimates
}

/// [`best_of`] among estimates already figured ([`weighed`]).
pub fn best_among(estimates: &[Estimate]) -> Option<WorkerName> {
    let best = estimates.iter().map(Estimate::score).reduce(f64::min)?;
    let (factor, seconds) = SAME_WITHIN;
    let close: Vec<&Estimate> = estimates
        .iter()
        .filter(|e| e.score() <= best * factor + seconds)
        .collect();
    let shown: Vec<&Estimate> = close.iter().copied().filter(|e| !e.guessed).collect();
    let trusted = if shown.is_empty() { &close } else { &shown };
    close
        .iter()
        .find(|e| e.cached)
        .or_else(|| close.iter().find(|e| e.resident && !e.waits()))
        .or_else(|| trusted.iter().find(|e| !e.waits() && e.evicts.is_none()))
        .or_else(|| trusted.iter().find(|e| e.resident))
        .or(trusted.first())
        .map(|e| e.worker.clone())
}

/// How many seconds sooner placement expects the ask's first token on `to` than on
/// `from`, among its `estimates` ([`weighed`]), what an eviction costs included (the
/// figure [`best_of`] weighs); `None` when either may not take it.
pub fn sooner_by(estimates: &[Estimate], from: &WorkerName, to: &WorkerName) -> Option<f64> {
    Some(score_on(estimates, from)? - score_on(estimates, to)?)
}

/// The score ([`Estimate::score`]) of `worker` among `estimates`; `None` when it may not
/// take the ask.
fn score_on(estimates: &[Estimate], worker: &WorkerName) -> Option<f64> {
    estimates
        .iter()
        .find(|e| &e.worker == worker)
        .map(Estimate::score)
}

/// Which machine among `keepers` should hold a job that placement would leave for the
/// sooner `best` (among `weighed`, the job's estimates), for the jobs waiting `behind` it
/// in its lane: on `best` it would hold the slot they wait for. Weighed for the next of
/// them (a prompt of their mean size): the job left for `best` and that one placed after
/// it (anywhere, the keepers included), against the job on a keeper and that one placed
/// without it (anywhere but that keeper). A keeper should keep it when the longer of the
/// two first tokens is clearly shorter so (beyond [`SAME_WITHIN`]) and their sum is no
/// longer, within [`SAME_WITHIN`]: the worst wait gets shorter without the two waiting
/// longer in all. Of those that should, the one whose plan has the shorter worst first
/// token (the first of `keepers` on a tie); `None` when none should. Whichever idle
/// worker looks at the job, the same machine keeps it.
///
/// Seed 1's warm row: a 23-token turn waited for moon's chat slot, a 2,291-token turn
/// behind it; left for moon, the short one had its first token after 6.2 s and the long
/// one after 12.1; kept on ai-core (its load), after 8.7 and 7.3 s. The laptop took the
/// short turn from the lane before ai-core did in one run and, weighing only itself as the
/// keeper, left it for moon again.
pub fn keeper_for_those_behind(
    statuses: &[WorkerStatus],
    ask: &Ask<'_>,
    weighed: &[Estimate],
    keepers: &[WorkerName],
    best: &WorkerName,
    behind: Ahead,
) -> Option<WorkerName> {
    if behind.jobs == 0 {
        return None;
    }
    let now = Utc::now();
    let soonest = |among: &[WorkerStatus], ask: &Ask<'_>| {
        estimates(among, ask, now)
            .iter()
            .map(Estimate::score)
            .reduce(f64::min)
    };
    let prompt = behind.prompt_each(ask.prompt_tokens).round() as u32;
    let next = Ask {
        prompt_tokens: prompt,
        fresh_tokens: prompt,
        thread: None,
        request: None,
        ..*ask
    };
    // The job left for `best`, the next one after it: the same whoever would keep it.
    let there = score_on(weighed, best)?;
    let with_it = next.behind(ask.ahead.plus(Ahead {
        jobs: 1,
        prompt_tokens: Some(u64::from(ask.prompt_tokens)),
    }));
    let after_it = soonest(statuses, &with_it)?;
    let left = there.max(after_it);
    let (factor, seconds) = SAME_WITHIN;
    keepers
        .iter()
        .filter(|k| *k != best)
        .filter_map(|k| {
            let here = score_on(weighed, k)?;
            let others: Vec<WorkerStatus> =
                statuses.iter().filter(|s| &s.name != k).cloned().collect();
            let without_it = soonest(&others, &next)?;
            let kept = here.max(without_it);
            let keeps = kept * factor + seconds < left
                && here + without_it <= (there + after_it) * factor + seconds;
            keeps.then_some((k, kept))
        })
        .reduce(|a, b| if b.1 < a.1 { b } else { a })
        .map(|(k, _)| k.clone())
}

/// The estimate for every worker that may take the ask: the healthy ones serving its
/// model, or all serving it when none is healthy, in the order given.
pub fn estimates(statuses: &[WorkerStatus], ask: &Ask<'_>, now: DateTime<Utc>) -> Vec<Estimate> {
    let serving: Vec<&WorkerStatus> = statuses
        .iter()
        .filter(|s| s.models.contains(ask.model))
        .collect();
    let any_healthy = serving.iter().any(|s| s.healthy);
    let serving: Vec<&WorkerStatus> = serving
        .into_iter()
        .filter(|s| s.healthy || !any_healthy)
        .collect();
    estimates_among(&serving, statuses, ask, now)
}

/// The estimate on each of `serving` (among `statuses`), once the jobs ahead of the ask
/// in the queue have taken their slots there ([`queued::after_ahead`]).
pub fn estimates_among(
    serving: &[&WorkerStatus],
    statuses: &[WorkerStatus],
    ask: &Ask<'_>,
    now: DateTime<Utc>,
) -> Vec<Estimate> {
    let after = queued::after_ahead(serving, statuses, ask, now);
    serving
        .iter()
        .zip(after)
        .map(|(s, after)| estimate_after(s, ask, statuses, now, after))
        .collect()
}

/// Seconds until the first token of `ask` on `s`, and what its load would cost others,
/// with nothing waiting in the queue before it.
pub fn estimate_on(
    s: &WorkerStatus,
    ask: &Ask<'_>,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> Estimate {
    let after = queued::After {
        free_s: slot_wait(s, ask.model, statuses, now),
        loaded_ahead: false,
        pushed_out: false,
        same_model: 0,
    };
    estimate_after(s, ask, statuses, now, after)
}

/// The estimate on `s` when its soonest slot is free as `after` says.
fn estimate_after(
    s: &WorkerStatus,
    ask: &Ask<'_>,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
    after: queued::After,
) -> Estimate {
    let mut start = start_after(s, ask, statuses, now, after.pushed_out, after.same_model);
    if after.loaded_ahead && !start.resident {
        // A job ahead loads the model (and evicts what that load evicts): the task finds
        // it resident.
        start.seconds = (start.seconds - rates_on(s, ask.model, statuses).load_s).max(0.0);
        start.evicts = None;
        start.eviction_s = 0.0;
    }
    // A load that must wait for a busy resident model to finish waits for it once, in the
    // same time the slot frees: the two waits overlap, they do not add up.
    let wait_s = after.free_s.max(start.busy_wait_s);
    Estimate {
        worker: s.name.clone(),
        ttft_s: wait_s + start.seconds,
        wait_s,
        eviction_s: start.eviction_s,
        evicts: start.evicts,
        resident: start.resident,
        cached: start.cached,
        guessed: start.guessed,
    }
}

/// What starting `ask` on `s` takes once a slot is free there.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    /// The load (when not resident) and the prompt (only its new part when cached).
    pub seconds: f64,
    /// How long a load must wait for a busy resident model to finish first.
    pub busy_wait_s: f64,
    pub eviction_s: f64,
    pub evicts: Option<ModelName>,
    pub resident: bool,
    pub cached: bool,
    /// Whether the rates are a guess ([`rates_shown`]).
    pub guessed: bool,
}

/// The start of `ask` on `s`: see [`Start`].
pub fn start_on(
    s: &WorkerStatus,
    ask: &Ask<'_>,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> Start {
    start_after(s, ask, statuses, now, false, 0)
}

/// The start of `ask` on `s`, its model `pushed_out` by a load of what the machine owes
/// first or not, after `same_model` jobs of its model that start there before it.
fn start_after(
    s: &WorkerStatus,
    ask: &Ask<'_>,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
    pushed_out: bool,
    same_model: usize,
) -> Start {
    let (rates, shown) = rates_shown(s, ask.model, statuses);
    // Resident with a window the request must change counts as not resident: Ollama
    // reloads it, and its prompt cache goes with the old one.
    let resident = !pushed_out
        && s.loaded.contains(ask.model)
        && !ask.request.is_some_and(|r| s.would_reload(r));
    let (load, busy_wait_s, evicts, eviction_s) = if resident {
        (0.0, 0.0, None, 0.0)
    } else {
        let (evicts, busy_wait) = eviction(s, ask.model, statuses, now);
        let cost = evicts
            .as_ref()
            .map_or(0.0, |v| eviction_cost(s, v, statuses, now));
        (rates.load_s, busy_wait.max(0.0), evicts, cost)
    };
    let held = if resident {
        cache_holds(s, ask, same_model)
    } else {
        None
    };
    let tokens = held.unwrap_or(ask.prompt_tokens);
    tracing::trace!(worker = %s.name, model = %ask.model, ?rates, resident, tokens, busy_wait_s, "placement rates");
    Start {
        seconds: load + f64::from(tokens) / rates.prompt_tps.max(1.0),
        busy_wait_s,
        eviction_s,
        evicts,
        resident,
        cached: held.is_some(),
        guessed: !shown,
    }
}

/// The rates placement assumes for `model` on `s`: what it has shown, the rest from the
/// fleet's best scaled to this machine.
pub fn rates_on(s: &WorkerStatus, model: &ModelName, statuses: &[WorkerStatus]) -> Rates {
    rates_shown(s, model, statuses).0
}

/// [`rates_on`], and whether they rest on what `s` has shown: figures of the model, or of
/// other models that compare it with the machines that ran this one or scale to it by
/// size. Otherwise they are the fleet's, taken as they are or with caution: a guess.
pub fn rates_shown(
    s: &WorkerStatus,
    model: &ModelName,
    statuses: &[WorkerStatus],
) -> (Rates, bool) {
    let fleet = fleet_best(statuses, model);
    let compared = Compared::of(s, statuses);
    let mut base = match machine_factor(s, statuses, compared) {
        Some(f) => Rates {
            load_s: fleet.load_s / f.load.unwrap_or_else(|| f.eval.sqrt()),
            prompt_tps: fleet.prompt_tps * f.prompt,
            eval_tps: fleet.eval_tps * f.eval,
            answer_tokens: fleet.answer_tokens,
        },
        None if knows_anything(s) => fleet,
        None => Rates {
            load_s: fleet.load_s * UNKNOWN_MACHINE,
            prompt_tps: fleet.prompt_tps / UNKNOWN_MACHINE,
            eval_tps: fleet.eval_tps / UNKNOWN_MACHINE,
            answer_tokens: fleet.answer_tokens,
        },
    };
    let own = s.perf.iter().find(|p| &p.model == model);
    let scaled = scale_by_size(&mut base, s, model, own, statuses, compared);
    // Its own figures of the model, or figures scaled to it by size, or compared with the
    // others on a model both ran (a load only bounded included), not with itself alone;
    // the cheapest first ([`rates_on`] reads none of it).
    let shown = own.is_some_and(perf::ModelPerf::known)
        || scaled
        || compared.prompt.is_some()
        || compared.eval.is_some()
        || compared.load.is_some()
        || relative(s, statuses, Among::Others, load_speed).is_some();
    (own.map_or(base, |p| p.rates(base)), shown)
}

/// How `s` compares with the others on the models both ran ([`relative`] among the
/// others), per figure; `None` where no model has both.
#[derive(Debug, Clone, Copy)]
struct Compared {
    prompt: Option<f64>,
    eval: Option<f64>,
    /// Loads that were seen, not only bounded.
    load: Option<f64>,
}

impl Compared {
    fn of(s: &WorkerStatus, statuses: &[WorkerStatus]) -> Self {
        Self {
            prompt: relative(s, statuses, Among::Others, |p| p.prompt_tps),
            eval: relative(s, statuses, Among::Others, |p| p.eval_tps),
            load: relative(s, statuses, Among::Others, seen_load_speed),
        }
    }
}

/// Where `s` compares with no other machine on a model both ran (the fleet's figures for
/// `model`, scaled by a factor of one, would be another machine's), what it has shown of
/// its other models, scaled by size, stands in for each figure it has not shown of
/// `model`. A model's load reads its weights, and its prompt and answer rates go with the
/// weights each token passes through: a 7B model on the desktop that has run only the
/// coder of that size is taken at the coder's rates, not at the mini PC's for the chat
/// model, and a mini PC that has run only a 7B model loads and runs a 3B one about twice
/// as fast. Nothing changes where the sizes are not known (OpenAI-compatible servers).
/// Whether a figure was scaled.
fn scale_by_size(
    base: &mut Rates,
    s: &WorkerStatus,
    model: &ModelName,
    own: Option<&perf::ModelPerf>,
    statuses: &[WorkerStatus],
    compared: Compared,
) -> bool {
    let compares = compared.prompt.is_some() && compared.eval.is_some() && compared.load.is_some();
    if compares || s.perf.iter().all(|p| &p.model == model) {
        return false;
    }
    let Some(bytes) = bytes_of(s, statuses, model) else {
        return false;
    };
    let shown = |figure: fn(&perf::ModelPerf) -> Option<f64>| own.and_then(figure).is_some();
    // A figure times its model's bytes, over the machine's other models (geometric mean),
    // per byte of `model`.
    let scaled = |figure: fn(&perf::ModelPerf) -> Option<f64>| {
        let logs: Vec<f64> = s
            .perf
            .iter()
            .filter(|p| &p.model != model)
            .filter_map(|p| {
                let weighted = figure(p)? * bytes_of(s, statuses, &p.model)?;
                (weighted > 0.0).then(|| weighted.ln())
            })
            .collect();
        (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp() / bytes)
    };
    let mut any = false;
    if compared.prompt.is_none()
        && !shown(|p| p.prompt_tps)
        && let Some(tps) = scaled(|p| p.prompt_tps)
    {
        base.prompt_tps = tps;
        any = true;
    }
    if compared.eval.is_none()
        && !shown(|p| p.eval_tps)
        && let Some(tps) = scaled(|p| p.eval_tps)
    {
        base.eval_tps = tps;
        any = true;
    }
    if compared.load.is_none()
        && !shown(seen_load_speed)
        && let Some(speed) = scaled(seen_load_speed)
    {
        base.load_s = speed.recip();
        any = true;
    }
    any
}

/// Bytes of `model`'s weights on `s` (one tag may name another quantization elsewhere),
/// else as the first machine that reports them.
fn bytes_of(s: &WorkerStatus, statuses: &[WorkerStatus], model: &ModelName) -> Option<f64> {
    std::iter::once(s)
        .chain(statuses)
        .flat_map(|w| w.sizes.iter())
        .find(|z| &z.model == model)
        .map(|z| z.bytes as f64)
}

fn knows_anything(s: &WorkerStatus) -> bool {
    s.perf.iter().any(perf::ModelPerf::known)
}

/// What is assumed of `model` where it has not run: per figure, the best any machine has
/// shown for it; a figure none has shown, as fast as the slowest model the fleet has run
/// ([`perf::prior`]).
fn fleet_best(statuses: &[WorkerStatus], model: &ModelName) -> Rates {
    let all = || statuses.iter().flat_map(|s| s.perf.iter());
    perf::fleet_best(all().filter(|p| &p.model == model), || perf::prior(all()))
}

/// How a machine compares with the best of the others, from the models both ran.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Factor {
    prompt: f64,
    eval: f64,
    /// Its load speed against the fleet's quickest, from the models both loaded: a
    /// machine's disk and bus load any model that much slower. `None` when it has loaded
    /// none that another has too; its rates then stand in for it.
    load: Option<f64>,
}

/// The geometric mean, over the models that `s` and another machine have both shown a
/// rate for, of its rate over the best of the others' for that model, at most 1 (a model
/// only `s` ran says nothing of how it compares: counted as its own best, it made a
/// machine that had run only the desktop's coder look as fast as the best on every
/// model). Where there is no such rate, only loads (the first
/// impression of its first answer, or the bound a turn that left it late set), the square
/// of its load speed (one over the load time) against the fleet's quickest, as the factor
/// of both rates: the inverse of [`rates_on`], which takes a machine's load to scale as
/// one over the square root of its rates. A machine that loads a model twice as slowly is
/// taken to answer four times slower until it shows its rates (the household's mini PC
/// loads in twice the desktop's time and runs at a fifth to a third of its rates; its
/// laptop, in three times, at a tenth: at the load ratio alone both looked more than
/// twice as fast as they are, and turns moved to them only to move again). `None` when
/// it has shown neither.
fn machine_factor(s: &WorkerStatus, statuses: &[WorkerStatus], c: Compared) -> Option<Factor> {
    match (c.prompt, c.eval) {
        (None, None) => {
            // A bound (a turn that left before its first token) only where no load was
            // seen: it says the machine is at most that quick.
            let load = relative(s, statuses, Among::All, seen_load_speed)
                .or_else(|| relative(s, statuses, Among::All, load_speed))?;
            let f = (load * load).clamp(0.01, 1.0);
            Some(Factor {
                prompt: f,
                eval: f,
                load: Some(load),
            })
        }
        (p, e) => {
            let known = e.or(p).unwrap_or(1.0);
            Some(Factor {
                prompt: p.unwrap_or(known).clamp(0.01, 1.0),
                eval: e.unwrap_or(known).clamp(0.01, 1.0),
                // Against the other machines only: a model no other has loaded says
                // nothing of how this one's disk and bus compare.
                load: c.load.map(|l| l.clamp(0.01, 1.0)),
            })
        }
    }
}

/// Which machines [`relative`] compares `s` with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Among {
    /// Every machine, `s` included.
    All,
    /// The others.
    Others,
}

/// One over a model's load time: its load speed (at most, where the time is a bound).
fn load_speed(p: &perf::ModelPerf) -> Option<f64> {
    p.load_s.filter(|l| *l > 0.0).map(f64::recip)
}

/// [`load_speed`] of a load that was seen, not only bounded.
fn seen_load_speed(p: &perf::ModelPerf) -> Option<f64> {
    load_speed(p).filter(|_| !p.load_bound)
}

/// The geometric mean, over the models `s` has a `figure` for (higher is better), of its
/// figure over the best the machines `among` have shown for that model, at most 1; `None`
/// when no model has both.
fn relative(
    s: &WorkerStatus,
    statuses: &[WorkerStatus],
    among: Among,
    figure: fn(&perf::ModelPerf) -> Option<f64>,
) -> Option<f64> {
    let logs: Vec<f64> = s
        .perf
        .iter()
        .filter_map(|p| {
            let mine = figure(p)?;
            let best = statuses
                .iter()
                .filter(|o| among == Among::All || o.name != s.name)
                .flat_map(|o| o.perf.iter())
                .filter(|o| o.model == p.model)
                .filter_map(figure)
                .reduce(f64::max)?;
            (mine > 0.0 && best > 0.0).then(|| (mine / best).min(1.0).ln())
        })
        .collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// Seconds until `s` has a free slot for `model`: none when one is free, else until the
/// soonest of the running answers that frees one ends.
fn slot_wait(
    s: &WorkerStatus,
    model: &ModelName,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> f64 {
    slot_free_times(s, model, statuses, now, 1)[0]
}

/// When each of `s`'s slots for `model` is free, soonest first ([`crate::backend::slots`]:
/// `parallel` per model, as many models at once as the machine keeps resident). For a
/// model answering there now: now for a free slot, else when the running answer of it
/// holding the slot ends (from how far along it is); answers beyond the slots (queued
/// inside the backend) hold on to them longest. For a model not answering there: every
/// slot now while fewer models answer than the machine keeps, else when the first of the
/// others is done with all its answers.
///
/// The caller reads at most the `needed` soonest (one, and one more for each job it puts
/// there first): when that many slots are free now, only the free ones are given and the
/// running answers are not looked at. This runs on every submission, for every machine,
/// and a busy machine runs many answers.
pub fn slot_free_times(
    s: &WorkerStatus,
    model: &ModelName,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
    needed: usize,
) -> Vec<f64> {
    let slots = s.parallel.max(1);
    // In flight, but not described (a heartbeat of an older version): of this model.
    let undescribed = s.in_flight.saturating_sub(s.running.len());
    let mine = s.running.iter().filter(|r| &r.model == model).count() + undescribed;
    if mine == 0 {
        return vec![others_done_s(s, model, statuses, now); slots];
    }
    let free = slots.saturating_sub(mine);
    if free >= needed.max(1) {
        return vec![0.0; free];
    }
    let rates = rates_on(s, model, statuses);
    let mut left: Vec<f64> = s
        .running
        .iter()
        .filter(|r| &r.model == model)
        .map(|r| remaining_at(r, &rates, now))
        .collect();
    // Undescribed: a whole answer.
    left.resize(mine, answer_s(&rates));
    left.sort_by(f64::total_cmp);
    let mut times = vec![0.0; free];
    times.extend_from_slice(&left[mine.saturating_sub(slots)..]);
    times
}

/// Seconds until a model not answering on `s` may start there: none while fewer models
/// answer than the machine keeps at once, else until the first of those answering is done
/// with all its answers.
fn others_done_s(
    s: &WorkerStatus,
    model: &ModelName,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> f64 {
    let busy = busy_models(s, Some(model));
    if busy.len() < s.models_at_once() {
        return 0.0;
    }
    busy.iter()
        .map(|m| idle_in(s, m, statuses, now))
        .fold(f64::INFINITY, f64::min)
}

/// The models answering on `s` (but `except`), each once.
fn busy_models<'a>(s: &'a WorkerStatus, except: Option<&ModelName>) -> Vec<&'a ModelName> {
    let mut busy: Vec<&ModelName> = Vec::new();
    for r in s.running.iter().filter(|r| Some(&r.model) != except) {
        if !busy.contains(&&r.model) {
            busy.push(&r.model);
        }
    }
    busy
}

/// Seconds until `model` is done with all its answers on `s`.
fn idle_in(
    s: &WorkerStatus,
    model: &ModelName,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> f64 {
    let rates = rates_on(s, model, statuses);
    s.running
        .iter()
        .filter(|r| &r.model == model)
        .map(|r| remaining_at(r, &rates, now))
        .fold(0.0, f64::max)
}

/// Seconds a whole answer takes at `rates`.
pub fn answer_s(rates: &Rates) -> f64 {
    rates.answer_tokens / rates.eval_tps.max(0.1)
}

/// Seconds until a running answer ends at `rates` (its model's on its machine), from how
/// far along it is.
fn remaining_at(r: &Running, rates: &Rates, now: DateTime<Utc>) -> f64 {
    let eval = rates.eval_tps.max(0.1);
    match r.first_token_at {
        None => {
            let load = if r.cold { rates.load_s } else { 0.0 };
            let ttft = load + f64::from(r.prompt_tokens) / rates.prompt_tps.max(1.0);
            let elapsed = (now - r.started_at).as_seconds_f64().max(0.0);
            (ttft - elapsed).max(0.0) + rates.answer_tokens / eval
        }
        Some(_) => {
            let left = (rates.answer_tokens - f64::from(r.tokens)).max(rates.answer_tokens * 0.1);
            left / eval
        }
    }
}

/// What loading `model` on `s` pushes out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pushes<'a> {
    /// Nothing: the machine has room.
    Nothing,
    /// The idle resident model Ollama pushes out: the first in its order
    /// ([`crate::backend::registry::Resident::evict_rank`]: the least recently used within
    /// one keep-alive, a shorter keep-alive first), the least recently used where that is
    /// not known.
    Idle(&'a ModelName),
    /// Every resident model is busy: the load waits for one of them to finish and
    /// pushes that one out.
    Busy,
}

/// What loading `model` on `s` pushes out (see [`Pushes`]).
pub fn pushes_out<'a>(s: &'a WorkerStatus, model: &ModelName) -> Pushes<'a> {
    let capacity = capacity(s.max_loaded, s.loaded.len());
    let resident: Vec<&ModelName> = s.loaded.iter().filter(|m| *m != model).collect();
    if resident.len() < capacity {
        return Pushes::Nothing;
    }
    let busy = |m: &ModelName| s.running.iter().any(|r| &r.model == m);
    let last_used = |m: &ModelName| {
        s.recent
            .iter()
            .filter(|r| &r.model == m)
            .map(|r| r.at)
            .max()
    };
    let rank = |m: &ModelName| {
        s.resident
            .iter()
            .find(|r| &r.model == m)
            .and_then(|r| r.evict_rank)
            .unwrap_or(0)
    };
    match resident
        .into_iter()
        .filter(|m| !busy(m))
        .min_by_key(|m| (rank(m), last_used(m)))
    {
        Some(victim) => Pushes::Idle(victim),
        None => Pushes::Busy,
    }
}

/// What loading `model` on `s` evicts, and how long the load waits for it (seconds):
/// none for an idle model; when every resident model is busy, the one whose answers end
/// soonest, once they have (the machine admits requests in order, so the load takes the
/// first model to fall idle, and pushes out a model someone is using).
///
/// On an Ollama machine whose room is not known yet (no `max_loaded` configured or
/// learned), a load beside busy models is counted as fitting: the worker tries it beside
/// them (see [`crate::backend::slots::models_at_once`]). Where the machine keeps fewer
/// models than that, Ollama holds the load until one of them is done, which the late rule
/// expects ([`wait_if_full`]) rather than counting it as lateness; the first load that
/// evicts teaches how many the machine keeps. (Counted as waiting for them, as from
/// f8d89a1 to the twenty-ninth session, a desktop whose coder model answered looked 30 s
/// away for the chat model in a household's first seconds, nothing being known of its
/// room; a 1,800-token paste went to the laptop nothing was known of either, and had its
/// first token after 22 s.)
fn eviction(
    s: &WorkerStatus,
    model: &ModelName,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> (Option<ModelName>, f64) {
    match pushes_out(s, model) {
        Pushes::Nothing => (None, 0.0),
        Pushes::Idle(victim) => (Some(victim.clone()), 0.0),
        Pushes::Busy => first_idle(s, statuses, now),
    }
}

/// The busy model on `s` that falls idle first, and in how many seconds.
fn first_idle(
    s: &WorkerStatus,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> (Option<ModelName>, f64) {
    busy_models(s, None)
        .into_iter()
        .map(|m| (m, idle_in(s, m, statuses, now)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or((None, 0.0), |(victim, at)| (Some(victim.clone()), at))
}

/// Seconds a load of `model` on `s` would wait for a busy model to make room, were the
/// machine full: on an Ollama machine of unknown room whose resident models are all busy,
/// until the first of them falls idle; else none (placement counts a known wait itself).
/// Placement counts such a load as fitting ([`eviction`]); a turn that waits so is not
/// late for it. A model resident there needs no room (even one reloaded for another
/// window takes its own place): none.
pub fn wait_if_full(
    s: &WorkerStatus,
    model: &ModelName,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> f64 {
    if room_unknown_and_taken(s, model) {
        first_idle(s, statuses, now).1
    } else {
        0.0
    }
}

/// Whether `s` is an Ollama machine of unknown room, `model` not resident there, whose
/// resident models (at least one) are all answering.
fn room_unknown_and_taken(s: &WorkerStatus, model: &ModelName) -> bool {
    let mut resident = s.loaded.iter().peekable();
    s.kind == crate::config::BackendKind::Ollama
        && s.max_loaded.is_none()
        && !s.loaded.contains(model)
        && resident.peek().is_some()
        && resident.all(|m| s.running.iter().any(|r| &r.model == m))
}

/// What evicting `victim` from `s` costs: its load again, for each conversation (up to
/// [`MAX_DEMAND`]) that used it there lately and is likely to come back.
fn eviction_cost(
    s: &WorkerStatus,
    victim: &ModelName,
    statuses: &[WorkerStatus],
    now: DateTime<Utc>,
) -> f64 {
    let cutoff = now - RECENT_FOR;
    let demand = s
        .recent
        .iter()
        .filter(|r| &r.model == victim && r.at >= cutoff)
        .count() as f64;
    rates_on(s, victim, statuses).load_s * demand.min(MAX_DEMAND)
}

/// When `s`'s prompt cache holds the ask's conversation, the tokens it still has to
/// process: the conversation must be among the last the machine served with this model,
/// one per slot (each slot keeps the last prompt it processed), and its history must have
/// grown since, not been cut at the front (the cache holds a prefix). `None` when not.
/// `ahead` jobs of the model start there before the ask: each takes a slot's cache, as an
/// answer running now does.
fn cache_holds(s: &WorkerStatus, ask: &Ask<'_>, ahead: usize) -> Option<u32> {
    let thread = ask.thread?;
    // An answer of this model running now takes over a slot, and that slot's cache.
    let taken = s.running.iter().filter(|r| &r.model == ask.model).count() + ahead;
    let held = s
        .recent
        .iter()
        .rev()
        .filter(|r| &r.model == ask.model)
        .take(s.parallel.max(1).saturating_sub(taken))
        .find(|r| &r.thread == thread)?;
    (held.tokens <= ask.prompt_tokens)
        .then(|| (ask.prompt_tokens - held.tokens).max(ask.fresh_tokens))
}
