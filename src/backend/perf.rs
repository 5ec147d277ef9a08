//! What a machine has shown of its speed: per model, moving averages of prompt processing
//! and generation rates, of the time a load costs, and of answer length, learned from
//! every task it ran (measured by the worker, so Ollama and OpenAI-compatible backends
//! are learned alike). Placement turns them into an expected time to first token.

use serde::{Deserialize, Serialize};

use crate::domain::ModelName;

/// Weight of a new sample in the moving averages.
const ALPHA: f64 = 0.3;
/// Prompts shorter than this say little about the prompt rate (fixed costs dominate).
const MIN_PROMPT_SAMPLE: u32 = 64;
/// Answers shorter than this say little about the generation rate.
const MIN_ANSWER_SAMPLE: u32 = 16;

/// What is assumed of a machine nothing is known about yet, when no other machine is
/// known either: a 7-8B model on a modest GPU.
pub const ASSUMED: Rates = Rates {
    load_s: 5.0,
    prompt_tps: 500.0,
    eval_tps: 30.0,
    answer_tokens: 250.0,
};

/// Learned rates of one model on one machine; `None` until a sample says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPerf {
    pub model: ModelName,
    pub load_s: Option<f64>,
    /// Whether `load_s` is only a lower bound (a turn that left this machine before its
    /// first token, [`ModelPerf::left_late`]) rather than a load that was seen: a figure
    /// extrapolated from the machine's other loads is taken where it is longer, and the
    /// first load seen replaces it. Stored with the figures: a bound read back is still
    /// only a bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub load_bound: bool,
    pub prompt_tps: Option<f64>,
    pub eval_tps: Option<f64>,
    pub answer_tokens: Option<f64>,
    pub samples: u64,
    /// Which figures are only a first impression (the wall clock of an answer still
    /// running): the first finished task's own figure replaces them instead of being
    /// averaged with them. Not stored: a figure read back from the store was learned.
    #[serde(skip)]
    provisional: Provisional,
}

/// The figures of a [`ModelPerf`] that a first impression set.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Provisional {
    load: bool,
    prompt: bool,
    eval: bool,
}

/// Rates with every figure filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub load_s: f64,
    pub prompt_tps: f64,
    pub eval_tps: f64,
    pub answer_tokens: f64,
}

/// How a task started on its machine, as its [`Sample`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Began {
    pub was_loaded: bool,
    pub alone: bool,
    pub cached: bool,
}

/// One finished task as the worker saw it.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Whether the model was resident when the task started.
    pub was_loaded: bool,
    /// Whether nothing else ran on the machine when the task started. A load that had to
    /// wait behind other work reports the wait with it (Ollama's `load_duration` runs
    /// from the request to a ready runner): it says how long the load took then, not how
    /// long a load takes.
    pub alone: bool,
    /// Whether the machine's prompt cache may have held most of the prompt (its
    /// conversation ran there with this model lately, and the model was not loaded since).
    /// Its time to first token, and Ollama's `prompt_eval_duration`, then cover only the
    /// part not held, while `prompt_tokens` (Ollama's `prompt_eval_count`) counts the whole
    /// prompt: the task says nothing of the prompt rate.
    pub cached: bool,
    pub ttft_s: f64,
    /// From the first token to the end.
    pub generation_s: f64,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// The backend's own account (Ollama), which separates load, prompt and generation.
    pub backend: Option<crate::chat::BackendTimings>,
}

fn blend(old: Option<f64>, new: f64) -> Option<f64> {
    if !new.is_finite() || new <= 0.0 {
        return old;
    }
    Some(old.map_or(new, |o| o + ALPHA * (new - o)))
}

/// How far from a learned figure one task's figure is taken to be, at most, either way.
/// A machine's speed does not change tenfold from one task to the next; a sample that
/// says so was something else (a prompt its cache held that nothing marked as such: a
/// long system prompt another conversation had just sent, counted whole by Ollama and
/// evaluated in a fraction of the time). A real change still shows within a few tasks.
const MAX_STEP: f64 = 4.0;

