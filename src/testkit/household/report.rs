//! What a row measured: the user turns' times, the machines' counts summed, the tokens
//! spent for clients that had gone, and every turn with the machine that answered it
//! ([`super::table`] prints them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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
    /// Tokens the machines generated for user turns after their client had left (pressed
    /// Stop or gave up), by the machines' and the clients' clocks ([`made_after`]).
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
            .filter_map(|t| Some((t.left_at?, &t.marker)))
            .map(|(left, marker)| {
                of(marker)
                    .map(|(_, g)| made_after(&g.token_times, left))
                    .sum::<u64>()
            })
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

/// How many of the tokens generated at `times` came after `left`, when their client had
/// gone: a token generated before it left but still on its way is not counted.
pub fn made_after(times: &[Instant], left: Instant) -> u64 {
    times.iter().filter(|t| **t > left).count() as u64
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

    /// The instant `ms` milliseconds after a fixed start, shared by clients and machines.
    fn at(ms: u64) -> Instant {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *START.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    fn turn(marker: &str, received: u32, stopped: bool, error: Option<&str>) -> TurnOutcome {
        TurnOutcome {
            marker: marker.to_owned(),
            ttft: Some(Duration::from_secs(1)),
            total: (!stopped && error.is_none()).then_some(Duration::from_secs(3)),
            received,
            stopped,
            error: error.map(str::to_owned),
            left_at: None,
        }
    }

    /// A turn whose client left at `left_ms`.
    fn left(marker: &str, received: u32, stopped: bool, left_ms: u64) -> TurnOutcome {
        let error = (!stopped).then_some("timeout");
        TurnOutcome {
            left_at: Some(at(left_ms)),
            ..turn(marker, received, stopped, error)
        }
    }

    /// A generation of `tokens` tokens, one a millisecond from `from_ms`.
    fn generated(last_user: &str, template: bool, tokens: u32, from_ms: u64) -> Generation {
        Generation {
            token_times: (0..u64::from(tokens)).map(|i| at(from_ms + i)).collect(),
            ..generation(last_user, template, tokens)
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
            token_times: Vec::new(),
        }
    }

    #[test]
    fn only_tokens_made_after_the_client_left_count_as_made_for_nobody() {
        let times: Vec<Instant> = [10, 20, 30, 40].map(at).to_vec();
        // In flight when it left (made at 10 and 20, not yet read): not counted.
        assert_eq!(made_after(&times, at(25)), 2);
        // Made at the very instant it left: it was made for a client still there.
        assert_eq!(made_after(&times, at(30)), 1);
        assert_eq!(made_after(&times, at(5)), 4);
        assert_eq!(made_after(&times, at(40)), 0);
        assert_eq!(made_after(&[], at(0)), 0);
    }

    #[test]
    fn tokens_for_gone_clients_count_what_their_turns_generations_made_after_they_left() {
        let session = Session {
            turns: vec![
                turn("[p0.1]", 200, false, None),
                // Stopped at 1,025 ms, having read 20 tokens.
                left("[p0.2]", 20, true, 1025),
                turn("[p0.3]", 0, false, Some("HTTP 503")),
                // Gave up waiting at 5,000 ms.
                left("[p0.4]", 0, false, 5000),
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
                    generated("hello [p0.1]", false, 200, 0),
                    // Tokens at 1,000 to 1,029 ms: 26 made while the client was there (6
                    // of them in flight when it left), 4 after it had gone.
                    generated("and? [p0.2]", false, 30, 1000),
                    // A template that quotes the stopped turn is not its generation.
                    generated("### Task: … [p0.2] …", true, 30, 1010),
                    // Started just before the client gave up: 2 tokens after.
                    generated("later [p0.4]", false, 5, 4998),
                ],
            ),
            (
                "b".to_owned(),
                SimStats {
                    loads: 2,
                    evictions: 1,
                    ..SimStats::default()
                },
                // A second try of the same prompt elsewhere counts too: 1 token after
                // 1,025 ms.
                vec![generated("and? [p0.2]", false, 4, 1023)],
            ),
        ];
        let r = RowReport::new(
            RowKind::Random,
            Duration::from_secs(9),
            &[session],
            machines,
        );
        // Not what was made less what was read (34 − 20 + 5 = 19).
        assert_eq!(r.tokens_for_gone, 4 + 1 + 2);
        assert_eq!((r.loads, r.evictions, r.template_tokens), (3, 1, 30));
        assert_eq!(r.user_turns, 4);
        assert_eq!(r.total_p95, Some(Duration::from_secs(3)));
        assert_eq!(r.errors.get("HTTP 503"), Some(&1));
        assert_eq!(r.errors.get("timeout"), Some(&1));
        assert!(r.miscounted.is_empty(), "{:?}", r.miscounted);
        let machines: Vec<Option<&str>> = r.turns.iter().map(|t| t.machine.as_deref()).collect();
        assert_eq!(machines, [Some("a"), Some("a"), None, Some("a")]);
        let turns = turn_markdown(std::slice::from_ref(&r));
        assert!(
            turns.contains(
                "| random | [p0.2] | a | m | 0.0 | 0.0 | 0.0 | 10 | 10 | no | 30 | 1.0 | – | stopped |"
            ),
            "{turns}"
        );
        assert!(turns.contains("| [p0.3] | – |"), "{turns}");
        let table = markdown("run", &[r]);
        assert!(
            table.contains("| random | 4 | 1.0 | 1.0 | 1.0 | 3.0 | 3 | 1 | 30 | 7 | 0 | 2 | 9 |"),
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
