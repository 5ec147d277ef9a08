//! Routing eval: runs the router over a labelled JSONL file and reports accuracy for web
//! search, domain and internal-task detection, with every miss and its reasons.
//!
//! # Format
//! One JSON object per line (blank lines are skipped):
//!
//! ```json
//! {"id": "seed-weather", "prompt": "今日の柏市の天気は？", "web": true, "domain": "general", "internal": null}
//! ```
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `prompt` | string, required | the last user message, exactly as sent |
//! | `web` | bool, default `false` | expected `auto_web_search` |
//! | `domain` | string or null | expected domain; `null` = not scored (internal tasks) |
//! | `internal` | null or a task name (`title_generation`, ...) | expected internal task |
//! | `id` | string | a name shown in the miss list |
//! | `task_header` | string | the `X-OpenWebUI-Task` header value |
//! | `stream` | bool, default `true` | the request's `stream` (Open WebUI tasks send `false`) |
//! | `system` | string | a system message sent first |
//! | `max_tokens` | integer | the request's `max_tokens` |
//! | `messages` | `[{"role","content"}]` | earlier messages, between `system` and `prompt` |
//!
//! Web and internal accuracy count every case; domain accuracy counts cases with a
//! `domain` label. A route error counts as a miss on every field.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::chat::{ChatMessage, ResponseMode, Role};
use crate::config::HistoryConfig;
use crate::domain::{InternalTask, ModelName, WorkerName};
use crate::turn::{ClientContext, TurnInput, build_turn};

use super::text::clip_chars;
use super::{Catalog, CatalogEntry, Decider, RouteDecision};

/// One labelled prompt.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalCase {
    pub prompt: String,
    #[serde(default)]
    pub web: bool,
    #[serde(default)]
    pub domain: Option<String>,
    #[serde(default)]
    pub internal: Option<InternalTask>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub task_header: Option<String>,
    #[serde(default = "yes")]
    pub stream: bool,
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub messages: Vec<EvalMessage>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
pub struct EvalMessage {
    pub role: Role,
    pub content: String,
}

/// Correct answers out of scored cases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Score {
    pub correct: usize,
    pub total: usize,
}

impl Score {
    /// The share of correct answers, 1.0 when nothing was scored.
    pub fn accuracy(&self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            self.correct as f64 / self.total as f64
        }
    }

    fn add(&mut self, ok: bool) {
        self.total += 1;
        self.correct += usize::from(ok);
    }
}

/// One wrong field of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    pub line: usize,
    pub id: Option<String>,
    pub prompt: String,
    pub field: &'static str,
    pub expected: String,
    pub got: String,
    pub reasons: Vec<String>,
}

/// What an eval run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalReport {
    pub cases: usize,
    pub web: Score,
    pub domain: Score,
    pub internal: Score,
    /// User turns taken for internal tasks.
    pub internal_false_positives: usize,
    pub misses: Vec<Miss>,
}

/// The eval file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("line {line}: {message}")]
    Case { line: usize, message: String },
}

/// Parses JSONL text into (line number, case) pairs.
pub fn parse_cases(text: &str) -> Result<Vec<(usize, EvalCase)>, EvalError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: EvalCase = serde_json::from_str(line).map_err(|e| EvalError::Case {
            line: i + 1,
            message: e.to_string(),
        })?;
        out.push((i + 1, case));
    }
    Ok(out)
}

/// Runs the router over the JSONL file at `path`, with a catalog that serves every model
/// the routing config names (see [`eval_catalog`]).
pub async fn run_file(path: &Path, decider: &Decider) -> Result<EvalReport, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let cases = parse_cases(&text)?;
    run_cases(decider, &eval_catalog(decider), &cases).await
}

/// A catalog that serves `eval-model` and every model the router's config names.
pub fn eval_catalog(decider: &Decider) -> Catalog {
    let c = decider.config();
    let named = c
        .domains
        .values()
        .filter_map(|d| d.model.as_deref())
        .chain(c.default_model.as_deref());
    let mut entries = Vec::new();
    for m in std::iter::once("eval-model").chain(named) {
        if let (Ok(model), Ok(worker)) = (ModelName::parse(m), WorkerName::parse("eval")) {
            entries.push(CatalogEntry {
                worker,
                model,
                healthy: true,
                tools: None,
                resident: false,
            });
        }
    }
    Catalog::new(entries)
}