/// A finished task's figure folded into `old`: it replaces a first impression (a stall of
/// the machine, or of this process, while the answer ran would otherwise stay in the
/// average for many tasks), and moves a learned figure by [`ALPHA`] towards it, taken
/// as at most [`MAX_STEP`] times the figure (or a [`MAX_STEP`]th of it).
fn settle(provisional: &mut bool, old: Option<f64>, new: f64) -> Option<f64> {
    if !new.is_finite() || new <= 0.0 {
        return old;
    }
    if std::mem::take(provisional) {
        return Some(new);
    }
    blend(
        old,
        old.map_or(new, |o| new.clamp(o / MAX_STEP, o * MAX_STEP)),
    )
}

impl ModelPerf {
    pub fn new(model: ModelName) -> Self {
        Self {
            model,
            load_s: None,
            load_bound: false,
            prompt_tps: None,
            eval_tps: None,
            answer_tokens: None,
            samples: 0,
            provisional: Provisional::default(),
        }
    }

    /// Folds one task in. A warm task teaches the prompt rate (its time to first token
    /// is prompt processing); a cold one teaches the load (what its first token took
    /// beyond the prompt at the known rate).
    pub fn learn(&mut self, s: Sample) {
        self.samples += 1;
        if s.completion_tokens > 0 {
            self.answer_tokens = blend(self.answer_tokens, f64::from(s.completion_tokens));
        }
        if let Some(b) = s.backend {
            self.learn_reported(&s, b);
            return;
        }
        if s.was_loaded {
            if s.prompt_tokens >= MIN_PROMPT_SAMPLE && !s.cached {
                self.prompt_tps = settle(
                    &mut self.provisional.prompt,
                    self.prompt_tps,
                    f64::from(s.prompt_tokens) / s.ttft_s,
                );
            }
        } else if self.takes_load(&s) {
            let prompt_s = self
                .prompt_tps
                .map_or(0.0, |tps| f64::from(s.prompt_tokens) / tps);
            self.seen_load((s.ttft_s - prompt_s).max(0.001));
        }
        if s.completion_tokens >= MIN_ANSWER_SAMPLE && s.generation_s > 0.0 {
            self.eval_tps = settle(
                &mut self.provisional.eval,
                self.eval_tps,
                f64::from(s.completion_tokens.saturating_sub(1)) / s.generation_s,
            );
        }
    }

    /// Whether a cold task's load counts: when it started on an idle machine, or while
    /// nothing better is known.
    fn takes_load(&self, s: &Sample) -> bool {
        s.alone || self.load_s.is_none() || self.load_bound
    }

    /// A load that was seen, folded into `load_s`: it replaces a bound or a first
    /// impression, and moves a learned figure.
    fn seen_load(&mut self, seconds: f64) {
        if std::mem::take(&mut self.load_bound) {
            self.provisional.load = true;
        }
        self.load_s = settle(&mut self.provisional.load, self.load_s, seconds);
    }

    /// Learns from Ollama's durations. Ollama's `prompt_eval_count` (the sample's
    /// `prompt_tokens`) counts the whole prompt, the part its slot's cache held included
    /// (the runner counts a sequence's inputs before it loads the cache slot), while
    /// `prompt_eval_duration` is the time spent on the rest: the count over the duration
    /// is the machine's rate only when the cache held next to nothing, so a task whose
    /// conversation the cache may have held (`cached`) teaches no prompt rate. A cold one
    /// does: the load leaves the cache empty.
    fn learn_reported(&mut self, s: &Sample, b: crate::chat::BackendTimings) {
        if !s.was_loaded && self.takes_load(s) {
            self.seen_load(b.load_s.max(0.001));
        }
        if s.prompt_tokens >= MIN_PROMPT_SAMPLE && !s.cached && b.prompt_eval_s > 0.0 {
            self.prompt_tps = settle(
                &mut self.provisional.prompt,
                self.prompt_tps,
                f64::from(s.prompt_tokens) / b.prompt_eval_s,
            );
        }
        if s.completion_tokens >= MIN_ANSWER_SAMPLE && b.eval_s > 0.0 {
            self.eval_tps = settle(
                &mut self.provisional.eval,
                self.eval_tps,
                f64::from(s.completion_tokens) / b.eval_s,
            );
        }
    }

