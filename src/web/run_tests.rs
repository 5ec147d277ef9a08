//! Tests for the web lane's entry point: plans against the fake SearXNG in every mode,
//! stream decoration, and (ignored until the real Ollama client lands) end to end.

use super::*;
use crate::chat::ChatMessage;
use crate::config::{BackendConfig, BackendKind, TimeoutsConfig};
use crate::domain::ModelName;
use crate::testkit::fake_searxng::{FakeMode, FakeResult, FakeSearxng};
use crate::web::rewrite::RewriteError;

pub(super) fn ctx(fake: &FakeSearxng) -> WebContext {
    WebContext::new(WebConfig {
        searxng_url: fake.url(),
        timeout_ms: 300,
        max_results: 2,
        ..WebConfig::default()
    })
    .unwrap()
}

fn request(messages: Vec<ChatMessage>) -> BackendRequest {
    BackendRequest {
        model: ModelName::parse("qwen2.5:7b").unwrap(),
        messages,
        params: Default::default(),
        tools: Vec::new(),
    }
}

pub(super) fn seed_request() -> BackendRequest {
    request(vec![
        ChatMessage::user("今日の千葉県柏市の天気を教えて"),
        ChatMessage::assistant("柏市は晴れ時々曇、最高31℃です。"),
        ChatMessage::user("この市の特産物をおしえて"),
    ])
}

pub(super) fn kashiwa_results() -> Vec<FakeResult> {
    vec![
        FakeResult::new(
            "https://example.jp/negi",
            "柏の特産品 かぶ・ねぎ",
            "柏市はかぶとねぎの産地です。",
        )
        .score(2.0),
        FakeResult::new("https://example.jp/low", "low", "low").score(0.1),
        FakeResult::new("https://example.jp/top", "柏市公式", "特産物の一覧").score(5.0),
    ]
}

pub(super) const JA_DISCLAIMER_START: &str = "※ Web検索が利用できなかったため";

#[tokio::test]
async fn results_give_a_summary_plan_with_sources_and_no_disclaimer() {
    let fake = FakeSearxng::start().await.unwrap();
    fake.set_mode(FakeMode::Results(kashiwa_results()));
    let plan = plan_web_reply(&ctx(&fake), &seed_request()).await;
    assert_eq!(fake.queries(), ["千葉県柏市 特産物"]);
    let o = &plan.outcome;
    assert!(!o.fallback_used && o.fallback_reason.is_none());
    assert_eq!(o.query.as_deref(), Some("千葉県柏市 特産物"));
    assert_eq!(o.query_source, Some(QuerySource::Rules));
    assert_eq!(o.language, Lang::Ja);
    let urls: Vec<&str> = o.sources.iter().map(|s| s.url.as_str()).collect();
    assert_eq!(urls, ["https://example.jp/top", "https://example.jp/negi"]);
    assert_eq!(plan.prefix, None);
    let suffix = plan.suffix.unwrap();
    assert!(
        suffix.contains("出典:") && suffix.contains("[1] 柏市公式 — https://example.jp/top"),
        "{suffix}"
    );
    let last = &plan.request.messages.last().unwrap().content;
    assert!(last.contains("<<<SEARCH RESULT 2>>>") && last.contains("かぶとねぎ"));
    assert!(!last.contains("example.jp/low"));
}

#[tokio::test]
async fn the_summariser_model_can_be_configured() {
    let fake = FakeSearxng::start().await.unwrap();
    fake.set_mode(FakeMode::Results(kashiwa_results()));
    let mut c = ctx(&fake);
    c.config.model = Some("summariser:3b".into());
    let plan = plan_web_reply(&c, &seed_request()).await;
    assert_eq!(plan.request.model.as_str(), "summariser:3b");
}

async fn fallback_plan(mode: FakeMode) -> WebPlan {
    let fake = FakeSearxng::start().await.unwrap();
    fake.set_mode(mode);
    let plan = plan_web_reply(&ctx(&fake), &seed_request()).await;
    assert_eq!(fake.queries().len(), 1, "searched once");
    plan
}

fn assert_japanese_fallback(plan: &WebPlan) {
    assert!(plan.outcome.fallback_used);
    assert!(plan.outcome.sources.is_empty());
    assert!(
        plan.prefix
            .as_deref()
            .unwrap()
            .starts_with(JA_DISCLAIMER_START)
    );
    assert_eq!(plan.suffix, None);
    assert_eq!(
        plan.request.model.as_str(),
        "qwen2.5:7b",
        "same model, no re-routing"
    );
    assert_eq!(
        plan.request.messages.len(),
        4,
        "the original messages follow our system message"
    );
}

#[tokio::test]
async fn zero_results_fall_back_with_the_query_in_the_reason() {
    let plan = fallback_plan(FakeMode::Zero).await;
    assert_japanese_fallback(&plan);
    assert_eq!(
        plan.outcome.fallback_reason.as_deref(),
        Some("searxng: 0 results for query \"千葉県柏市 特産物\"")
    );
}

