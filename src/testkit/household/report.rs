//! What a row measured, and the markdown the run prints: one line per row, then each
//! machine's own counts per row.

use std::collections::BTreeMap;
use std::fmt::Write as _;
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
        let generations: Vec<&Generation> = machines.iter().flat_map(|m| &m.2).collect();
        // What the machines generated for a user turn's prompt (retries included).
        let made = |marker: &str| -> u64 {
            generations
                .iter()
                .filter(|g| !g.template && g.last_user.ends_with(marker))
                .map(|g| u64::from(g.tokens))
                .sum()
        };
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

/// The run's header line, table, per-machine counts and error kinds, as markdown.
pub fn markdown(header: &str, rows: &[RowReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}\n");
    out.push_str(
        "| row | user turns | TTFT p50 s | TTFT p95 s | TTFT max s | total p95 s | loads | evictions \
         | template tokens | tokens for gone clients | truncated prompts | errors | length s |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |",
            r.kind,
            r.user_turns,
            seconds(r.ttft_p50),
            seconds(r.ttft_p95),
            seconds(r.ttft_max),
            seconds(r.total_p95),
            r.loads,
            r.evictions,
            r.template_tokens,
            r.tokens_for_gone,
            r.truncated_prompts,
            r.error_count(),
            r.length.as_secs_f64(),
        );
    }
    out.push_str("\nPer machine:\n\n");
    out.push_str(
        "| row | machine | requests | rejected | loads | evictions | reloads | expiries \
         | tokens generated | template tokens | cancelled | truncated | prompt tokens | cached \
         | deepest queue | no generation |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        for m in &r.machines {
            let s = &m.stats;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.kind,
                m.name,
                s.requests,
                s.rejected,
                s.loads,
                s.evictions,
                s.reloads,
                s.expiries,
                s.tokens_generated,
                s.template_tokens,
                s.cancelled,
                s.truncated_prompts,
                s.prompt_tokens,
                s.cached_prompt_tokens,
                s.deepest_queue,
                m.ungenerated,
            );
        }
    }
    for r in rows.iter().filter(|r| !r.miscounted.is_empty()) {
        let _ = writeln!(
            out,
            "\nCheck failed, {}: the machines' token counts differ from what the client \
             received for {}",
            r.kind,
            r.miscounted.join(", ")
        );
    }
    let failing: Vec<&RowReport> = rows.iter().filter(|r| r.error_count() > 0).collect();
    if !failing.is_empty() {
        out.push_str("\nErrors:\n");
        for r in failing {
            let kinds: Vec<String> = r.errors.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
            let _ = writeln!(out, "- {}: {}", r.kind, kinds.join(", "));
        }
    }
    out
}

fn seconds(d: Option<Duration>) -> String {
    d.map_or_else(|| "–".to_owned(), |d| format!("{:.1}", d.as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::household::session::TurnOutcome;

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