    /// What an answer still running shows of the machine, taken only for figures nothing
    /// is known of yet (a cold start: the first answers take many seconds, and placement
    /// should not wait for them to end to tell a fast machine from a slow one). At its
    /// first token: the load (a cold start) or the prompt rate (a warm one); some tokens
    /// later, the generation rate so far. A finished task's sample then refines them.
    pub fn first_impression(
        &mut self,
        r: &super::activity::Running,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        let Some(first) = r.first_token_at else {
            return;
        };
        let seconds = |a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>| {
            (b - a).as_seconds_f64().max(0.0)
        };
        let ttft = seconds(r.started_at, first);
        if r.cold && (self.load_s.is_none() || self.load_bound) {
            let prompt_s = self
                .prompt_tps
                .map_or(0.0, |tps| f64::from(r.prompt_tokens) / tps);
            self.load_s = Some((ttft - prompt_s).max(0.001));
            self.load_bound = false;
            self.provisional.load = true;
        } else if !r.cold
            && !r.cached
            && self.prompt_tps.is_none()
            && r.prompt_tokens >= MIN_PROMPT_SAMPLE
            && ttft > 0.0
        {
            self.prompt_tps = Some(f64::from(r.prompt_tokens) / ttft);
            self.provisional.prompt = true;
        }
        let generating = seconds(first, now);
        if self.eval_tps.is_none() && r.tokens >= MIN_ANSWER_SAMPLE && generating > 0.0 {
            self.eval_tps = Some(f64::from(r.tokens - 1) / generating);
            self.provisional.eval = true;
        }
    }

    /// What a task that left this machine with no first token shows (it moved to a
    /// sooner one, see `worker::late`): its first token would have come later than
    /// `waited_s` after it started. Without this a machine nothing is known of keeps the
    /// optimistic figures that sent the task there, and gets the next one too. Taken only
    /// when the task started `alone` (a wait behind other work says nothing of the
    /// machine): a cold one's load took at least the wait less the prompt at `assumed`'s
    /// rate where none is known here; a warm one's prompt, when the machine's cache could
    /// not hold it, went no faster than its tokens over the wait. A figure is only ever
    /// made slower, and stays a first impression: the next finished task's own figure
    /// replaces it. The load so set is a bound (`load_bound`), not a load.
    pub fn left_late(&mut self, began: Began, prompt_tokens: u32, waited_s: f64, assumed: Rates) {
        if !began.alone || !waited_s.is_finite() || waited_s <= 0.0 {
            return;
        }
        if !began.was_loaded {
            let prompt_s =
                f64::from(prompt_tokens) / self.prompt_tps.unwrap_or(assumed.prompt_tps).max(1.0);
            let at_least = waited_s - prompt_s;
            if at_least > self.load_s.unwrap_or(0.0) {
                self.load_s = Some(at_least);
                self.load_bound = true;
                self.provisional.load = true;
            }
        } else if !began.cached && prompt_tokens >= MIN_PROMPT_SAMPLE {
            let at_most = f64::from(prompt_tokens) / waited_s;
            if at_most < self.prompt_tps.unwrap_or(assumed.prompt_tps) {
                self.prompt_tps = Some(at_most);
                self.provisional.prompt = true;
            }
        }
    }

    /// Whether anything was learned of this model here, from a finished task or a first
    /// impression.
    pub fn known(&self) -> bool {
        self.samples > 0
            || self.load_s.is_some()
            || self.prompt_tps.is_some()
            || self.eval_tps.is_some()
    }

    /// The known figures, the rest taken from `fallback`; a load known only as a bound,
    /// the longer of it and `fallback`'s.
    pub fn rates(&self, fallback: Rates) -> Rates {
        Rates {
            load_s: match self.load_s {
                Some(bound) if self.load_bound => bound.max(fallback.load_s),
                Some(seen) => seen,
                None => fallback.load_s,
            },
            prompt_tps: self.prompt_tps.unwrap_or(fallback.prompt_tps),
            eval_tps: self.eval_tps.unwrap_or(fallback.eval_tps),
            answer_tokens: self.answer_tokens.unwrap_or(fallback.answer_tokens),
        }
    }
}

