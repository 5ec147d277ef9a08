//! The realistic mode of the fake: one home machine running Ollama, as seen from outside.
//!
//! - Each resident model runs at most [`Realism::parallel`] generations at once; the rest
//!   wait in a FIFO inside the server, and past [`Realism::max_queue`] waiting requests the
//!   server answers 503 (Ollama's `OLLAMA_NUM_PARALLEL`, `OLLAMA_MAX_QUEUE`).
//! - At most [`Realism::max_loaded`] models are resident. Requests are admitted in arrival
//!   order, one at a time, as Ollama's scheduler does: a request for a model that is not
//!   resident waits until a resident one is idle, evicts an idle one, then pays the
//!   model's load time; the requests behind it wait meanwhile. The victim is the one
//!   Ollama's scheduler picks ([`Eviction::Ollama`]): the idle model whose last request set
//!   the shortest `keep_alive`, then the first by model file path, which is not always the
//!   least recently used (Coordinator stamps its keep-alives so that it is:
//!   `crate::backend::keep_alive`); [`Eviction::LeastRecentlyUsed`] evicts by recency
//!   alone.
//! - An idle model unloads when its keep-alive ends (the `keep_alive` of the last request
//!   that set one, else [`Realism::keep_alive`] from its load on); `keep_alive: 0` unloads
//!   it as soon as it is idle.
//! - Prompt processing and generation take the model's [`Speed`]; a runner keeps the prompt
//!   it processed last per slot, so a follow-up that extends it only pays for the new part.
//! - The context window is `options.num_ctx`, else [`Realism::num_ctx`], capped at the
//!   model's own [`ModelSpec::context_length`](super::ModelSpec). A longer prompt loses its
//!   oldest messages (system messages stay), then the start of what is left, and
//!   `prompt_eval_count` says how much was kept: the whole prompt kept, the part a slot's
//!   cache held included, as Ollama's runner counts it, while `prompt_eval_duration` is
//!   the time of the part evaluated.
//! - Every wait is divided by [`Realism::time_scale`]: `time_scale = 10.0` is a machine ten
//!   times faster than life. Ollama's reported durations are what the machine took (wall
//!   time), so they agree with the clock of a client measuring them, as a real machine's
//!   do; [`SimStats`] and [`Generation`] tell the run in simulated ("life") time.
//! - A client that goes away (the response body is dropped) stops its generation.
//!
//! [`SimStats`] and [`Generation`] tell afterwards what the machine did.

use std::collections::VecDeque;
use std::pin::pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use tokio_util::sync::CancellationToken;

use super::lock;
use super::reply::Timings;

/// How fast a model runs on a machine, in simulated time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speed {
    /// From "not resident" to "ready" (weights read into (V)RAM).
    pub load: Duration,
    /// Prompt processing, tokens per second.
    pub prompt_tps: f64,
    /// Generation, tokens per second.
    pub eval_tps: f64,
}

impl Speed {
    /// A 7-8B model on a GPU desktop.
    pub const DESKTOP: Self = Self {
        load: Duration::from_secs(3),
        prompt_tps: 1500.0,
        eval_tps: 80.0,
    };
}

/// How long an idle model stays resident: Ollama's `keep_alive`, read as Ollama reads it.
pub use crate::backend::keep_alive::KeepAlive;

/// Which idle model a load evicts on a full machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Eviction {
    /// The least recently used, whatever keep-alive each request set.
    LeastRecentlyUsed,
    /// Ollama's scheduler (`findRunnerToUnload`): the loaded runners sorted by the
    /// `keep_alive` of the last request each served, shortest first (a negative one, kept
    /// until evicted, last), then by model file path (here the model's digest, as the
    /// blob's name is), and the first idle one unloaded. The default.
    #[default]
    Ollama,
}

/// The file Ollama keeps `model`'s weights in, as far as its eviction order goes: named by
/// a digest (here of the model's name).
pub(super) fn model_path(model: &str) -> String {
    use sha2::Digest;
    format!("blobs/sha256-{:x}", sha2::Sha256::digest(model.as_bytes()))
}

