//! The RAG lane's documents over 10,000 chunks: ingest (chunking, the built-in embedder,
//! SQLite FTS5 writes) and hybrid retrieval (full-text + vectors, RRF) on the same store.
//! Ingest is a one-off (printed); queries are measured by criterion and, for the tail,
//! by 1,000 timed queries whose p50/p99 are printed.

// A benchmark has nothing to recover to: setup failures abort it.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordinator::docs::ingest::{Kind, Source, ingest_source};
use coordinator::docs::retrieve::Retriever;
use coordinator::docs::store::DocStore;
use coordinator::docs::store::sqlite::SqliteDocStore;
use coordinator::docs::{Collection, DocsConfig};
use coordinator::store::sqlite::SqliteStore;
use criterion::{Criterion, criterion_group, criterion_main};

const DOCUMENTS: usize = 1000;
const SECTIONS: usize = 10;

const EN: &[&str] = &[
    "backup",
    "router",
    "printer",
    "schedule",
    "disk",
    "network",
    "garden",
    "tyres",
    "insurance",
    "recipe",
    "heating",
    "boiler",
    "solar",
    "battery",
    "camera",
    "door",
    "window",
    "school",
    "doctor",
    "holiday",
    "train",
    "budget",
    "invoice",
    "password",
    "firmware",
    "update",
];
const JA: &[&str] = &[
    "猫",
    "ごはん",
    "病院",
    "予約",
    "台所",
    "掃除",
    "洗濯",
    "ゴミ",
    "点検",
    "電気",
    "水道",
    "保険",
    "学校",
    "旅行",
    "予算",
    "設定",
    "パスワード",
    "バックアップ",
    "ディスク",
    "毎週",
];

/// A deterministic document of `SECTIONS` sections, each one chunk (~500 characters).
fn document(n: usize) -> String {
    let mut out = format!("# Note {n}\n\n");
    for s in 0..SECTIONS {
        out.push_str(&format!("## Section {s} of {n}\n\n"));
        let mut para = String::new();
        for w in 0..70 {
            let i = (n * 31 + s * 17 + w * 7) % 97;
            if (n + s) % 3 == 0 {
                para.push_str(JA[i % JA.len()]);
                para.push_str(if w % 9 == 8 { "。" } else { "の" });
            } else {
                para.push_str(EN[i % EN.len()]);
                para.push_str(if w % 9 == 8 { ". " } else { " " });
            }
        }
        out.push_str(&para);
        out.push_str("\n\n");
    }
    out
}

async fn ingest_all(store: &dyn DocStore, config: &DocsConfig) -> usize {
    let notes = Collection::parse("bench").expect("collection");
    let mut chunks = 0;
    for n in 0..DOCUMENTS {
        let source = Source {
            path: format!("/bench/note-{n}.md"),
            display: format!("note-{n}.md"),
            kind: Kind::Markdown,
            content: document(n),
        };
        chunks += ingest_source(store, config, &notes, &source, None)
            .await
            .expect("ingest")
            .1;
    }
    chunks
}

const QUERIES: &[&str] = &[
    "when does the backup of the disk run",
    "printer firmware update",
    "猫の病院の予約",
    "ゴミの点検は毎週?",
    "boiler heating schedule",
    "quantum chromodynamics",
];

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = DocsConfig::default();
    let store: Arc<dyn DocStore> = rt.block_on(async {
        let tasks = SqliteStore::open(&dir.path().join("docs.db"))
            .await
            .expect("store");
        Arc::new(SqliteDocStore::new(tasks.pool().clone()))
    });
    let started = Instant::now();
    let chunks = rt.block_on(ingest_all(store.as_ref(), &config));
    eprintln!("ingest: {chunks} chunks in {:.2?}", started.elapsed());
    let retriever = Retriever::new(store);
    // The first search loads the vectors; later ones only check the generation.
    rt.block_on(retriever.search(None, "warm up", 5, config.min_score))
        .expect("search");
    let mut times: Vec<Duration> = Vec::new();
    for i in 0..1000 {
        let q = QUERIES[i % QUERIES.len()];
        let t = Instant::now();
        let hits = rt
            .block_on(retriever.search(None, q, 5, config.min_score))
            .expect("search");
        times.push(t.elapsed());
        black_box(hits);
    }
    times.sort();
    eprintln!(
        "query over {chunks} chunks: p50 {:.2?}  p99 {:.2?}  max {:.2?}",
        times[times.len() / 2],
        times[times.len() * 99 / 100],
        times[times.len() - 1]
    );
    c.bench_function("docs_query_10k_chunks", |b| {
        let mut i = 0;
        b.to_async(&rt).iter(|| {
            i += 1;
            let q = QUERIES[i % QUERIES.len()];
            let r = retriever.clone();
            async move { black_box(r.search(None, q, 5, 0.18).await.expect("search")) }
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
