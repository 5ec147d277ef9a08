//! What a row measured: the user turns' times, the machines' counts summed, the tokens
//! spent for clients that had gone, and every turn with the machine that answered it
//! ([`super::table`] prints them).

use std::collections::BTreeMap;
use std::time::Duration;

use super::route::RowKind;
use super::session::Session;
use crate::testkit::fake_llm::{Generation, SimStats};

/// The nearest-rank percentile `p` (0–100) of `values`; `None` when there are none.
pub fn percentile(values: &[Duration], p: f64) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

/// One row's results.
#[derive(Debug, Clone, PartialEq)]
pub struct RowReport {
    pub kind: RowKind,
    /// Life time from the first turn's start to the last request's end.
    pub length: Duration,
    pub user_turns: usize,
    pub ttft_p50: Option<Duration>,
    pub ttft_p95: Option<Duration>,
    pub ttft_max: Option<Duration>,
    pub total_p95: Option<Duration>,
    pub loads: u64,
    pub evictions: u64,
    pub template_tokens: u64,
    /// Tokens the machines generated for stopped turns after the client had left.
    pub tokens_for_gone: u64,
    pub truncated_prompts: u64,
    /// A check of the instrument: answered turns whose machines' token count differs from
    /// the tokens the client received (their markers).
    pub miscounted: Vec<String>,
    /// Failed requests (user turns and background tasks), by what went wrong.
    pub errors: BTreeMap<String, usize>,
    pub machines: Vec<MachineReport>,
    /// Every user turn, in the plan's order.
    pub turns: Vec<TurnDetail>,
}

/// One user turn: what the client saw, and what the machine that generated its answer
/// recorded (the first machine that did, when it was tried more than once).
#[derive(Debug, Clone, PartialEq)]
pub struct TurnDetail {
    pub marker: String,
    pub ttft: Option<Duration>,
    pub total: Option<Duration>,
    pub stopped: bool,
    pub error: Option<String>,
    pub machine: Option<String>,
    pub generation: Option<Generation>,
}

/// One machine's counts in a row.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineReport {
    pub name: String,
    pub stats: SimStats,
    /// Admitted requests without a recorded generation: their clients left while they
    /// were still waiting (or the machine had not finished them when the row ended).
    pub ungenerated: u64,
}

impl RowReport {
    /// Sums up a row from what the sessions saw and what each machine recorded.
    pub fn new(
        kind: RowKind,
        length: Duration,
        sessions: &[Session],
        machines: Vec<(String, SimStats, Vec<Generation>)>,
    ) -> Self {
        let turns: Vec<_> = sessions.iter().flat_map(|s| &s.turns).collect();
        let ttfts: Vec<Duration> = turns.iter().filter_map(|t| t.ttft).collect();
        let totals: Vec<Duration> = turns.iter().filter_map(|t| t.total).collect();
        let mut errors = BTreeMap::new();
        let failures = turns.iter().filter_map(|t| t.error.as_deref()).chain(
            sessions
                .iter()
                .flat_map(|s| &s.tasks)
                .filter_map(|t| t.error.as_deref()),
        );
        for error in failures {
            *errors.entry(error_kind(error)).or_default() += 1;
        }
        let generations: Vec<(&str, &Generation)> = machines
            .iter()
            .flat_map(|(name, _, gs)| gs.iter().map(move |g| (name.as_str(), g)))
            .filter(|(_, g)| !g.template)
            .collect();
        let of = |marker: &str| {
            let marker = marker.to_owned();
            generations
                .iter()
                .filter(move |(_, g)| g.last_user.ends_with(&marker))
        };
        // What the machines generated for a user turn's prompt (retries included).
        let made = |marker: &str| -> u64 { of(marker).map(|(_, g)| u64::from(g.tokens)).sum() };
        let details = turns
            .iter()
            .map(|t| {
                let first = of(&t.marker).next();
                TurnDetail {
                    marker: t.marker.clone(),
                    ttft: t.ttft,
                    total: t.total,
                    stopped: t.stopped,
                    error: t.error.clone(),
                    machine: first.map(|(m, _)| (*m).to_owned()),
                    generation: first.map(|(_, g)| (*g).clone()),
                }
            })
            .collect();
        let tokens_for_gone = turns
            .iter()
            .filter(|t| t.stopped)
            .map(|t| made(&t.marker).saturating_sub(u64::from(t.received)))
            .sum();
        let miscounted = turns
            .iter()
            .filter(|t| t.total.is_some() && made(&t.marker) != u64::from(t.received))
            .map(|t| t.marker.clone())
            .collect();
        let sum = |f: fn(&SimStats) -> u64| machines.iter().map(|m| f(&m.1)).sum();
        Self {
            kind,
            length,
            user_turns: turns.len(),
            ttft_p50: percentile(&ttfts, 50.0),
            ttft_p95: percentile(&ttfts, 95.0),
            ttft_max: ttfts.iter().max().copied(),
            total_p95: percentile(&totals, 95.0),
            loads: sum(|s| s.loads),
            evictions: sum(|s| s.evictions),
            template_tokens: sum(|s| s.template_tokens),
            tokens_for_gone,
            truncated_prompts: sum(|s| s.truncated_prompts),
            miscounted,
            errors,
            machines: machines
                .into_iter()
                .map(|(name, stats, generations)| MachineReport {
                    ungenerated: stats.requests.saturating_sub(generations.len() as u64),
                    name,
                    stats,
                })
                .collect(),
            turns: details,
        }
    }