/// What is assumed of a model on a machine that has not run it: per figure, the best any
/// machine has shown for it (optimistic, so an unknown machine gets tried), else
/// `fallback`'s, figured only when some figure is missing.
pub fn fleet_best<'a>(
    known: impl Iterator<Item = &'a ModelPerf>,
    fallback: impl FnOnce() -> Rates,
) -> Rates {
    let known: Vec<&ModelPerf> = known.collect();
    let best = |figure: Figure| {
        known
            .iter()
            .filter_map(|p| (figure.of)(p))
            .reduce(figure.best)
    };
    let (load, prompt, eval, answer) = (best(LOAD), best(PROMPT), best(EVAL), best(ANSWER));
    let fallback = match (load, prompt, eval, answer) {
        (Some(_), Some(_), Some(_), Some(_)) => ASSUMED,
        _ => fallback(),
    };
    Rates {
        load_s: load.unwrap_or(fallback.load_s),
        prompt_tps: prompt.unwrap_or(fallback.prompt_tps),
        eval_tps: eval.unwrap_or(fallback.eval_tps),
        answer_tokens: answer.unwrap_or(fallback.answer_tokens),
    }
}

/// What is assumed of a model that no machine has shown a figure for: per figure, the
/// slowest of the fleet's best for each model that has shown it, else [`ASSUMED`]. A
/// household's models are of a size its machines can run, and the model it runs first
/// says more of them than a figure for any household would: the 500 prompt tokens a
/// second assumed of a modest GPU are a third of what a desktop shows, and on a laptop
/// that took 9 s to load a 7B model, the first minute's turns were left waiting on that
/// guess.
pub fn prior<'a>(fleet: impl Iterator<Item = &'a ModelPerf>) -> Rates {
    let fleet: Vec<&ModelPerf> = fleet.collect();
    let slowest = |figure: Figure, assumed: f64| {
        let mut bests: Vec<(&ModelName, f64)> = Vec::new();
        for p in &fleet {
            let Some(v) = (figure.of)(p) else { continue };
            match bests.iter_mut().find(|(m, _)| *m == &p.model) {
                Some((_, best)) => *best = (figure.best)(*best, v),
                None => bests.push((&p.model, v)),
            }
        }
        bests
            .into_iter()
            .map(|(_, v)| v)
            .reduce(figure.worst)
            .unwrap_or(assumed)
    };
    Rates {
        load_s: slowest(LOAD, ASSUMED.load_s),
        prompt_tps: slowest(PROMPT, ASSUMED.prompt_tps),
        eval_tps: slowest(EVAL, ASSUMED.eval_tps),
        answer_tokens: slowest(ANSWER, ASSUMED.answer_tokens),
    }
}

/// One figure of a [`ModelPerf`], and which of two values of it is the faster.
#[derive(Clone, Copy)]
struct Figure {
    of: fn(&ModelPerf) -> Option<f64>,
    best: fn(f64, f64) -> f64,
    worst: fn(f64, f64) -> f64,
}

/// A load seen; a bound says nothing of how fast a model loads where it has not run.
const LOAD: Figure = Figure {
    of: |p| p.load_s.filter(|_| !p.load_bound),
    best: f64::min,
    worst: f64::max,
};
const PROMPT: Figure = Figure {
    of: |p| p.prompt_tps,
    best: f64::max,
    worst: f64::min,
};
const EVAL: Figure = Figure {
    of: |p| p.eval_tps,
    best: f64::max,
    worst: f64::min,
};
/// A shorter answer is the sooner one.
const ANSWER: Figure = Figure {
    of: |p| p.answer_tokens,
    best: f64::min,
    worst: f64::max,
};

#[cfg(test)]
mod tests {
    use super::*;

    const ALONE_COLD: Began = Began {
        was_loaded: false,
        alone: true,
        cached: false,
    };
    const ALONE_WARM: Began = Began {
        was_loaded: true,
        alone: true,
        cached: false,
    };

