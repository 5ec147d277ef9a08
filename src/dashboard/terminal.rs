//! `coordinator status [--watch]`: the dashboard's picture in a terminal, read from a
//! running service's `GET /dashboard/snapshot` (the same picture the page draws).
//! [`render`] is pure, so its output is pinned by a snapshot test; the watch loop
//! ([`Screen::watch`]) takes its ticks, its stop and where it draws as inputs, so a test
//! drives it frame by frame.

use std::fmt::Write;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};

use super::snapshot::Snapshot;

/// How many recent tasks the terminal shows.
const RECENT_SHOWN: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("cannot reach {url}: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    #[error("{url} needs an admin key: pass --key or set COORDINATOR_KEY")]
    NeedsKey { url: String },
    #[error("{url} refused the key: the dashboard needs an admin's")]
    NotAdmin { url: String },
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("{url} sent what is not a dashboard snapshot: {source}")]
    Malformed { url: String, source: reqwest::Error },
}

/// Reads the picture from the service at `base` (e.g. `http://127.0.0.1:8000`).
pub async fn fetch(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
) -> Result<Snapshot, StatusError> {
    let url = format!("{}/dashboard/snapshot", base.trim_end_matches('/'));
    let mut req = http.get(&url);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let res = req
        .send()
        .await
        .map_err(|source| StatusError::Unreachable {
            url: url.clone(),
            source,
        })?;
    match res.status().as_u16() {
        200 => res
            .json()
            .await
            .map_err(|source| StatusError::Malformed { url, source }),
        401 => Err(StatusError::NeedsKey { url }),
        403 => Err(StatusError::NotAdmin { url }),
        status => Err(StatusError::Status { url, status }),
    }
}

/// Prints the picture once, or (`watch`) every `every` until `stop` (Ctrl-C), each time
/// on a cleared screen.
pub async fn run(
    base: &str,
    key: Option<&str>,
    watch: Option<Duration>,
    stop: impl Future<Output = ()>,
) -> Result<(), StatusError> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|source| StatusError::Unreachable {
            url: base.to_owned(),
            source,
        })?;
    let Some(every) = watch else {
        print!("{}", frame(&fetch(&http, base, key).await?));
        return Ok(());
    };
    // The next frame `every` after the last one was drawn.
    let ticks = futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(every).await;
        Some(((), ()))
    });
    let screen = Screen { http, base, key };
    screen
        .watch(ticks, stop, |picture| print!("\x1b[2J\x1b[H{picture}"))
        .await
}

/// Where `coordinator status` reads the picture from.
#[derive(Debug, Clone)]
pub struct Screen<'a> {
    pub http: reqwest::Client,
    pub base: &'a str,
    pub key: Option<&'a str>,
}

impl Screen<'_> {
    /// `--watch`: draws the picture, then again at each of `ticks`, until `stop` resolves
    /// or the ticks end. Taking both as inputs is what lets a test drive it frame by
    /// frame. A service that cannot be reached is drawn as that error and asked again at
    /// the next tick; a key it refuses ends the loop with the error.
    pub async fn watch(
        &self,
        ticks: impl Stream<Item = ()>,
        stop: impl Future<Output = ()>,
        mut draw: impl FnMut(&str),
    ) -> Result<(), StatusError> {
        tokio::pin!(stop);
        tokio::pin!(ticks);
        loop {
            let fetched = tokio::select! {
                fetched = fetch(&self.http, self.base, self.key) => fetched,
                () = &mut stop => return Ok(()),
            };
            let picture = match fetched {
                Ok(s) => frame(&s),
                Err(e @ (StatusError::NeedsKey { .. } | StatusError::NotAdmin { .. })) => {
                    return Err(e);
                }
                Err(e) => format!("{e}\n"),
            };
            draw(&picture);
            tokio::select! {
                tick = ticks.next() => {
                    if tick.is_none() {
                        return Ok(());
                    }
                }
                () = &mut stop => return Ok(()),
            }
        }
    }
}