/// The realistic mode's settings (see the module doc). The defaults are Ollama's: one
/// generation per model, 512 waiting requests, one resident model, five minutes of
/// keep-alive, a 4096-token window, in real time.
#[derive(Debug, Clone, PartialEq)]
pub struct Realism {
    pub parallel: usize,
    pub max_queue: usize,
    pub max_loaded: usize,
    pub keep_alive: KeepAlive,
    pub num_ctx: u32,
    /// 10.0 runs ten times faster than life.
    pub time_scale: f64,
    /// The speed of models that do not set their own.
    pub speed: Speed,
    /// The length range of an ordinary answer, in tokens; each prompt gets a length drawn
    /// deterministically from its text.
    pub answer_tokens: (usize, usize),
    /// Wall time a given-up load stays listed in `/api/ps` and holds its room: Ollama
    /// notices that the request which began a load has left at its next poll of the
    /// loading runner, and unloads it then.
    pub give_up_within: Duration,
    /// Which idle model a load evicts on a full machine.
    pub eviction: Eviction,
}

impl Default for Realism {
    fn default() -> Self {
        Self {
            parallel: 1,
            max_queue: 512,
            max_loaded: 1,
            keep_alive: KeepAlive::For(Duration::from_secs(300)),
            num_ctx: 4096,
            time_scale: 1.0,
            speed: Speed::DESKTOP,
            answer_tokens: (120, 400),
            give_up_within: Duration::from_millis(250),
            eviction: Eviction::Ollama,
        }
    }
}

/// What a realistic machine did since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    /// Generation requests admitted (chat on either API, load requests included).
    pub requests: u64,
    /// Requests refused with 503 because the queue was full.
    pub rejected: u64,
    pub loads: u64,
    /// Models unloaded to make room for another.
    pub evictions: u64,
    /// Models unloaded and loaded again because a request asked for another context size.
    pub reloads: u64,
    /// Models unloaded because their keep-alive ended.
    pub expiries: u64,
    pub tokens_generated: u64,
    /// Of those, for prompts that are Open WebUI task templates (`### Task:`).
    pub template_tokens: u64,
    /// Generations whose client went away before the end.
    pub cancelled: u64,
    /// Prompts that did not fit the context window and lost their start.
    pub truncated_prompts: u64,
    /// Prompt tokens processed, and those found in a slot's cache instead.
    pub prompt_tokens: u64,
    pub cached_prompt_tokens: u64,
    /// The most requests that were waiting (for a load, an eviction or a slot) at once.
    pub deepest_queue: u64,
    /// Requests whose client went away before their generation started (no
    /// [`Generation`] records them).
    pub left_waiting: u64,
    /// Loads given up because every request waiting for them went away before the model
    /// was ready (Ollama aborts a load whose client closes; counted in `loads` too, and
    /// whatever it evicted stays evicted).
    pub aborted_loads: u64,
}

/// One generation, as the machine saw it. Durations are in simulated time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generation {
    pub model: String,
    /// The last user message as the request sent it (before any truncation).
    pub last_user: String,
    /// Whether the prompt is an Open WebUI task template.
    pub template: bool,
    /// Tokens of the whole prompt after truncation, and how many of them were evaluated
    /// (the rest came from the cache).
    pub prompt_tokens: u32,
    pub prompt_evaluated: u32,
    pub truncated: bool,
    /// Tokens generated (up to the disconnect, if the client went away).
    pub tokens: u32,
    pub cancelled: bool,
    /// From arrival to the start of generation's prompt processing, and of that the load.
    pub waited: Duration,
    pub load: Duration,
    /// Arrival, since the server started.
    pub arrived: Duration,
    /// When each of the `tokens` was generated (wall clock, as the stream paces them), so
    /// a client's clock can tell those made after it had gone.
    #[serde(skip)]
    pub token_times: Vec<Instant>,
}

/// Refused: the machine already holds `max_queue` waiting requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy;

/// One message of a prompt, as the simulation weighs it.
#[derive(Debug, Clone)]
pub(crate) struct SimMessage {
    pub role: String,
    pub text: String,
}

/// A prompt fitted into its context window.
#[derive(Debug, Clone)]
pub(crate) struct Fitted {
    /// The messages the model sees: the oldest that did not fit are gone, and the first
    /// one left may have lost its start.
    pub messages: Vec<SimMessage>,
    pub tokens: u32,
    pub truncated: bool,
    hashes: Vec<u64>,
    message_tokens: Vec<u32>,
}

