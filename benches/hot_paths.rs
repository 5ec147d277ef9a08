//! Hot paths of one chat request, each on its own: turn extraction from a long chat
//! (`build_turn` on 50 messages), the OpenAI request body parsed into a turn input, SSE
//! encoding of a 32-token answer (`SseEncoder`), and the SQLite task lifecycle (insert →
//! claim → finish) for 64 tasks at once, as the workers of a busy `serve` do it, and
//! placement's choice among a household's three machines (`placement::best_of`), for a
//! model they have run and for one none has.
//!
//! The routing decision has its own bench (`benches/routing.rs`). The whole request, over
//! HTTP and against the fake LLM, is measured by `scripts/bench.sh`.

// A benchmark has nothing to recover to: setup failures abort it.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use chrono::Utc;
use coordinator::api::openai::{ChatCompletionRequest, CompletionMeta, SseEncoder, parse_body};
use coordinator::backend::activity::Running;
use coordinator::backend::perf::ModelPerf;
use coordinator::backend::registry::{ModelSize, WorkerStatus};
use coordinator::chat::{ChatMessage, Chunk, FinishReason, ResponseMode, Usage};
use coordinator::config::{BackendKind, HistoryConfig};
use coordinator::domain::{ModelName, TaskId, WorkerName};
use coordinator::placement::{Ask, best_of};
use coordinator::store::sqlite::SqliteStore;
use coordinator::store::{NewTask, TaskOutcome, TaskStore};
use coordinator::turn::{ClientContext, TurnInput, build_turn};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

/// A 50-message chat: a system prompt, then 49 alternating user/assistant messages of a
/// few hundred characters each, ending with the user's question.
fn long_chat() -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::system(
        "You are a helpful assistant for a home lab. Answer briefly.",
    )];
    for i in 0..49 {
        let text = format!(
            "Message {i}: 自宅のクラスタで複数のマシンにLLMを分散させています。 \
             The build on the mini PC failed again with a linker error; here is the log \
             excerpt and what I tried so far, step by step, including the flags. {}",
            "More detail. ".repeat(10)
        );
        messages.push(if i % 2 == 0 {
            ChatMessage::user(text)
        } else {
            ChatMessage::assistant(text)
        });
    }
    messages
}

fn turn_extraction(c: &mut Criterion) {
    let history = HistoryConfig::default();
    let input = TurnInput {
        messages: long_chat(),
        model: Some("qwen2.5:7b".into()),
        response: ResponseMode::Streamed,
        client: ClientContext {
            chat_id_header: Some("7f1c1a52-2d4e-4f7e-9a51-0c1f5e2b9d10".into()),
            ..ClientContext::default()
        },
        ..TurnInput::default()
    };
    assert_eq!(input.messages.len(), 50);
    c.bench_function("build_turn_50_messages", |b| {
        b.iter_batched(
            || input.clone(),
            |input| build_turn(black_box(input), &history).expect("turn"),
            BatchSize::SmallInput,
        )
    });
}

/// The body `scripts/bench.sh` sends: two messages, a concrete model.
const BENCH_BODY: &[u8] = br#"{"model":"qwen2.5:7b","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about routing requests across a home cluster."}],"stream":false}"#;

fn request_parsing(c: &mut Criterion) {
    c.bench_function("parse_chat_request_to_turn", |b| {
        b.iter(|| {
            let req: ChatCompletionRequest = parse_body(black_box(BENCH_BODY)).expect("body");
            let parsed = req
                .into_turn_input(ClientContext::default())
                .expect("turn input");
            build_turn(parsed.input, &HistoryConfig::default()).expect("turn")
        })
    });
}

fn sse_encoding(c: &mut Criterion) {
    let tokens: Vec<Chunk> = (0..32)
        .map(|i| Chunk::Content {
            text: format!("tok{i} "),
        })
        .chain(std::iter::once(Chunk::Done {
            finish_reason: FinishReason::Stop,
            usage: Usage {
                prompt_tokens: 24,
                completion_tokens: 32,
                backend_total_ms: None,
                backend_timings: None,
            },
        }))
        .collect();
    let meta = CompletionMeta::new(TaskId::new(), 1_735_689_600, "qwen2.5:7b");
    c.bench_function("sse_encode_32_tokens", |b| {
        let mut out = Vec::with_capacity(16 * 1024);
        b.iter(|| {
            out.clear();
            let mut encoder = SseEncoder::new(meta.clone(), true);
            for chunk in &tokens {
                encoder.push(black_box(chunk), &mut out);
            }
            black_box(out.len())
        })
    });
}

fn new_task() -> NewTask {
    coordinator::testkit::samples::sample_task(
        "Write a haiku about routing requests across a home cluster.",
    )
}

fn done_outcome() -> TaskOutcome {
    let mut o = TaskOutcome::done(Utc::now());
    o.worker_id = Some(WorkerName::parse("bench").expect("worker"));
    o.response = Some("tok ".repeat(32));
    o.total_ms = Some(1);
    o
}

