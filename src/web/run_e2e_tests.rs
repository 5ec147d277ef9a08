//! End-to-end tests of [`web_stream`] against the fake SearXNG and a tiny Ollama
//! `/api/chat` stub (ignored until the real Ollama client is merged).

use std::sync::Mutex;

use super::tests::{
    JA_DISCLAIMER_START, backend_at, collect, content, ctx, kashiwa_results, seed_request,
};
use super::*;
use crate::testkit::fake_searxng::{FakeMode, FakeSearxng};

/// A few lines of Ollama `/api/chat`: two content chunks and a final record; it keeps
/// every request body it receives.
async fn ollama_stub() -> (
    String,
    Arc<Mutex<Vec<serde_json::Value>>>,
    tokio::task::JoinHandle<()>,
) {
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let seen = bodies.clone();
    let app = axum::Router::new().route(
        "/api/chat",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(body);
                let lines = [
                    r#"{"model":"m","created_at":"2026-07-01T00:00:00Z","message":{"role":"assistant","content":"柏市の特産物は"},"done":false}"#,
                    r#"{"model":"m","created_at":"2026-07-01T00:00:00Z","message":{"role":"assistant","content":"かぶとねぎです [1]。"},"done":false}"#,
                    r#"{"model":"m","created_at":"2026-07-01T00:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":1000000,"prompt_eval_count":50,"eval_count":8,"eval_duration":500000}"#,
                ];
                ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], lines.join("\n") + "\n")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, bodies, server)
}

fn text_of(chunks: &[Chunk]) -> String {
    chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::Content { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn end_to_end_web_answer_with_sources() {
    let fake = FakeSearxng::start().await.unwrap();
    fake.set_mode(FakeMode::Results(kashiwa_results()));
    let (url, bodies, server) = ollama_stub().await;
    let answer = web_stream(&ctx(&fake), &backend_at(&url), &seed_request())
        .await
        .unwrap();
    assert!(!answer.outcome.fallback_used);
    let chunks: Vec<Chunk> = collect(answer.chunks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(matches!(chunks.last(), Some(Chunk::Done { .. })));
    assert_eq!(
        chunks[0],
        content("柏市の特産物は"),
        "the model's tokens come first, live"
    );
    let text = text_of(&chunks);
    assert!(
        text.contains("かぶとねぎです [1]。\n\n出典:\n- [1] 柏市公式 — https://example.jp/top"),
        "{text}"
    );
    let sent = bodies.lock().unwrap()[0].to_string();
    assert!(sent.contains("<<<SEARCH RESULT 1>>>") && sent.contains("untrusted data"));
    server.abort();
}

#[tokio::test]
async fn end_to_end_fallback_when_searxng_is_down() {
    let mut fake = FakeSearxng::start().await.unwrap();
    let c = ctx(&fake);
    fake.stop().await;
    let (url, bodies, server) = ollama_stub().await;
    let answer = web_stream(&c, &backend_at(&url), &seed_request())
        .await
        .unwrap();
    assert!(answer.outcome.fallback_used);
    assert!(
        answer
            .outcome
            .fallback_reason
            .as_deref()
            .unwrap()
            .contains("cannot connect")
    );
    let chunks: Vec<Chunk> = collect(answer.chunks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let text = text_of(&chunks);
    assert!(text.starts_with(JA_DISCLAIMER_START), "{text}");
    assert!(
        text.ends_with("かぶとねぎです [1]。") && !text.contains("出典"),
        "{text}"
    );
    let sent = bodies.lock().unwrap()[0].to_string();
    assert!(sent.contains("この市の特産物をおしえて") && !sent.contains("<<<SEARCH RESULT"));
    server.abort();
}