    #[test]
    fn a_cold_task_that_left_late_shows_a_load_at_least_its_wait_less_the_prompt() {
        let mut p = ModelPerf::new(model());
        // 1,000 tokens at the assumed 500/s is 2 s of the 12 waited.
        p.left_late(ALONE_COLD, 1000, 12.0, ASSUMED);
        assert_eq!(p.load_s, Some(10.0));
        assert!(p.known());
        // A shorter wait teaches nothing: the load is only ever made slower.
        p.left_late(ALONE_COLD, 1000, 6.0, ASSUMED);
        assert_eq!(p.load_s, Some(10.0));
        // The next finished cold task's own figure replaces the bound (no prompt rate
        // being known, its whole first token).
        p.learn(Sample {
            was_loaded: false,
            alone: true,
            cached: false,
            ttft_s: 25.0,
            generation_s: 10.0,
            prompt_tokens: 1000,
            completion_tokens: 101,
            backend: None,
        });
        assert_eq!(p.load_s, Some(25.0));
    }

    #[test]
    fn one_task_moves_a_learned_figure_by_at_most_a_step() {
        // Ai-core processes prompts at 300 tokens/s. One turn's 2,000 tokens came back
        // "evaluated" in 0.09 s (its cache held them, and nothing said so): 23,000/s.
        let mut p = ModelPerf::new(model());
        p.prompt_tps = Some(300.0);
        let sample = |prompt_eval_s: f64| Sample {
            was_loaded: true,
            alone: true,
            cached: false,
            ttft_s: prompt_eval_s,
            generation_s: 10.0,
            prompt_tokens: 2000,
            completion_tokens: 0,
            backend: Some(crate::chat::BackendTimings {
                load_s: 0.0,
                prompt_eval_s,
                eval_s: 0.0,
            }),
        };
        p.learn(sample(2000.0 / 23_000.0));
        // Taken as 1,200/s (four times the figure): 570, not 7,110.
        assert!((p.prompt_tps.unwrap() - 570.0).abs() < 1e-6, "{p:?}");
        // A machine that really is faster shows it within a few tasks.
        for _ in 0..6 {
            p.learn(sample(2000.0 / 3000.0));
        }
        assert!(p.prompt_tps.unwrap() > 2400.0, "{p:?}");
        // And one that really is slower (a tenth).
        for _ in 0..10 {
            p.learn(sample(2000.0 / 300.0));
        }
        assert!(p.prompt_tps.unwrap() < 400.0, "{p:?}");
    }

    #[test]
    fn a_load_known_only_as_a_bound_stays_a_bound_across_a_restart_until_a_load_is_seen() {
        // A turn left the laptop after 5 s with no first token: its load takes at least
        // 4 s (1,000 tokens at the assumed 1,000/s). Stored and read back (a restart),
        // it is still a bound: where the machine's other loads say 10 s, 10 s is taken.
        let assumed = Rates {
            prompt_tps: 1000.0,
            ..ASSUMED
        };
        let mut p = ModelPerf::new(model());
        p.left_late(ALONE_COLD, 1000, 5.0, assumed);
        let p: ModelPerf = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!((p.load_s, p.load_bound), (Some(4.0), true));
        let extrapolated = Rates {
            load_s: 10.0,
            ..ASSUMED
        };
        assert_eq!(p.rates(extrapolated).load_s, 10.0);
        // Where they say less, the bound holds.
        let quick = Rates {
            load_s: 2.0,
            ..ASSUMED
        };
        assert_eq!(p.rates(quick).load_s, 4.0);
        // A figure seen is a figure: the first load seen replaces the bound (it is not
        // averaged with it, though the bound was read back from the store), and then
        // stands whatever the extrapolation says.
        let mut p = p;
        p.learn(Sample {
            was_loaded: false,
            alone: true,
            cached: false,
            ttft_s: 12.0,
            generation_s: 10.0,
            prompt_tokens: 1000,
            completion_tokens: 101,
            backend: Some(crate::chat::BackendTimings {
                load_s: 9.0,
                prompt_eval_s: 3.0,
                eval_s: 10.0,
            }),
        });
        assert_eq!((p.load_s, p.load_bound), (Some(9.0), false));
        assert_eq!(p.rates(extrapolated).load_s, 9.0);
        // A figure seen that is not a bound is not written as one.
        assert!(!serde_json::to_string(&p).unwrap().contains("load_bound"));
    }