/// Tasks through insert → claim → finish: 64 concurrently, as 64 in-flight requests do,
/// and one at a time.
fn store_lifecycle(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn TaskStore> = Arc::new(
        rt.block_on(SqliteStore::open(&dir.path().join("bench.db")))
            .expect("store"),
    );
    let worker = WorkerName::parse("bench").expect("worker");
    c.bench_function("sqlite_lifecycle_64_concurrent", |b| {
        b.iter(|| {
            rt.block_on(async {
                let runs: Vec<_> = (0..64)
                    .map(|_| {
                        let (store, worker) = (store.clone(), worker.clone());
                        tokio::spawn(async move { lifecycle(store.as_ref(), &worker).await })
                    })
                    .collect();
                for r in runs {
                    assert!(r.await.expect("join"));
                }
            })
        })
    });
    // One task at a time, as at c=1: every write is a transaction of its own, so this
    // is what each write costs (its statement and its commit), with nothing to share.
    c.bench_function("sqlite_lifecycle_one_task", |b| {
        b.iter(|| rt.block_on(async { assert!(lifecycle(store.as_ref(), &worker).await) }))
    });
}

/// One new task inserted, claimed by `worker` and finished, each write awaited until it
/// is durable; whether the finish found the task running.
async fn lifecycle(store: &dyn TaskStore, worker: &WorkerName) -> bool {
    let t = new_task();
    store
        .insert(t.clone())
        .await
        .expect("insert")
        .await
        .expect("insert");
    store
        .claim(t.task_id, worker, Utc::now())
        .await
        .expect("claim");
    store
        .finish(t.task_id, &done_outcome())
        .await
        .expect("finish")
        .await
        .expect("finish")
}

/// The household's three machines a minute in: moon runs the chat and the coder (one
/// answer of the chat model running), ai-core has run the chat model, the laptop has shown
/// only a load. The small model has run nowhere.
fn household_fleet() -> Vec<WorkerStatus> {
    let model = |m: &str| ModelName::parse(m).expect("model");
    let perf = |m: &str, load: f64, prompt: Option<f64>, eval: Option<f64>| {
        let mut p = ModelPerf::new(model(m));
        p.load_s = Some(load);
        p.prompt_tps = prompt;
        p.eval_tps = eval;
        p.answer_tokens = eval.map(|_| 300.0);
        p.samples = u64::from(eval.is_some());
        p
    };
    let machine =
        |name: &str, models: &[&str], loaded: &[&str], perf: Vec<ModelPerf>| WorkerStatus {
            name: WorkerName::parse(name).expect("worker"),
            kind: BackendKind::Ollama,
            url: String::new(),
            models: models.iter().map(|m| model(m)).collect(),
            loaded: loaded.iter().map(|m| model(m)).collect(),
            healthy: true,
            in_flight: 0,
            parallel: 1,
            last_error: None,
            perf,
            running: vec![],
            recent: vec![],
            max_loaded: Some(2),
            max_num_ctx: None,
            windows: vec![],
            resident: vec![],
            // As Ollama's `/api/tags` reports them: a 7B and a 3B model at 4-bit.
            sizes: models
                .iter()
                .map(|m| ModelSize {
                    model: model(m),
                    bytes: if *m == "small" {
                        2_000_000_000
                    } else {
                        4_700_000_000
                    },
                })
                .collect(),
            server_keep_alive_s: None,
            clock_ahead_ms: None,
        };
    let now = Utc::now();
    let mut moon = machine(
        "moon",
        &["chat", "coder", "small"],
        &["chat", "coder"],
        vec![
            perf("chat", 3.0, Some(1500.0), Some(80.0)),
            perf("coder", 3.0, Some(1500.0), Some(80.0)),
        ],
    );
    moon.in_flight = 1;
    moon.running = vec![Running {
        model: model("chat"),
        started_at: now - chrono::Duration::seconds(2),
        first_token_at: Some(now - chrono::Duration::seconds(1)),
        tokens: 80,
        prompt_tokens: 900,
        cold: false,
        cached: false,
        priority: Default::default(),
    }];
    vec![
        moon,
        machine(
            "ai-core",
            &["chat", "small"],
            &["chat"],
            vec![perf("chat", 6.0, Some(300.0), Some(27.0))],
        ),
        machine(
            "laptop",
            &["chat", "small"],
            &[],
            vec![perf("chat", 10.0, None, None)],
        ),
    ]
}

/// One placement among the household's machines: a chat turn (a model every machine has
/// figures for, or only a load) and a turn of a model none has run (the fleet's prior).
fn placement(c: &mut Criterion) {
    let fleet = household_fleet();
    let chat = ModelName::parse("chat").expect("model");
    let small = ModelName::parse("small").expect("model");
    c.bench_function("placement_household_chat", |b| {
        b.iter(|| best_of(black_box(&fleet), &Ask::fresh(&chat, black_box(1790))))
    });
    c.bench_function("placement_household_model_nobody_ran", |b| {
        b.iter(|| best_of(black_box(&fleet), &Ask::fresh(&small, black_box(1045))))
    });
}

criterion_group!(
    benches,
    turn_extraction,
    request_parsing,
    sse_encoding,
    store_lifecycle,
    placement
);
criterion_main!(benches);