/// How long a resident model stays, as of `now`: "until 10:05 (in 5 min)" (UTC, as the
/// other times here), "kept" beyond a day (a model kept forever), "expiring" once due.
fn until(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let left = (at - now).num_seconds();
    match left {
        ..=0 => "expiring".to_owned(),
        1..60 => format!("until {} (in {left} s)", at.format("%H:%M")),
        60..=86_400 => format!("until {} (in {} min)", at.format("%H:%M"), (left + 59) / 60),
        _ => "kept".to_owned(),
    }
}

/// The picture as text, its waiting times and expiries as of when Coordinator took it:
/// this machine's clock may be set apart from Coordinator's (as of this machine's now for
/// an older Coordinator, which does not say).
pub fn frame(s: &Snapshot) -> String {
    render(s, s.taken_at.unwrap_or_else(Utc::now))
}

/// The picture as text, with waiting times as of `now`.
pub fn render(s: &Snapshot, now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "MACHINES");
    for m in &s.machines {
        let health = if m.healthy { "up" } else { "DOWN" };
        let _ = writeln!(
            out,
            "  {:<14} {:<6} {:<4} slots {}/{}",
            m.name, m.kind, health, m.in_flight, m.slots
        );
        for model in &m.models {
            let resident = if m.resident.contains(model) { "*" } else { " " };
            let until = m
                .expires_at
                .get(model)
                .map(|at| format!("  {}", until(*at, now)))
                .unwrap_or_default();
            let figures = m
                .latest
                .iter()
                .find(|f| &f.model == model)
                .map(|f| {
                    format!(
                        "  ttft {}  {} tok/s",
                        ms(f.ttft_ms),
                        f.tokens_per_s.map_or("-".to_owned(), |r| format!("{r:.1}"))
                    )
                })
                .unwrap_or_default();
            let _ = writeln!(out, "    {resident} {model}{until}{figures}");
        }
        if let Some(apart) = &m.clock_apart {
            let _ = writeln!(out, "    {apart}");
        }
        if let Some(e) = &m.last_error {
            let _ = writeln!(out, "    last error: {e}");
        }
    }
    let _ = writeln!(out, "\nQUEUE ({} waiting)", s.queued_total);
    if s.queue.is_empty() {
        let _ = writeln!(out, "  (empty)");
    }
    for w in &s.queue {
        let waited = (now - w.queued_at).num_seconds().max(0);
        let _ = writeln!(
            out,
            "  {:>3}  {:<24} {:<12} {:<11} waiting {:>4}s  eta {:>5}  {}",
            w.position.map_or("-".to_owned(), |p| p.to_string()),
            w.lane,
            w.person,
            w.priority,
            waited,
            w.eta_s.map_or("-".to_owned(), |e| format!("~{e}s")),
            w.prompt
        );
    }
    let _ = writeln!(out, "\nRECENT");
    for t in s.recent.iter().take(RECENT_SHOWN) {
        let _ = writeln!(
            out,
            "  {}  {:<9} {:<12} {:<16} {:<10} ttft {:>7}  total {:>7}  {}{}",
            t.created_at.format("%H:%M:%S"),
            t.status,
            t.person,
            t.model,
            t.machine.as_deref().unwrap_or("-"),
            ms(t.first_token_ms),
            ms(t.total_ms),
            t.prompt,
            t.note
                .as_ref()
                .map(|n| format!("  ({n})"))
                .unwrap_or_default()
        );
    }
    out
}

