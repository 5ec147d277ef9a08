//! Routing hot path: rules-only decisions on 5,000-character inputs (a user prompt, an
//! Open WebUI title template answered by rules, a pasted log). Target: p99 ≤ 50 µs.
//!
//! Besides criterion's estimates, `main` first times 20,000 single decisions per input and
//! prints p50/p99, since criterion reports means and medians, not tail percentiles.

// A benchmark has nothing to recover to: setup failures abort it.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::Instant;

use coordinator::chat::{ChatMessage, ResponseMode};
use coordinator::config::{HistoryConfig, InternalTasksConfig};
use coordinator::domain::{ModelName, WorkerName};
use coordinator::routing::{Catalog, CatalogEntry, Decider, RoutingConfig};
use coordinator::turn::{Turn, TurnInput, build_turn};
use criterion::{Criterion, criterion_group};

fn turn(prompt: String, stream: bool, max_tokens: Option<u32>) -> Turn {
    let mut input = TurnInput {
        messages: vec![ChatMessage::user(prompt)],
        model: Some("auto".into()),
        response: ResponseMode::from_stream(stream),
        ..TurnInput::default()
    };
    input.params.max_tokens = max_tokens;
    build_turn(input, &HistoryConfig::default()).expect("bench turn")
}

fn exactly(mut s: String, chars: usize) -> String {
    while s.chars().count() < chars {
        s = s.repeat(2);
    }
    s.chars().take(chars).collect()
}

fn inputs() -> Vec<(&'static str, Turn)> {
    let prose = "最近、自宅のクラスタで複数のマシンにLLMを分散させています。今日の作業メモを整理したいのですが、\
                 どう書けば読みやすいでしょうか。I also want to compare notes with last week and plan next steps. ";
    let user = exactly(prose.to_owned(), 4990) + "\n何から始める？";
    let history: String = (0..80)
        .map(|i| {
            if i % 2 == 0 {
                format!(
                    "USER: 柏市の天気と最新ニュースについて質問その{i}。コードの実装も気になる。\n"
                )
            } else {
                format!("ASSISTANT: 今日は晴れです。JSON API の error は直りました {i}。\n")
            }
        })
        .collect();
    let template = format!(
        "### Task:\nGenerate a concise 3-5 word title with an emoji summarizing the chat history.\n\
         ### Guidelines:\n- Today's date is 2026-11-29.\n### Output:\nJSON format: {{ \"title\": \"...\" }}\n\
         ### Chat History:\n<chat_history>\n{}\n</chat_history>",
        exactly(history, 4700)
    );
    let log = exactly(
        "2026-11-29 09:00:13 ERROR [sync] latest news feed fetch failed today: timeout\n"
            .to_owned(),
        4980,
    ) + "\nWhy?";
    vec![
        ("user_prompt_5k", turn(user, true, None)),
        ("title_template_5k", turn(template, false, Some(1000))),
        ("pasted_log_5k", turn(log, true, None)),
    ]
}

fn setup() -> (Decider, Catalog, tokio::runtime::Runtime) {
    let decider = Decider::new(RoutingConfig::default(), InternalTasksConfig::default());
    let entry = |m: &str| CatalogEntry {
        worker: WorkerName::parse("moon").expect("worker"),
        model: ModelName::parse(m).expect("model"),
        healthy: true,
        tools: None,
        resident: false,
    };
    let catalog = Catalog::new(vec![entry("chat"), entry("coder")]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    (decider, catalog, rt)
}

fn percentiles() {
    let (decider, catalog, rt) = setup();
    for (name, turn) in inputs() {
        let mut samples: Vec<u128> = (0..20_000)
            .map(|_| {
                let start = Instant::now();
                let d = rt.block_on(decider.decide(black_box(&turn), &catalog));
                black_box(d.expect("decision"));
                start.elapsed().as_nanos()
            })
            .collect();
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
        println!(
            "{name:<18} chars={:<5} p50={:>6.1}µs p99={:>6.1}µs max={:>7.1}µs",
            turn.prompt.chars().count(),
            at(0.50) as f64 / 1000.0,
            at(0.99) as f64 / 1000.0,
            at(1.0) as f64 / 1000.0,
        );
    }
}

fn decide(c: &mut Criterion) {
    let (decider, catalog, rt) = setup();
    let mut group = c.benchmark_group("route_decide");
    for (name, turn) in inputs() {
        group.bench_function(name, |b| {
            b.iter(|| rt.block_on(decider.decide(black_box(&turn), &catalog)))
        });
    }
    group.finish();
}

criterion_group!(benches, decide);

fn main() {
    percentiles();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