/// Runs the router over parsed cases.
pub async fn run_cases(
    decider: &Decider,
    catalog: &Catalog,
    cases: &[(usize, EvalCase)],
) -> Result<EvalReport, EvalError> {
    let mut report = EvalReport {
        cases: cases.len(),
        ..EvalReport::default()
    };
    for (line, case) in cases {
        let turn = build_turn(turn_input(case), &HistoryConfig::default()).map_err(|e| {
            EvalError::Case {
                line: *line,
                message: e.to_string(),
            }
        })?;
        let miss = |field, expected: String, got: String, reasons: &[String]| Miss {
            line: *line,
            id: case.id.clone(),
            prompt: clip_chars(&case.prompt.replace('\n', " "), 80).to_owned(),
            field,
            expected,
            got,
            reasons: reasons.to_vec(),
        };
        let d: RouteDecision = match decider.decide(&turn, catalog).await {
            Ok(d) => d,
            Err(e) => {
                report.web.add(false);
                report.internal.add(false);
                if case.domain.is_some() {
                    report.domain.add(false);
                }
                report
                    .misses
                    .push(miss("route", "a decision".into(), e.to_string(), &[]));
                continue;
            }
        };
        report.web.add(d.web_search() == case.web);
        if d.web_search() != case.web {
            let m = miss(
                "web",
                case.web.to_string(),
                d.web_search().to_string(),
                &d.reasons,
            );
            report.misses.push(m);
        }
        if let Some(expected) = &case.domain {
            report.domain.add(d.domain.as_str() == expected);
            if d.domain.as_str() != expected {
                let m = miss("domain", expected.clone(), d.domain.to_string(), &d.reasons);
                report.misses.push(m);
            }
        }
        report.internal.add(d.internal_task == case.internal);
        if d.internal_task != case.internal {
            if case.internal.is_none() {
                report.internal_false_positives += 1;
            }
            let show = |t: Option<InternalTask>| t.map_or("none".to_owned(), |t| t.to_string());
            let m = miss(
                "internal",
                show(case.internal),
                show(d.internal_task),
                &d.reasons,
            );
            report.misses.push(m);
        }
    }
    Ok(report)
}

fn turn_input(case: &EvalCase) -> TurnInput {
    let mut messages: Vec<ChatMessage> = case.system.iter().map(ChatMessage::system).collect();
    messages.extend(
        case.messages
            .iter()
            .map(|m| ChatMessage::new(m.role, m.content.clone())),
    );
    messages.push(ChatMessage::user(case.prompt.clone()));
    let mut input = TurnInput {
        messages,
        model: Some("auto".to_owned()),
        response: ResponseMode::from_stream(case.stream),
        client: ClientContext {
            task_header: case.task_header.clone(),
            client_identity: Some("eval".to_owned()),
            ..ClientContext::default()
        },
        ..TurnInput::default()
    };
    input.params.max_tokens = case.max_tokens;
    input
}

impl fmt::Display for EvalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = |name: &str, s: Score| {
            format!(
                "{name:<9} {:>6.2}%  ({}/{})",
                s.accuracy() * 100.0,
                s.correct,
                s.total
            )
        };
        writeln!(f, "routing eval: {} cases", self.cases)?;
        writeln!(f, "{}", line("web", self.web))?;
        writeln!(f, "{}", line("domain", self.domain))?;
        writeln!(f, "{}", line("internal", self.internal))?;
        writeln!(
            f,
            "internal false positives: {}",
            self.internal_false_positives
        )?;
        if self.misses.is_empty() {
            return writeln!(f, "no misses");
        }
        writeln!(f, "misses ({}):", self.misses.len())?;
        for m in &self.misses {
            let id = m.id.as_deref().unwrap_or("-");
            writeln!(
                f,
                "  line {} [{id}] {}: expected {}, got {}  {:?}",
                m.line, m.field, m.expected, m.got, m.prompt
            )?;
            for r in &m.reasons {
                writeln!(f, "      {r}")?;
            }
        }
        Ok(())
    }
}