impl Fitted {
    /// The last message the model sees, when it is the user's.
    pub fn last_user(&self) -> Option<&str> {
        self.messages
            .last()
            .filter(|m| m.role == "user")
            .map(|m| m.text.as_str())
    }
}

/// How many generations the machine's log keeps (the oldest go first).
const GENERATION_LOG: usize = 10_000;

/// Template tokens Ollama adds around each message (role markers).
const MESSAGE_OVERHEAD: u32 = 4;

/// The simulation's token estimate: about four characters per token, one per CJK character.
pub(crate) fn estimate_tokens(text: &str) -> u32 {
    let mut wide = 0u32;
    let mut narrow = 0u32;
    for c in text.chars() {
        if is_wide(c) {
            wide += 1;
        } else {
            narrow += 1;
        }
    }
    wide + narrow.div_ceil(4)
}

pub(crate) fn is_wide(c: char) -> bool {
    matches!(u32::from(c), 0x3000..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF00..=0xFFEF)
}

fn message_tokens(m: &SimMessage) -> u32 {
    estimate_tokens(&m.text) + MESSAGE_OVERHEAD
}

fn message_hash(m: &SimMessage) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in m.role.bytes().chain([0u8]).chain(m.text.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Fits `messages` into `num_ctx` tokens as Ollama does: the system messages and the last
/// message stay, the oldest others go first; if the rest still does not fit, the last
/// message loses its start.
pub(crate) fn fit(messages: Vec<SimMessage>, num_ctx: u32) -> Fitted {
    let tokens: Vec<u32> = messages.iter().map(message_tokens).collect();
    let total: u32 = tokens.iter().sum();
    let mut keep = vec![true; messages.len()];
    let mut over = total.saturating_sub(num_ctx);
    let last = messages.len().saturating_sub(1);
    for (i, m) in messages.iter().enumerate() {
        if over == 0 || i == last {
            break;
        }
        if m.role != "system" {
            keep[i] = false;
            over = over.saturating_sub(tokens[i]);
        }
    }
    let truncated = total > num_ctx;
    let mut kept: Vec<SimMessage> = messages
        .into_iter()
        .zip(&keep)
        .filter_map(|(m, k)| k.then_some(m))
        .collect();
    if over > 0 {
        if let Some(m) = kept.last_mut() {
            // Drop characters from the start until the estimate fits.
            let budget = estimate_tokens(&m.text).saturating_sub(over);
            let mut start = m.text.len();
            for (at, _) in m.text.char_indices().rev() {
                if estimate_tokens(&m.text[at..]) > budget {
                    break;
                }
                start = at;
            }
            m.text = m.text[start..].to_owned();
        }
    }
    let message_tokens: Vec<u32> = kept.iter().map(message_tokens).collect();
    Fitted {
        hashes: kept.iter().map(message_hash).collect(),
        tokens: message_tokens.iter().sum(),
        message_tokens,
        messages: kept,
        truncated,
    }
}

/// One resident (or loading) model.
struct Runner {
    id: u64,
    model: String,
    num_ctx: u32,
    ready_at: Instant,
    /// Requests attached (waiting for a slot or generating).
    refs: usize,
    slots: Arc<Semaphore>,
    last_used: Instant,
    idle_since: Option<Instant>,
    keep_alive: KeepAlive,
    /// The message hashes each slot processed last, most recent last.
    caches: VecDeque<Vec<u64>>,
    /// A load nobody waits for any more: listed and holding its room until it is gone.
    given_up: bool,
}

#[derive(Default)]
struct State {
    runners: Vec<Runner>,
    /// Tickets of requests not yet attached to a runner, in arrival order.
    admission: VecDeque<u64>,
    next_id: u64,
    /// Requests inside the server that are not generating yet.
    waiting: usize,
    stats: SimStats,
    generations: VecDeque<Generation>,
}

/// A model as `/api/ps` shows it.
#[derive(Debug, Clone)]
pub(crate) struct Resident {
    pub model: String,
    pub num_ctx: u32,
    /// When it unloads if nothing uses it meanwhile (wall clock); `None`: never.
    pub expires_in: Option<Duration>,
}

/// The state of one simulated machine.
pub(crate) struct Sim {
    pub realism: Realism,
    started: Instant,
    state: Mutex<State>,
    changed: Notify,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("realism", &self.realism)
            .finish_non_exhaustive()
    }
}

