//! The markdown the run prints: the header line, one line per row, each machine's own
//! counts per row, the checks and errors, and on request every user turn.

use std::fmt::Write as _;
use std::time::Duration;

use super::report::RowReport;

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
        "| row | machine | requests | rejected | loads | aborted loads | evictions | reloads | expiries \
         | tokens generated | template tokens | cancelled | truncated | prompt tokens | cached \
         | deepest queue | no generation |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        for m in &r.machines {
            let s = &m.stats;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.kind,
                m.name,
                s.requests,
                s.rejected,
                s.loads,
                s.aborted_loads,
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

/// Every user turn of every row: who answered, when it arrived there (life time since the
/// machine started), how long it waited (of that, loading), how much of its prompt was
/// evaluated, and what the client saw.
pub fn turn_markdown(rows: &[RowReport]) -> String {
    let mut out = String::from(
        "| row | turn | machine | model | arrived s | waited s | load s | prompt tokens \
         | evaluated | truncated | tokens | TTFT s | total s | end |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        for t in &r.turns {
            let g = t.generation.as_ref();
            let end = match (&t.error, t.stopped) {
                (Some(e), _) => e.clone(),
                (None, true) => "stopped".to_owned(),
                (None, false) => "done".to_owned(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {end} |",
                r.kind,
                t.marker,
                t.machine.as_deref().unwrap_or("–"),
                g.map_or("–", |g| g.model.as_str()),
                seconds(g.map(|g| g.arrived)),
                seconds(g.map(|g| g.waited)),
                seconds(g.map(|g| g.load)),
                g.map_or_else(|| "–".to_owned(), |g| g.prompt_tokens.to_string()),
                g.map_or_else(|| "–".to_owned(), |g| g.prompt_evaluated.to_string()),
                g.map_or("–", |g| if g.truncated { "yes" } else { "no" }),
                g.map_or_else(|| "–".to_owned(), |g| g.tokens.to_string()),
                seconds(t.ttft),
                seconds(t.total),
            );
        }
    }
    out
}

fn seconds(d: Option<Duration>) -> String {
    d.map_or_else(|| "–".to_owned(), |d| format!("{:.1}", d.as_secs_f64()))
}
