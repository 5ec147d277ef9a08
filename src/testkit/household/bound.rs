//! What no placement can beat in a row: lower bounds on its model loads and on its worst
//! user turns' time to first token, from facts that do not depend on where anything goes.
//!
//! Every row starts from fresh machines, so each model the plan uses is loaded at least
//! once. And each person's first turn is sent at a time the plan fixes (later turns wait
//! for the answers before them, so their times depend on the placement): those first
//! turns, with the machines' speeds, bound the worst time to first token. The bound takes
//! every placement of them and every order on each machine, and is optimistic wherever it
//! can be: a model's load may start the moment anyone first asks for it (on any machine
//! serving it, not only where that request goes), a machine loads one model while it
//! runs another, and nothing else (a later turn, a background task) takes a slot. What it
//! does assume is what the machines are: one generation per model at a time, a load
//! before the first answer of a model that is not resident, the prompt and the answer at
//! the machine's rates, and at most `max_loaded` models on a machine at once.
//!
//! The prompt and answer of each first turn are read off a row where the client sent it
//! to a machine itself (or Coordinator's cold row): the same prompt gets the same answer
//! on every machine.

use std::time::Duration;

use super::machines::Machine;
use super::report::RowReport;
use super::route::RowKind;
use super::workload::Plan;

/// At most this many first turns are weighed (the earliest): every placement of them in
/// every order is tried, and a subset bounds as well as the whole.
const MAX_FIRST_TURNS: usize = 6;

/// A person's first turn: when it is sent and what a machine has to do for it.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstTurn {
    pub marker: String,
    pub model: String,
    /// Since the row's start.
    pub sent: Duration,
    pub prompt_tokens: u32,
    pub answer_tokens: u32,
}

/// What no placement can beat.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounds {
    /// Models the plan uses: each is loaded at least once from fresh machines.
    pub min_loads: usize,
    /// The first turns weighed.
    pub first_turns: Vec<FirstTurn>,
    /// Where the row's loads in all are at most `loads`, the least its worst weighed turn
    /// can wait for its first token, for each `loads` from [`Self::min_loads`] up to
    /// where more loads no longer help.
    pub worst_by_loads: Vec<(usize, Duration)>,
    /// The same, had the models been loaded from the row's start, before anyone asked
    /// (what a scheduler that knew the day's models could do).
    pub preloaded_by_loads: Vec<(usize, Duration)>,
}

impl Bounds {
    /// The least worst first token over any number of loads.
    pub fn worst(&self) -> Option<Duration> {
        self.worst_by_loads.iter().map(|(_, w)| *w).min()
    }

    /// The least worst first token with at most `loads` loads in the row; `None` when
    /// no placement has so few.
    pub fn worst_within(&self, loads: usize) -> Option<Duration> {
        self.worst_by_loads
            .iter()
            .filter(|(n, _)| *n <= loads)
            .map(|(_, w)| *w)
            .min()
    }
}

/// The bounds for `plan` on `machines`, its first turns read off the first of `rows` that
/// answered them all where the client or a fresh Coordinator sent them; `None` when no
/// such row ran.
pub fn of(plan: &Plan, machines: &[Machine], rows: &[RowReport]) -> Option<Bounds> {
    let mut used: Vec<&str> = plan
        .people
        .iter()
        .flat_map(|p| p.turns.iter().map(|t| t.model))
        .collect();
    used.sort_unstable();
    used.dedup();
    let first_turns = rows
        .iter()
        .filter(|r| r.kind != RowKind::CoordinatorWarm)
        .find_map(|r| first_turns(plan, r))?;
    let weighed: Vec<FirstTurn> = first_turns.into_iter().take(MAX_FIRST_TURNS).collect();
    let later_models = used
        .iter()
        .filter(|m| !weighed.iter().any(|t| t.model == **m))
        .count();
    Some(Bounds {
        min_loads: used.len(),
        worst_by_loads: worst_by_loads(&weighed, machines, later_models, Start::Asked),
        preloaded_by_loads: worst_by_loads(&weighed, machines, later_models, Start::Row),
        first_turns: weighed,
    })
}