/// What a request needs from the machine.
pub(crate) struct Want<'a> {
    pub model: &'a str,
    pub speed: Speed,
    pub num_ctx: u32,
    pub keep_alive: Option<KeepAlive>,
    /// A request with no messages, which only loads the model (and sets its keep-alive):
    /// Ollama's scheduler answers it once the runner is ready, whether or not its slots
    /// are busy (the slots are the runner's own, for generations).
    pub load_only: bool,
}

impl Sim {
    pub fn new(realism: Realism) -> Self {
        Self {
            realism,
            started: Instant::now(),
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        }
    }

    /// Wall time for a span of simulated time.
    pub fn wall(&self, life: Duration) -> Duration {
        life.div_f64(self.scale())
    }

    /// Simulated time for a span of wall time.
    pub fn life(&self, wall: Duration) -> Duration {
        wall.mul_f64(self.scale())
    }

    fn scale(&self) -> f64 {
        if self.realism.time_scale > 0.0 {
            self.realism.time_scale
        } else {
            1.0
        }
    }

    pub fn stats(&self) -> SimStats {
        let mut state = lock(&self.state);
        self.expire(&mut state, Instant::now());
        state.stats.clone()
    }

    pub fn generations(&self) -> Vec<Generation> {
        lock(&self.state).generations.iter().cloned().collect()
    }