    #[test]
    fn a_warm_task_that_left_late_shows_a_prompt_rate_at_most_its_tokens_over_the_wait() {
        let mut p = ModelPerf::new(model());
        p.left_late(ALONE_WARM, 2000, 10.0, ASSUMED);
        assert_eq!(p.prompt_tps, Some(200.0));
        assert_eq!(p.load_s, None);
        // A known slower rate stays.
        p.left_late(ALONE_WARM, 2000, 4.0, ASSUMED);
        assert_eq!(p.prompt_tps, Some(200.0));
    }

    #[test]
    fn a_task_that_left_late_teaches_nothing_when_its_wait_was_not_the_machines() {
        let mut p = ModelPerf::new(model());
        // Behind other work: the wait was theirs.
        let behind = Began {
            alone: false,
            ..ALONE_COLD
        };
        p.left_late(behind, 1000, 30.0, ASSUMED);
        // The cache may have held the prompt; a short prompt says little of the rate.
        let cached = Began {
            cached: true,
            ..ALONE_WARM
        };
        p.left_late(cached, 2000, 30.0, ASSUMED);
        p.left_late(ALONE_WARM, MIN_PROMPT_SAMPLE - 1, 30.0, ASSUMED);
        assert!(!p.known(), "{p:?}");
    }

    fn model() -> ModelName {
        ModelName::parse("m").unwrap()
    }

    #[test]
    fn warm_tasks_teach_the_prompt_rate_and_cold_ones_the_load() {
        let mut p = ModelPerf::new(model());
        p.learn(Sample {
            was_loaded: true,
            alone: true,
            cached: false,
            ttft_s: 1.0,
            generation_s: 5.0,
            prompt_tokens: 1000,
            completion_tokens: 401,
            backend: None,
        });
        assert_eq!(p.prompt_tps, Some(1000.0));
        assert_eq!(p.eval_tps, Some(80.0));
        assert_eq!(p.load_s, None);
        p.learn(Sample {
            was_loaded: false,
            alone: true,
            cached: false,
            ttft_s: 4.0,
            generation_s: 5.0,
            prompt_tokens: 1000,
            completion_tokens: 401,
            backend: None,
        });
        assert_eq!(p.load_s, Some(3.0));
        // A short prompt says nothing of the rate; the average moves by ALPHA per sample.
        p.learn(Sample {
            was_loaded: true,
            alone: true,
            cached: false,
            ttft_s: 0.5,
            generation_s: 10.0,
            prompt_tokens: 10,
            completion_tokens: 401,
            backend: None,
        });
        assert_eq!(p.prompt_tps, Some(1000.0));
        assert!((p.eval_tps.unwrap() - (80.0 + 0.3 * (40.0 - 80.0))).abs() < 1e-9);
        assert_eq!(p.samples, 3);
    }

    #[test]
    fn ollamas_durations_separate_load_prompt_and_generation() {
        let mut p = ModelPerf::new(model());
        let reported = |load_s, prompt_eval_s, eval_s| {
            Some(crate::chat::BackendTimings {
                load_s,
                prompt_eval_s,
                eval_s,
            })
        };
        p.learn(Sample {
            was_loaded: false,
            alone: true,
            cached: false,
            ttft_s: 13.0,
            generation_s: 30.0,
            prompt_tokens: 450,
            completion_tokens: 300,
            backend: reported(10.0, 3.0, 30.0),
        });
        assert_eq!(
            (p.load_s, p.prompt_tps, p.eval_tps),
            (Some(10.0), Some(150.0), Some(10.0))
        );
        // A warm turn of the same chat, mostly from the cache: Ollama counts the 30 tokens
        // it evaluated, too few to say anything of the rate.
        p.learn(Sample {
            was_loaded: true,
            alone: true,
            cached: false,
            ttft_s: 0.2,
            generation_s: 30.0,
            prompt_tokens: 30,
            completion_tokens: 300,
            backend: reported(0.01, 0.2, 30.0),
        });
        assert_eq!((p.load_s, p.prompt_tps), (Some(10.0), Some(150.0)));
        // A warm turn that evaluated enough (a new paste): its rate counts, its load not.
        p.learn(Sample {
            was_loaded: true,
            alone: true,
            cached: false,
            ttft_s: 4.0,
            generation_s: 30.0,
            prompt_tokens: 600,
            completion_tokens: 300,
            backend: reported(0.01, 4.0, 30.0),
        });
        assert_eq!(p.load_s, Some(10.0));
        assert!((p.prompt_tps.unwrap() - 150.0).abs() < 1e-9);
    }