#[tokio::test]
async fn http_errors_and_timeouts_fall_back_with_their_own_reasons() {
    for (mode, expect) in [
        (FakeMode::Forbidden, "settings.yml"),
        (FakeMode::ServerError, "HTTP 500"),
        (FakeMode::Malformed, "malformed JSON"),
        (
            FakeMode::Slow(Duration::from_secs(5)),
            "no answer within 300 ms",
        ),
    ] {
        let plan = fallback_plan(mode).await;
        assert_japanese_fallback(&plan);
        let reason = plan.outcome.fallback_reason.unwrap();
        assert!(
            reason.starts_with("searxng: ") && reason.contains(expect),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn searxng_down_falls_back() {
    let mut fake = FakeSearxng::start().await.unwrap();
    let c = ctx(&fake);
    fake.stop().await;
    let plan = plan_web_reply(&c, &seed_request()).await;
    assert_japanese_fallback(&plan);
    assert!(
        plan.outcome
            .fallback_reason
            .unwrap()
            .contains("cannot connect")
    );
}

#[tokio::test]
async fn english_prompts_get_the_english_disclaimer() {
    let fake = FakeSearxng::start().await.unwrap();
    let req = request(vec![ChatMessage::user(
        "What is the weather in Kyoto today?",
    )]);
    let plan = plan_web_reply(&ctx(&fake), &req).await;
    assert_eq!(plan.outcome.language, Lang::En);
    let prefix = plan.prefix.unwrap();
    assert!(
        prefix.starts_with("※ Web search was not available"),
        "{prefix}"
    );
    assert_eq!(detect_language(&prefix), Lang::En);
    assert!(plan.request.messages[0].content.contains("English"));
}

#[tokio::test]
async fn disabled_web_search_answers_locally_without_searching() {
    let fake = FakeSearxng::start().await.unwrap();
    let mut c = ctx(&fake);
    c.config.enabled = false;
    let plan = plan_web_reply(&c, &seed_request()).await;
    assert!(fake.queries().is_empty());
    assert_japanese_fallback(&plan);
    assert!(plan.outcome.fallback_reason.unwrap().contains("disabled"));
}

#[tokio::test]
async fn a_prompt_with_no_words_left_answers_locally() {
    let fake = FakeSearxng::start().await.unwrap();
    let plan = plan_web_reply(
        &ctx(&fake),
        &request(vec![ChatMessage::user("```\nls -la\n```")]),
    )
    .await;
    assert!(fake.queries().is_empty());
    assert!(plan.outcome.fallback_used);
    assert!(
        plan.outcome
            .fallback_reason
            .unwrap()
            .contains("no search query")
    );
}

struct Rewriter;

#[async_trait::async_trait]
impl QueryRewriter for Rewriter {
    async fn rewrite(
        &self,
        _: &[ChatMessage],
        _: &str,
        _: Option<&str>,
    ) -> Result<String, RewriteError> {
        Ok("柏市 名産品".into())
    }
}

#[tokio::test]
async fn the_context_rewriter_is_used_for_the_search() {
    let fake = FakeSearxng::start().await.unwrap();
    let plan = plan_web_reply(
        &ctx(&fake).with_rewriter(Arc::new(Rewriter)),
        &seed_request(),
    )
    .await;
    assert_eq!(fake.queries(), ["柏市 名産品"]);
    assert_eq!(plan.outcome.query_source, Some(QuerySource::Model));
}

pub(super) fn content(text: &str) -> Chunk {
    Chunk::Content { text: text.into() }
}

fn done() -> Chunk {
    Chunk::Done {
        finish_reason: crate::chat::FinishReason::Stop,
        usage: Default::default(),
    }
}

pub(super) async fn collect(stream: ChunkStream) -> Vec<Result<Chunk, BackendError>> {
    stream.collect().await
}

#[tokio::test]
async fn decoration_puts_the_prefix_first_and_the_suffix_before_done() {
    let rest: ChunkStream = Box::pin(futures::stream::iter([
        Ok(content("b")),
        Ok(done()),
        Ok(content("late")),
    ]));
    let got = collect(decorate(
        content("a"),
        rest,
        Some("P".into()),
        Some("S".into()),
    ))
    .await;
    let want = [
        content("P"),
        content("a"),
        content("b"),
        content("S"),
        done(),
    ];
    assert_eq!(
        got.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        want
    );
}

#[tokio::test]
async fn decoration_stops_at_an_error_without_the_suffix() {
    let err = BackendError::Stalled {
        backend: "b".into(),
        after_s: 1,
    };
    let rest: ChunkStream = Box::pin(futures::stream::iter([Err(err.clone()), Ok(done())]));
    let got = collect(decorate(content("a"), rest, None, Some("S".into()))).await;
    assert_eq!(got, [Ok(content("a")), Err(err)]);
}

pub(super) fn backend_at(url: &str) -> Backend {
    let cfg = BackendConfig {
        name: "stub".into(),
        kind: BackendKind::Ollama,
        url: url.into(),
        models: None,
        api_key_env: None,
        parallel: 1,
        max_loaded: None,
        keep_alive: Default::default(),
        context_length: None,
        model_context_length: Default::default(),
        max_num_ctx: None,
    };
    Backend::from_config(&cfg, &TimeoutsConfig::default()).unwrap()
}

#[tokio::test]
async fn a_backend_failure_is_returned_after_the_search_and_emits_nothing() {
    let fake = FakeSearxng::start().await.unwrap();
    fake.set_mode(FakeMode::Results(kashiwa_results()));
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let result = web_stream(&ctx(&fake), &backend_at(&url), &seed_request()).await;
    assert!(result.is_err());
    assert_eq!(fake.queries().len(), 1);
}