    /// The resident models, most recently used first.
    pub fn resident(&self) -> Vec<Resident> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        self.expire(&mut state, now);
        let mut runners: Vec<&Runner> = state.runners.iter().collect();
        runners.sort_by_key(|r| std::cmp::Reverse(r.last_used));
        runners
            .into_iter()
            .map(|r| Resident {
                model: r.model.clone(),
                num_ctx: r.num_ctx,
                expires_in: r.keep_alive.lasts().map(|d| {
                    let from = r.idle_since.unwrap_or(now);
                    (from + self.wall(d)).saturating_duration_since(now)
                }),
            })
            .collect()
    }

    /// Unloads idle models whose keep-alive has ended.
    fn expire(&self, state: &mut State, now: Instant) {
        let before = state.runners.len();
        state
            .runners
            .retain(|r| match (r.idle_since, r.keep_alive.lasts()) {
                (Some(idle), Some(d)) => idle + self.wall(d) > now,
                _ => true,
            });
        let gone = before - state.runners.len();
        state.stats.expiries += gone as u64;
    }

    /// Unloads `model` now if it is idle (`keep_alive: 0` on an empty chat); whether it was.
    pub fn unload(&self, model: &str) -> bool {
        let mut state = lock(&self.state);
        let before = state.runners.len();
        state.runners.retain(|r| !(r.model == model && r.refs == 0));
        let gone = before != state.runners.len();
        if gone {
            state.stats.expiries += 1;
            self.changed.notify_waiters();
        }
        gone
    }

    /// Waits, in arrival order, for the model to be resident and one of its slots free
    /// (a load-only request: resident alone).
    pub async fn admit(self: &Arc<Self>, want: Want<'_>) -> Result<Lease, Busy> {
        let arrived = Instant::now();
        let mut pending = {
            let mut state = lock(&self.state);
            self.expire(&mut state, arrived);
            if state.waiting >= self.realism.max_queue {
                state.stats.rejected += 1;
                return Err(Busy);
            }
            state.waiting += 1;
            state.stats.deepest_queue = state.stats.deepest_queue.max(state.waiting as u64);
            state.stats.requests += 1;
            state.next_id += 1;
            let ticket = state.next_id;
            state.admission.push_back(ticket);
            Pending {
                sim: self.clone(),
                ticket: Some(ticket),
                runner: None,
                waiting: true,
            }
        };
        let (runner, slots, ready_at) = loop {
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable();
            match self.try_attach(&mut pending, &want) {
                Some(attached) => break attached,
                None => notified.await,
            }
        };
        // The slot is taken in admission order (the semaphore is fair), and only then is
        // the load awaited, so requests that wait for the same load start first come,
        // first served.
        let attached = Instant::now();
        let permit = if want.load_only {
            None
        } else {
            Some(slots.acquire_owned().await.map_err(|_| Busy)?)
        };
        tokio::time::sleep_until(ready_at.into()).await;
        // As Ollama reports it, the load is the wait for the runner, not for its slot.
        let ready = ready_at.max(attached);
        pending.stop_waiting();
        pending.runner = None;
        Ok(Lease {
            sim: self.clone(),
            runner,
            _permit: permit,
            arrived,
            ready,
            started: Instant::now(),
        })
    }

    /// One admission step for the request at the head of the line: attach to the
    /// model's runner, load it, or evict an idle one to make room. `None`: wait for a change.
    fn try_attach(
        &self,
        pending: &mut Pending,
        want: &Want<'_>,
    ) -> Option<(u64, Arc<Semaphore>, Instant)> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        self.expire(&mut state, now);
        loop {
            if state.admission.front() != pending.ticket.as_ref() {
                return None;
            }
            let keep_alive = want.keep_alive.unwrap_or(self.realism.keep_alive);
            if let Some(i) = state.runners.iter().position(|r| r.model == want.model) {
                if state.runners[i].given_up {
                    // Ollama loads the model anew once the given-up load is gone.
                    return None;
                }
                if state.runners[i].num_ctx != want.num_ctx {
                    // A different context size needs a new runner once this one is idle.
                    if state.runners[i].refs > 0 {
                        return None;
                    }
                    state.runners.remove(i);
                    state.stats.reloads += 1;
                    continue;
                }
                let r = &mut state.runners[i];
                r.refs += 1;
                r.idle_since = None;
                r.last_used = now;
                // A request that sets none leaves the model the keep-alive it had.
                r.keep_alive = want.keep_alive.unwrap_or(r.keep_alive);
                let attached = (r.id, r.slots.clone(), r.ready_at);
                self.attached(&mut state, pending, attached.0);
                return Some(attached);
            }
            if state.runners.len() < self.realism.max_loaded.max(1) {
                state.next_id += 1;
                let id = state.next_id;
                let ready_at = now + self.wall(want.speed.load);
                let slots = Arc::new(Semaphore::new(self.realism.parallel.max(1)));
                state.runners.push(Runner {
                    id,
                    model: want.model.to_owned(),
                    num_ctx: want.num_ctx,
                    ready_at,
                    refs: 1,
                    slots: slots.clone(),
                    last_used: now,
                    idle_since: None,
                    keep_alive,
                    caches: VecDeque::new(),
                    given_up: false,
                });
                state.stats.loads += 1;
                self.attached(&mut state, pending, id);
                return Some((id, slots, ready_at));
            }
            let idle = state
                .runners
                .iter()
                .enumerate()
                .filter(|(_, r)| r.refs == 0 && !r.given_up);
            let victim = match self.realism.eviction {
                Eviction::LeastRecentlyUsed => idle.min_by_key(|(_, r)| r.last_used),
                Eviction::Ollama => idle.min_by(|(_, a), (_, b)| {
                    let rank = |r: &Runner| (r.keep_alive.rank(), model_path(&r.model));
                    rank(a).cmp(&rank(b))
                }),
            }
            .map(|(i, _)| i)?;
            state.runners.remove(victim);
            state.stats.evictions += 1;
        }
    }

    fn attached(&self, state: &mut State, pending: &mut Pending, runner: u64) {
        state.admission.pop_front();
        pending.ticket = None;
        pending.runner = Some(runner);
        self.changed.notify_waiters();
    }

    /// Detaches a request from its runner; an idle runner starts its keep-alive. A runner
    /// still loading that nobody waits for any more is dropped: Ollama aborts a load when
    /// the client that asked for it closes its connection ("client connection closed
    /// before llama-server finished loading, aborting load"). Ollama ties the load to the
    /// request that began it; here it goes on while any request waits for it. A given-up
    /// load stays listed and holds its room for [`Realism::give_up_within`].
    fn release(self: &Arc<Self>, runner: u64) {
        let now = Instant::now();
        let mut state = lock(&self.state);
        if let Some(i) = state.runners.iter().position(|r| r.id == runner) {
            let r = &mut state.runners[i];
            r.refs = r.refs.saturating_sub(1);
            r.last_used = now;
            if r.refs == 0 && now < r.ready_at {
                state.stats.aborted_loads += 1;
                let lag = self.realism.give_up_within;
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) if !lag.is_zero() => {
                        state.runners[i].given_up = true;
                        let sim = Arc::clone(self);
                        runtime.spawn(async move {
                            tokio::time::sleep(lag).await;
                            lock(&sim.state).runners.retain(|r| r.id != runner);
                            sim.changed.notify_waiters();
                        });
                    }
                    _ => {
                        state.runners.remove(i);
                    }
                }
            } else if r.refs == 0 {
                r.idle_since = Some(now);
                if r.keep_alive.lasts() == Some(Duration::ZERO) {
                    state.runners.remove(i);
                    state.stats.expiries += 1;
                }
            }
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Tokens of `fitted` already in one of the runner's slot caches (the longest shared
    /// prefix of messages); the slot then holds this prompt.
    fn take_cache(&self, runner: u64, fitted: &Fitted) -> u32 {
        let mut state = lock(&self.state);
        let parallel = self.realism.parallel.max(1);
        let Some(r) = state.runners.iter_mut().find(|r| r.id == runner) else {
            return 0;
        };
        let shared = |cache: &Vec<u64>| {
            cache
                .iter()
                .zip(&fitted.hashes)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let best = r
            .caches
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| shared(c))
            .map(|(i, c)| (i, shared(c)));
        let cached_messages = match best {
            Some((i, n)) if n > 0 => {
                r.caches.remove(i);
                n
            }
            _ => 0,
        };
        r.caches.push_back(fitted.hashes.clone());
        while r.caches.len() > parallel {
            r.caches.pop_front();
        }
        // The last message is always evaluated (the model must see something new).
        let cached_messages = cached_messages.min(fitted.hashes.len().saturating_sub(1));
        fitted.message_tokens[..cached_messages].iter().sum()
    }

    /// Adds the answer to the slot cache that holds `fitted`, so the next turn of the same
    /// chat finds its whole history cached.
    fn cache_answer(&self, runner: u64, fitted: &Fitted, answer: &str) {
        let mut state = lock(&self.state);
        let Some(r) = state.runners.iter_mut().find(|r| r.id == runner) else {
            return;
        };
        if let Some(cache) = r.caches.iter_mut().rev().find(|c| **c == fitted.hashes) {
            cache.push(message_hash(&SimMessage {
                role: "assistant".to_owned(),
                text: answer.to_owned(),
            }));
        }
    }

    fn record(&self, generation: Generation) {
        let mut state = lock(&self.state);
        let stats = &mut state.stats;
        stats.tokens_generated += u64::from(generation.tokens);
        if generation.template {
            stats.template_tokens += u64::from(generation.tokens);
        }
        stats.cancelled += u64::from(generation.cancelled);
        stats.truncated_prompts += u64::from(generation.truncated);
        stats.prompt_tokens += u64::from(generation.prompt_tokens);
        stats.cached_prompt_tokens += u64::from(
            generation
                .prompt_tokens
                .saturating_sub(generation.prompt_evaluated),
        );
        if state.generations.len() >= GENERATION_LOG {
            state.generations.pop_front();
        }
        state.generations.push_back(generation);
    }
}