    #[test]
    fn a_load_that_waited_behind_other_work_teaches_nothing_once_a_load_is_known() {
        let mut p = ModelPerf::new(model());
        let cold = |alone, load_s| Sample {
            was_loaded: false,
            alone,
            cached: false,
            ttft_s: load_s + 1.0,
            generation_s: 5.0,
            prompt_tokens: 1000,
            completion_tokens: 401,
            backend: Some(crate::chat::BackendTimings {
                load_s,
                prompt_eval_s: 1.0,
                eval_s: 5.0,
            }),
        };
        // The first load is taken whatever it waited for: better than nothing.
        p.learn(cold(false, 8.0));
        assert_eq!(p.load_s, Some(8.0));
        p.learn(cold(true, 3.0));
        assert!((p.load_s.unwrap() - (8.0 + 0.3 * (3.0 - 8.0))).abs() < 1e-9);
        let known = p.load_s;
        // Behind another model's answer: the wait is in it; not taken.
        p.learn(cold(false, 12.0));
        assert_eq!(p.load_s, known);
        // The same without Ollama's account: the time to first token says it.
        let mut p = ModelPerf::new(model());
        p.learn(Sample {
            backend: None,
            ..cold(true, 3.0)
        });
        p.learn(Sample {
            backend: None,
            ..cold(false, 12.0)
        });
        assert_eq!(p.load_s, Some(4.0));
    }

    #[test]
    fn an_unknown_machine_is_assumed_as_good_as_the_best_known() {
        let mut fast = ModelPerf::new(model());
        fast.prompt_tps = Some(1500.0);
        fast.eval_tps = Some(80.0);
        let mut slow = ModelPerf::new(model());
        slow.prompt_tps = Some(150.0);
        slow.load_s = Some(10.0);
        let best = fleet_best([&fast, &slow].into_iter(), || ASSUMED);
        assert_eq!(best.prompt_tps, 1500.0);
        assert_eq!(best.eval_tps, 80.0);
        assert_eq!(best.load_s, 10.0);
        assert_eq!(fleet_best(std::iter::empty(), || ASSUMED), ASSUMED);
    }

    /// A model no machine has run is assumed as fast as the slowest of the models the
    /// fleet has run, each at its best machine's figures; a figure no model has shown is
    /// the one assumed of any household.
    #[test]
    fn a_model_nobody_ran_is_assumed_as_fast_as_the_slowest_the_fleet_ran() {
        let on = |m: &str, load: f64, prompt: Option<f64>, eval: f64| {
            let mut p = ModelPerf::new(ModelName::parse(m).unwrap());
            p.load_s = Some(load);
            p.prompt_tps = prompt;
            p.eval_tps = Some(eval);
            p
        };
        // The coder on the desktop and the laptop, the small model on the desktop.
        let fleet = [
            on("coder", 3.0, Some(1500.0), 80.0),
            on("coder", 10.0, Some(150.0), 10.0),
            on("small", 1.5, None, 150.0),
        ];
        let prior = prior(fleet.iter());
        assert_eq!(
            prior.load_s, 3.0,
            "the coder's best load, the slower model's"
        );
        assert_eq!(
            prior.prompt_tps, 1500.0,
            "only the coder showed a prompt rate"
        );
        assert_eq!(prior.eval_tps, 80.0);
        assert_eq!(prior.answer_tokens, ASSUMED.answer_tokens);
        assert_eq!(super::prior(std::iter::empty()), ASSUMED);
    }