    pub fn error_count(&self) -> usize {
        self.errors.values().sum()
    }
}

/// `HTTP 503`, `timeout`, `stream error`, …: the part of a message before any detail.
fn error_kind(error: &str) -> String {
    error
        .split([':', '('])
        .next()
        .unwrap_or(error)
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::household::session::TurnOutcome;
    use crate::testkit::household::table::{markdown, turn_markdown};

    fn secs(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&s| Duration::from_secs(s)).collect()
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let ten = secs(&[10, 1, 9, 2, 8, 3, 7, 4, 6, 5]);
        assert_eq!(percentile(&ten, 50.0), Some(Duration::from_secs(5)));
        assert_eq!(percentile(&ten, 95.0), Some(Duration::from_secs(10)));
        assert_eq!(percentile(&ten, 90.0), Some(Duration::from_secs(9)));
        assert_eq!(percentile(&ten, 0.0), Some(Duration::from_secs(1)));
        assert_eq!(percentile(&secs(&[4]), 95.0), Some(Duration::from_secs(4)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    fn turn(marker: &str, received: u32, stopped: bool, error: Option<&str>) -> TurnOutcome {
        TurnOutcome {
            marker: marker.to_owned(),
            ttft: Some(Duration::from_secs(1)),
            total: (!stopped && error.is_none()).then_some(Duration::from_secs(3)),
            received,
            stopped,
            error: error.map(str::to_owned),
        }
    }

    fn generation(last_user: &str, template: bool, tokens: u32) -> Generation {
        Generation {
            model: "m".to_owned(),
            last_user: last_user.to_owned(),
            template,
            prompt_tokens: 10,
            prompt_evaluated: 10,
            truncated: false,
            tokens,
            cancelled: false,
            waited: Duration::ZERO,
            load: Duration::ZERO,
            arrived: Duration::ZERO,
        }
    }

    #[test]
    fn tokens_for_gone_clients_count_only_the_stopped_turns_own_generations() {
        let session = Session {
            turns: vec![
                turn("[p0.1]", 200, false, None),
                turn("[p0.2]", 20, true, None),
                turn("[p0.3]", 0, false, Some("HTTP 503")),
            ],
            tasks: vec![],
        };
        let machines = vec![
            (
                "a".to_owned(),
                SimStats {
                    loads: 1,
                    template_tokens: 30,
                    ..SimStats::default()
                },
                vec![
                    generation("hello [p0.1]", false, 200),
                    // Stopped after 20 tokens; the machine made 26 before it noticed.
                    generation("and? [p0.2]", false, 26),
                    // A template that quotes the stopped turn is not its generation.
                    generation("### Task: … [p0.2] …", true, 30),
                ],
            ),
            (
                "b".to_owned(),
                SimStats {
                    loads: 2,
                    evictions: 1,
                    ..SimStats::default()
                },
                // A second try of the same prompt elsewhere counts too.
                vec![generation("and? [p0.2]", false, 4)],
            ),
        ];
        let r = RowReport::new(
            RowKind::Random,
            Duration::from_secs(9),
            &[session],
            machines,
        );
        assert_eq!(r.tokens_for_gone, 10);
        assert_eq!((r.loads, r.evictions, r.template_tokens), (3, 1, 30));
        assert_eq!(r.user_turns, 3);
        assert_eq!(r.total_p95, Some(Duration::from_secs(3)));
        assert_eq!(r.errors.get("HTTP 503"), Some(&1));
        assert!(r.miscounted.is_empty(), "{:?}", r.miscounted);
        let machines: Vec<Option<&str>> = r.turns.iter().map(|t| t.machine.as_deref()).collect();
        assert_eq!(machines, [Some("a"), Some("a"), None]);
        let turns = turn_markdown(std::slice::from_ref(&r));
        assert!(
            turns.contains(
                "| random | [p0.2] | a | m | 0.0 | 0.0 | 0.0 | 10 | 10 | no | 26 | 1.0 | – | stopped |"
            ),
            "{turns}"
        );
        assert!(turns.contains("| [p0.3] | – |"), "{turns}");
        let table = markdown("run", &[r]);
        assert!(
            table.contains("| random | 3 | 1.0 | 1.0 | 1.0 | 3.0 | 3 | 1 | 30 | 10 | 0 | 1 | 9 |"),
            "{table}"
        );
        assert!(!table.contains("Check failed"), "{table}");
    }

    #[test]
    fn an_answered_turn_whose_counts_differ_fails_the_check() {
        let session = Session {
            turns: vec![turn("[p1.1]", 180, false, None)],
            tasks: vec![],
        };
        let machines = vec![(
            "a".to_owned(),
            SimStats {
                requests: 2,
                ..SimStats::default()
            },
            vec![generation("hi [p1.1]", false, 181)],
        )];
        let r = RowReport::new(RowKind::Coordinator, Duration::ZERO, &[session], machines);
        assert_eq!(r.miscounted, ["[p1.1]"]);
        assert_eq!(r.machines[0].ungenerated, 1);
        assert!(markdown("run", &[r]).contains("Check failed, coordinator: "));
    }
}