/// A request on its way in; dropping it (the client went away) undoes its place.
struct Pending {
    sim: Arc<Sim>,
    ticket: Option<u64>,
    runner: Option<u64>,
    waiting: bool,
}

impl Pending {
    fn stop_waiting(&mut self) {
        if std::mem::take(&mut self.waiting) {
            lock(&self.sim.state).waiting -= 1;
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.waiting {
            lock(&self.sim.state).stats.left_waiting += 1;
        }
        self.stop_waiting();
        if let Some(ticket) = self.ticket.take() {
            lock(&self.sim.state).admission.retain(|t| *t != ticket);
            self.sim.changed.notify_waiters();
        }
        if let Some(runner) = self.runner.take() {
            self.sim.release(runner);
        }
    }
}

/// A slot on a ready runner, held while one generation runs.
pub(crate) struct Lease {
    sim: Arc<Sim>,
    runner: u64,
    /// The slot it generates in; none for a load-only request.
    _permit: Option<OwnedSemaphorePermit>,
    arrived: Instant,
    ready: Instant,
    started: Instant,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.sim.release(self.runner);
    }
}

/// The timing of one generation, in wall time from its start, and its report in life time.
pub(crate) struct Plan {
    /// Prompt processing, before the first token.
    pub prompt: Duration,
    /// Between tokens.
    pub per_token: Duration,
}