    /// A first impression taken while the process or the machine stalled (here: a prompt
    /// of 1,000 tokens that seemed to take 2 s, an answer that seemed to run at 5 tokens a
    /// second) is replaced by the first finished task's own account, not averaged with it;
    /// later tasks move the figures by ALPHA again.
    #[test]
    fn a_finished_task_replaces_a_first_impression() {
        let started = chrono::Utc::now();
        let running = super::super::activity::Running {
            model: model(),
            started_at: started,
            first_token_at: Some(started + chrono::Duration::seconds(2)),
            tokens: 31,
            prompt_tokens: 1000,
            cold: false,
            cached: false,
            priority: Default::default(),
        };
        let mut p = ModelPerf::new(model());
        p.first_impression(&running, started + chrono::Duration::seconds(8));
        assert_eq!(p.prompt_tps, Some(500.0));
        assert_eq!(p.eval_tps, Some(5.0));
        let reported = |prompt_eval_s: f64| Sample {
            was_loaded: true,
            alone: true,
            cached: false,
            ttft_s: prompt_eval_s,
            generation_s: 4.0,
            prompt_tokens: 1000,
            completion_tokens: 200,
            backend: Some(crate::chat::BackendTimings {
                load_s: 0.0,
                prompt_eval_s,
                eval_s: 4.0,
            }),
        };
        p.learn(reported(0.5));
        assert_eq!(p.prompt_tps, Some(2000.0));
        assert_eq!(p.eval_tps, Some(50.0));
        p.learn(reported(1.0));
        assert!((p.prompt_tps.unwrap() - (2000.0 + 0.3 * (1000.0 - 2000.0))).abs() < 1e-9);
        // Without Ollama's account, the worker's own measure replaces it the same way.
        let mut p = ModelPerf::new(model());
        p.first_impression(&running, started + chrono::Duration::seconds(8));
        p.learn(Sample {
            backend: None,
            ..reported(0.5)
        });
        assert_eq!(p.prompt_tps, Some(2000.0));
        assert!((p.eval_tps.unwrap() - 199.0 / 4.0).abs() < 1e-9);
    }

    /// A follow-up whose conversation the machine's prompt cache may hold reports its whole
    /// prompt (Ollama's `prompt_eval_count`) over the time of its new part only: taken as
    /// a rate, it would make a laptop look as fast at prompts as a desktop. It teaches no
    /// prompt rate, from Ollama's account, the worker's own measure or a first impression;
    /// its answer still teaches the generation rate.
    #[test]
    fn a_prompt_the_cache_may_have_held_teaches_no_prompt_rate() {
        let held = |backend| Sample {
            was_loaded: true,
            alone: true,
            cached: true,
            ttft_s: 0.1,
            generation_s: 4.0,
            prompt_tokens: 3000,
            completion_tokens: 201,
            backend,
        };
        let reported = Some(crate::chat::BackendTimings {
            load_s: 0.0,
            prompt_eval_s: 0.1,
            eval_s: 4.0,
        });
        for backend in [reported, None] {
            let mut p = ModelPerf::new(model());
            p.prompt_tps = Some(150.0);
            p.learn(held(backend));
            assert_eq!(p.prompt_tps, Some(150.0), "{backend:?}");
            assert!((p.eval_tps.unwrap() - 50.0).abs() < 1.0, "{backend:?}");
            // The same prompt, nothing held: its rate is taken.
            p.learn(Sample {
                cached: false,
                ..held(backend)
            });
            assert!(p.prompt_tps.unwrap() > 150.0, "{backend:?}");
        }
        let started = chrono::Utc::now();
        let running = super::super::activity::Running {
            model: model(),
            started_at: started,
            first_token_at: Some(started + chrono::Duration::milliseconds(100)),
            tokens: 0,
            prompt_tokens: 3000,
            cold: false,
            cached: true,
            priority: Default::default(),
        };
        let mut p = ModelPerf::new(model());
        p.first_impression(&running, started + chrono::Duration::seconds(1));
        assert_eq!(p.prompt_tps, None);
    }
}