fn ms(v: Option<i64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v < 1000 => format!("{v}ms"),
        Some(v) => format!("{:.1}s", v as f64 / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::snapshot::{Machine, ModelFigures, RecentTask, Waiting, clock_apart};

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_terminal_picture_is_stable() {
        let snapshot = Snapshot {
            machines: vec![
                Machine {
                    name: "desk".into(),
                    kind: "ollama".into(),
                    healthy: true,
                    models: vec!["qwen3:8b".into(), "llama3.2:3b".into(), "phi4".into()],
                    resident: vec!["qwen3:8b".into(), "phi4".into()],
                    expires_at: [
                        ("qwen3:8b".into(), at("2026-12-02T10:04:12Z")),
                        ("phi4".into(), at("2318-01-01T00:00:00Z")),
                    ]
                    .into(),
                    in_flight: 1,
                    slots: 2,
                    last_error: None,
                    latest: vec![ModelFigures {
                        model: "qwen3:8b".into(),
                        ttft_ms: Some(420),
                        tokens_per_s: Some(38.5),
                    }],
                    // Within a second: not worth a line.
                    clock_ahead_ms: Some(400),
                    clock_apart: clock_apart(Some(400)),
                },
                Machine {
                    name: "laptop".into(),
                    kind: "openai".into(),
                    healthy: false,
                    models: vec![],
                    resident: vec![],
                    expires_at: Default::default(),
                    in_flight: 0,
                    slots: 1,
                    last_error: Some("cannot connect".into()),
                    latest: vec![],
                    clock_ahead_ms: Some(-30_000),
                    clock_apart: clock_apart(Some(-30_000)),
                },
            ],
            queue: vec![Waiting {
                task_id: "t2".into(),
                lane: "tasks:llm:qwen3:8b".into(),
                position: Some(1),
                eta_s: Some(7),
                person: "alice".into(),
                priority: "interactive".into(),
                model: "qwen3:8b".into(),
                queued_at: at("2026-12-02T10:00:00Z"),
                prompt: "and then a poem".into(),
            }],
            queued_total: 1,
            recent: vec![RecentTask {
                task_id: "t1".into(),
                created_at: at("2026-12-02T09:59:58Z"),
                person: "bob".into(),
                prompt: "wie wird das Wetter".into(),
                domain: "general".into(),
                lane: "tasks:web".into(),
                model: "qwen3:8b".into(),
                machine: Some("desk".into()),
                reasons: vec!["web: pos=wetter".into()],
                status: "done".into(),
                internal_task: None,
                first_token_ms: Some(1240),
                total_ms: Some(4000),
                note: Some("no results".into()),
            }],
            taken_at: Some(at("2026-12-02T10:00:12Z")),
            ..Snapshot::default()
        };
        let expected = "\
MACHINES
  desk           ollama up   slots 1/2
    * qwen3:8b  until 10:04 (in 4 min)  ttft 420ms  38.5 tok/s
      llama3.2:3b
    * phi4  kept
  laptop         openai DOWN slots 0/1
    clock 30.0 s behind Coordinator's
    last error: cannot connect

QUEUE (1 waiting)
    1  tasks:llm:qwen3:8b       alice        interactive waiting   12s  eta   ~7s  and then a poem

RECENT
  09:59:58  done      bob          qwen3:8b         desk       ttft    1.2s  total    4.0s  wie wird das Wetter  (no results)
";
        assert_eq!(render(&snapshot, at("2026-12-02T10:00:12Z")), expected);
        // What `coordinator status` prints reads the times as of when Coordinator took
        // the picture, whatever this machine's clock says (days later, here).
        assert_eq!(frame(&snapshot), expected);
    }

    #[test]
    fn a_resident_models_stay_reads_in_minutes_then_seconds() {
        let now = at("2026-12-02T10:00:00Z");
        let after = |s: i64| until(now + chrono::Duration::seconds(s), now);
        assert_eq!(after(300), "until 10:05 (in 5 min)");
        assert_eq!(after(61), "until 10:01 (in 2 min)");
        assert_eq!(after(42), "until 10:00 (in 42 s)");
        assert_eq!(after(0), "expiring");
        assert_eq!(after(-5), "expiring");
        assert_eq!(after(2 * 86_400), "kept");
    }
}