/// One generation under way: records itself in the machine's log when dropped, whether it
/// ran to the end or its client went away.
pub(crate) struct Run {
    lease: Lease,
    fitted: Fitted,
    pub plan: Plan,
    evaluated: u32,
    model: String,
    last_user: String,
    template: bool,
    /// Tokens planned and tokens sent so far.
    pub total: u32,
    pub sent: u32,
    /// A non-streamed answer: on a disconnect, the tokens due by then count as generated.
    pub whole: bool,
    answer: String,
}

impl Run {
    /// Starts a generation on `lease`: looks up the slot cache and plans the timing.
    pub fn start(
        lease: Lease,
        fitted: Fitted,
        speed: Speed,
        model: &str,
        last_user: String,
        answer: &str,
    ) -> Self {
        let sim = lease.sim.clone();
        let cached = sim.take_cache(lease.runner, &fitted);
        // Something new is always evaluated, unless there is no prompt at all (a load).
        let evaluated = fitted
            .tokens
            .saturating_sub(cached)
            .max(1)
            .min(fitted.tokens);
        let plan = Plan {
            prompt: sim.wall(rate(evaluated, speed.prompt_tps)),
            per_token: sim.wall(rate(1, speed.eval_tps)),
        };
        Self {
            lease,
            plan,
            evaluated,
            model: model.to_owned(),
            template: last_user.trim_start().starts_with("### Task:"),
            last_user,
            total: 0,
            sent: 0,
            whole: false,
            answer: answer.to_owned(),
            fitted,
        }
    }

    /// When token `i` (from 0) is due.
    pub fn due(&self, i: u32) -> Instant {
        self.lease.started + self.plan.prompt + self.plan.per_token * (i + 1)
    }

    /// Ollama's final-line durations for `tokens` generated tokens, in nanoseconds of
    /// wall time, as planned (the waits follow the plan).
    pub fn timings(&self, tokens: u32) -> Timings {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let eval = self.plan.per_token * tokens;
        Timings {
            total: nanos(self.lease.started - self.lease.arrived + self.plan.prompt + eval),
            load: nanos(self.lease.ready - self.lease.arrived),
            prompt_eval: nanos(self.plan.prompt),
            eval: nanos(eval),
        }
    }

    /// Waits until token `i` is due; `false` if the server shuts down first.
    pub async fn until_due(&self, i: u32, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            () = tokio::time::sleep_until(self.due(i).into()) => true,
            () = shutdown.cancelled() => false,
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let sim = self.lease.sim.clone();
        if self.whole && self.sent < self.total {
            let now = Instant::now();
            self.sent = (0..self.total).take_while(|i| self.due(*i) <= now).count() as u32;
        }
        let finished = self.sent >= self.total;
        if finished {
            sim.cache_answer(self.lease.runner, &self.fitted, &self.answer);
        }
        sim.record(Generation {
            model: std::mem::take(&mut self.model),
            last_user: std::mem::take(&mut self.last_user),
            template: self.template,
            prompt_tokens: self.fitted.tokens,
            prompt_evaluated: self.evaluated,
            truncated: self.fitted.truncated,
            tokens: self.sent,
            cancelled: !finished,
            waited: sim.life(self.lease.started - self.lease.arrived),
            load: sim.life(self.lease.ready - self.lease.arrived),
            arrived: sim.life(self.lease.arrived - sim.started),
            token_times: (0..self.sent).map(|i| self.due(i)).collect(),
        });
    }
}

/// The time `n` tokens take at `tps` tokens per second.
fn rate(n: u32, tps: f64) -> Duration {
    if tps > 0.0 {
        Duration::from_secs_f64(f64::from(n) / tps)
    } else {
        Duration::ZERO
    }
}