/// Each person's first turn as `row` recorded it, the earliest sent first; `None` unless
/// every one was answered to its end.
fn first_turns(plan: &Plan, row: &RowReport) -> Option<Vec<FirstTurn>> {
    let mut turns = plan
        .people
        .iter()
        .filter_map(|p| Some((p, p.turns.first()?)))
        .map(|(person, turn)| {
            let detail = row.turns.iter().find(|d| d.marker == turn.marker)?;
            let generation = detail.generation.as_ref().filter(|g| !g.cancelled)?;
            (!detail.stopped && detail.error.is_none()).then(|| FirstTurn {
                marker: turn.marker.clone(),
                model: turn.model.to_owned(),
                sent: person.start,
                prompt_tokens: generation.prompt_tokens,
                answer_tokens: generation.tokens,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    turns.sort_by_key(|t| t.sent);
    Some(turns)
}

/// When a model's load may begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// When anyone first asks for the model.
    Asked,
    /// At the row's start.
    Row,
}

/// One model's slot on one machine.
#[derive(Debug, Clone, Copy)]
struct Slot {
    machine: usize,
    /// Seconds.
    load: f64,
    prompt_tps: f64,
    eval_tps: f64,
}

/// For every placement of `turns` on the slots serving their models, and every order,
/// the worst first token and the loads it needs (a slot used is a load; `later_models`,
/// those only later turns use, one more each); the least worst per number of loads, kept
/// only where it improves on fewer loads. Loads begin as `start` says.
fn worst_by_loads(
    turns: &[FirstTurn],
    machines: &[Machine],
    later_models: usize,
    start: Start,
) -> Vec<(usize, Duration)> {
    let mut slots = Vec::new();
    let choices: Vec<Vec<usize>> = turns
        .iter()
        .map(|t| {
            machines
                .iter()
                .enumerate()
                .filter_map(|(machine, m)| {
                    let served = m.models.iter().find(|s| s.model == t.model)?;
                    let known = slots.iter().position(|(model, slot): &(String, Slot)| {
                        *model == t.model && slot.machine == machine
                    });
                    if known.is_some() {
                        return known;
                    }
                    let at = slots.len();
                    slots.push((
                        t.model.clone(),
                        Slot {
                            machine,
                            load: served.speed.load.as_secs_f64(),
                            prompt_tps: served.speed.prompt_tps,
                            eval_tps: served.speed.eval_tps,
                        },
                    ));
                    Some(at)
                })
                .collect()
        })
        .collect();
    let asked = |model: &str| match start {
        Start::Row => 0.0,
        Start::Asked => turns
            .iter()
            .filter(|t| t.model == model)
            .map(|t| t.sent.as_secs_f64())
            .fold(f64::INFINITY, f64::min),
    };
    let mut best: Vec<Option<f64>> = Vec::new();
    let mut order: Vec<usize> = (0..turns.len()).collect();
    let mut placed = vec![0usize; turns.len()];
    for_each_permutation(&mut order, 0, &mut |order| {
        for_each_choice(&choices, &mut placed, 0, &mut |placed| {
            let Some((worst, loads)) = play(turns, &slots, order, placed, machines, &asked) else {
                return;
            };
            let loads = loads + later_models;
            if best.len() <= loads {
                best.resize(loads + 1, None);
            }
            let cell = &mut best[loads];
            *cell = Some(cell.map_or(worst, |w| w.min(worst)));
        });
    });
    let mut frontier = Vec::new();
    let mut so_far = f64::INFINITY;
    for (loads, worst) in best.into_iter().enumerate() {
        if let Some(w) = worst.filter(|w| *w < so_far) {
            so_far = w;
            frontier.push((loads, Duration::from_secs_f64(w)));
        }
    }
    frontier
}

/// The worst first token of one placement (`placed[i]`: turn `i`'s slot) run in `order`,
/// and the slots it loads; `None` when a machine would hold more models than it keeps.
fn play(
    turns: &[FirstTurn],
    slots: &[(String, Slot)],
    order: &[usize],
    placed: &[usize],
    machines: &[Machine],
    asked: &impl Fn(&str) -> f64,
) -> Option<(f64, usize)> {
    let mut used: Vec<usize> = placed.to_vec();
    used.sort_unstable();
    used.dedup();
    for (i, m) in machines.iter().enumerate() {
        if used.iter().filter(|s| slots[**s].1.machine == i).count() > m.max_loaded {
            return None;
        }
    }
    let mut free = vec![0.0f64; slots.len()];
    let mut worst = 0.0f64;
    for &i in order {
        let turn = &turns[i];
        let (model, slot) = &slots[placed[i]];
        let sent = turn.sent.as_secs_f64();
        let ready = asked(model) + slot.load;
        let start = sent.max(ready).max(free[placed[i]]);
        let first = start + f64::from(turn.prompt_tokens) / slot.prompt_tps;
        free[placed[i]] = first + f64::from(turn.answer_tokens) / slot.eval_tps;
        worst = worst.max(first - sent);
    }
    Some((worst, used.len()))
}

fn for_each_permutation(items: &mut [usize], k: usize, visit: &mut impl FnMut(&[usize])) {
    if k == items.len() {
        visit(items);
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        for_each_permutation(items, k + 1, visit);
        items.swap(k, i);
    }
}

fn for_each_choice(
    choices: &[Vec<usize>],
    placed: &mut [usize],
    k: usize,
    visit: &mut impl FnMut(&[usize]),
) {
    if k == choices.len() {
        visit(placed);
        return;
    }
    for &c in &choices[k] {
        placed[k] = c;
        for_each_choice(choices, placed, k + 1, visit);
    }
}

/// The bounds as markdown lines for the report, against half of `baseline`'s p95 and
/// loads (issue 16's targets) when a baseline row ran.
pub fn markdown(bounds: &Bounds, baseline: Option<&RowReport>) -> String {
    let secs = |d: Duration| format!("{:.1}", d.as_secs_f64());
    let mut out = String::from(
        "Lower bounds for any placement (fresh machines; each person's first turn at its \
         planned time, placed anywhere, in any order; docs/BENCHMARKS.md, \"What no \
         placement can beat\"):\n\n",
    );
    out.push_str(&format!(
        "- loads: at least {} (the models the plan uses)\n",
        bounds.min_loads
    ));
    let weighed: Vec<String> = bounds
        .first_turns
        .iter()
        .map(|t| {
            format!(
                "{} {} at {} s, {} + {} tokens",
                t.marker,
                t.model,
                secs(t.sent),
                t.prompt_tokens,
                t.answer_tokens
            )
        })
        .collect();
    out.push_str(&format!(
        "- worst TTFT (the p95 up to 20 user turns) of the first turns ({}): ",
        weighed.join("; ")
    ));
    let frontier = |by_loads: &[(usize, Duration)]| {
        by_loads
            .iter()
            .map(|(loads, w)| format!("at least {} s with {loads} loads", secs(*w)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&frontier(&bounds.worst_by_loads));
    out.push('\n');
    out.push_str(&format!(
        "- the same had the models been loaded from the row's start, before anyone asked: {}\n",
        frontier(&bounds.preloaded_by_loads)
    ));
    // The bound is on the worst turn, which is the p95 only up to 20 turns.
    if let Some(base) = baseline.filter(|b| b.user_turns <= 20) {
        let half_loads = base.loads / 2;
        let loads = if bounds.min_loads as u64 > half_loads {
            format!("no: the plan uses {} models", bounds.min_loads)
        } else {
            "not ruled out".to_owned()
        };
        out.push_str(&format!(
            "- half of {}'s loads ({half_loads} or fewer): {loads}\n",
            base.kind
        ));
        if let Some(p95) = base.ttft_p95 {
            let half = p95 / 2;
            let alone = match bounds.worst() {
                Some(w) if w > half => format!(
                    "no: the first turns need at least {} s however many loads",
                    secs(w)
                ),
                _ => "not ruled out".to_owned(),
            };
            out.push_str(&format!(
                "- half of {}'s p95 ({} s): {alone}\n",
                base.kind,
                secs(half)
            ));
            let together = match bounds.worst_within(half_loads as usize) {
                None => format!("no: no placement loads {half_loads} times or fewer"),
                Some(w) if w > half => format!(
                    "no: with at most {half_loads} loads the first turns alone need {} s",
                    secs(w)
                ),
                Some(w) => format!(
                    "not ruled out (the first turns need at least {} s)",
                    secs(w)
                ),
            };
            out.push_str(&format!("- both together: {together}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::household::machines::{CHAT, household};

    fn turn(marker: &str, sent_s: f64, prompt_tokens: u32, answer_tokens: u32) -> FirstTurn {
        FirstTurn {
            marker: marker.to_owned(),
            model: CHAT.to_owned(),
            sent: Duration::from_secs_f64(sent_s),
            prompt_tokens,
            answer_tokens,
        }
    }

    fn close(d: Duration, seconds: f64) -> bool {
        (d.as_secs_f64() - seconds).abs() < 1e-6
    }

    #[test]
    fn one_turn_waits_for_the_fastest_load_and_its_prompt() {
        let turns = [turn("[p0.1]", 2.0, 1_500, 100)];
        let frontier = worst_by_loads(&turns, &household(), 0, Start::Asked);
        // moon: its 3 s load, then 1,500 tokens at 1,500 a second.
        assert_eq!(frontier.len(), 1);
        assert_eq!(frontier[0].0, 1);
        assert!(close(frontier[0].1, 4.0), "{frontier:?}");
    }

    /// Seed 2's first two chat turns, 0.2 s apart: one of them waits for the other's
    /// whole answer on moon or for a load elsewhere, 6 s on ai-core at best.
    #[test]
    fn two_turns_at_once_cannot_both_have_the_fast_machine() {
        let turns = [
            turn("[p3.1]", 1.7, 1_791, 314),
            turn("[p0.1]", 1.9, 27, 327),
        ];
        let frontier = worst_by_loads(&turns, &household(), 0, Start::Asked);
        // Both on moon: [p3.1] first (load to 4.7 s, prompt 1.19 s, answer 3.93 s),
        // [p0.1] after it at 9.82 s and its prompt: 7.94 s. [p0.1] on ai-core: its load begun when
        // [p3.1] asked for the model, 6 s, then 27 tokens at 300 a second.
        assert_eq!(frontier[0].0, 1);
        assert!(close(
            frontier[0].1,
            1.7 + 3.0 + 1_791.0 / 1_500.0 + 314.0 / 80.0 + 27.0 / 1_500.0 - 1.9
        ));
        assert_eq!(frontier[1].0, 2);
        assert!(
            close(frontier[1].1, 1.7 + 6.0 + 27.0 / 300.0 - 1.9),
            "{frontier:?}"
        );
        assert_eq!(
            frontier.len(),
            2,
            "a third machine does not help: {frontier:?}"
        );
    }

    #[test]
    fn a_load_begun_at_the_rows_start_is_over_sooner() {
        let turns = [turn("[p0.1]", 2.0, 1_500, 100)];
        let frontier = worst_by_loads(&turns, &household(), 0, Start::Row);
        // moon's load is over 1 s after the turn is sent.
        assert!(close(frontier[0].1, 2.0), "{frontier:?}");
    }

    #[test]
    fn models_only_later_turns_use_count_as_loads() {
        let turns = [turn("[p0.1]", 0.0, 10, 10)];
        let frontier = worst_by_loads(&turns, &household(), 2, Start::Asked);
        assert_eq!(frontier[0].0, 3);
    }

    #[test]
    fn a_machine_never_holds_more_models_than_it_keeps() {
        let mut machines = household();
        machines[0].max_loaded = 0;
        let turns = [turn("[p0.1]", 0.0, 300, 10)];
        let frontier = worst_by_loads(&turns, &machines, 0, Start::Asked);
        // Not moon: ai-core, 6 s and 300 tokens at 300 a second.
        assert!(close(frontier[0].1, 7.0), "{frontier:?}");
    }

    #[test]
    fn the_verdict_weighs_the_bound_against_half_the_baseline() {
        let bounds = Bounds {
            min_loads: 3,
            first_turns: vec![turn("[p0.1]", 2.7, 27, 327)],
            worst_by_loads: vec![
                (3, Duration::from_secs_f64(11.8)),
                (4, Duration::from_secs_f64(7.0)),
            ],
            preloaded_by_loads: vec![(3, Duration::from_secs_f64(9.1))],
        };
        assert_eq!(bounds.worst(), Some(Duration::from_secs_f64(7.0)));
        assert_eq!(bounds.worst_within(2), None);
        let mut base = RowReport::new(RowKind::LeastBusy, Duration::ZERO, &[], Vec::new());
        base.user_turns = 18;
        base.ttft_p95 = Some(Duration::from_secs(22));
        base.loads = 6;
        let text = markdown(&bounds, Some(&base));
        assert!(
            text.contains("before anyone asked: at least 9.1 s with 3 loads"),
            "{text}"
        );
        assert!(
            text.contains(
                "both together: no: with at most 3 loads the first turns alone need 11.8 s"
            ),
            "{text}"
        );
        assert!(
            text.contains("least-busy's loads (3 or fewer): not ruled out"),
            "{text}"
        );
        assert!(
            text.contains("least-busy's p95 (11.0 s): not ruled out"),
            "{text}"
        );
        base.ttft_p95 = Some(Duration::from_secs(12));
        let text = markdown(&bounds, Some(&base));
        assert!(
            text.contains(
                "p95 (6.0 s): no: the first turns need at least 7.0 s however many loads"
            ),
            "{text}"
        );
        base.ttft_p95 = Some(Duration::from_secs(22));
        base.loads = 8;
        let text = markdown(&bounds, Some(&base));
        assert!(text.contains("together: not ruled out"), "{text}");
        base.loads = 5;
        let text = markdown(&bounds, Some(&base));
        assert!(
            text.contains("no placement loads 2 times or fewer"),
            "{text}"
        );
    }
}
