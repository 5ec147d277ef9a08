//! The web lane through the running server: cited answers when SearXNG works, an answer
//! with the disclaimer (and `fallback_used`) whenever it does not, and short queries.

use std::time::Duration;

use coordinator::testkit::fake_searxng::{FakeMode, FakeResult, FakeSearxng};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with, spawn_fake};

const JA_DISCLAIMER: &str = "※ Web検索が利用できなかったため、ローカルLLMの知識のみで回答しています。最新情報は反映されていない可能性があります。";
const WEATHER: &str = "今日の千葉県柏市の天気を教えて";

fn results() -> FakeMode {
    FakeMode::Results(vec![
        FakeResult::new(
            "https://weather.example/kashiwa",
            "柏市の天気",
            "柏市は晴れ時々曇、最高31℃",
        )
        .score(2.0),
        FakeResult::new(
            "https://news.example/chiba",
            "千葉県の天気",
            "千葉県北西部は晴れ",
        )
        .score(1.0),
    ])
}

async fn app_with_searxng(searxng: &FakeSearxng) -> TestApp {
    let url = searxng.url();
    spawn_app_with(spawn_fake().await, move |c| {
        c.web.searxng_url = url;
        c.web.timeout_ms = 500;
    })
    .await
}

/// Asks through the OpenAI front door; returns (answer text, stored task).
async fn ask(app: &TestApp, messages: Value) -> (String, Value) {
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "auto", "messages": messages}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(res.headers()["x-coordinator-queue"], "tasks:web");
    let body: Value = res.json().await.unwrap();
    let text = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let task: Value = app.get(&format!("/tasks/{id}")).await.json().await.unwrap();
    (text, task)
}

#[tokio::test]
async fn results_give_a_cited_answer_with_sources() {
    let searxng = FakeSearxng::start().await.unwrap();
    searxng.set_mode(results());
    let app = app_with_searxng(&searxng).await;
    let (text, task) = ask(&app, json!([{"role": "user", "content": WEATHER}])).await;
    assert!(text.contains("https://weather.example/kashiwa"), "{text}");
    assert!(text.contains("[1]"), "{text}");
    assert!(!text.contains(JA_DISCLAIMER));
    assert_eq!(task["fallback_used"], false);
    assert_eq!(task["web_search"], true);
    assert_eq!(task["prompt"], WEATHER);
    // The results went to the model fenced as data.
    let sent = app.fake.requests_to("/api/chat")[0]
        .body
        .as_ref()
        .unwrap()
        .to_string();
    assert!(sent.contains("柏市は晴れ時々曇"), "{sent}");
    assert!(sent.contains("SEARCH RESULT"), "{sent}");
}

#[tokio::test]
async fn every_search_failure_falls_back_with_the_disclaimer() {
    let mut searxng = FakeSearxng::start().await.unwrap();
    let app = app_with_searxng(&searxng).await;
    let cases = [
        (FakeMode::Zero, "0 results"),
        (FakeMode::ServerError, "500"),
        (FakeMode::Forbidden, "settings.yml"),
        (FakeMode::Malformed, "searxng"),
        (FakeMode::Slow(Duration::from_secs(3)), "searxng"),
    ];
    for (mode, reason) in cases {
        searxng.set_mode(mode.clone());
        let (text, task) = ask(&app, json!([{"role": "user", "content": WEATHER}])).await;
        assert!(text.starts_with(JA_DISCLAIMER), "{mode:?}: {text}");
        assert_eq!(task["fallback_used"], true, "{mode:?}");
        let why = task["fallback_reason"].as_str().unwrap();
        assert!(why.contains(reason), "{mode:?}: {why}");
        assert_eq!(task["status"], "done");
    }
    searxng.stop().await;
    let (text, task) = ask(
        &app,
        json!([{"role": "user", "content": "What is the latest news today?"}]),
    )
    .await;
    assert!(
        text.starts_with("※ Web search was not available"),
        "English prompt, English disclaimer: {text}"
    );
    assert_eq!(task["fallback_used"], true);
}

/// The seed's fault-injection run: search works, SearXNG is stopped (fallback), started
/// again (cited answers again), all within one running server.
#[tokio::test]
async fn fault_injection_sequence_in_one_server() {
    let mut searxng = FakeSearxng::start().await.unwrap();
    searxng.set_mode(results());
    let app = app_with_searxng(&searxng).await;
    let (text, _) = ask(&app, json!([{"role": "user", "content": WEATHER}])).await;
    assert!(text.contains("weather.example"));
    searxng.stop().await;
    let (text, task) = ask(&app, json!([{"role": "user", "content": WEATHER}])).await;
    assert!(text.starts_with(JA_DISCLAIMER), "{text}");
    assert_eq!(task["fallback_used"], true);
    searxng.restart().await.unwrap();
    let (text, task) = ask(&app, json!([{"role": "user", "content": WEATHER}])).await;
    assert!(
        text.contains("weather.example") && !text.contains(JA_DISCLAIMER),
        "{text}"
    );
    assert_eq!(task["fallback_used"], false);
}

#[tokio::test]
async fn follow_up_queries_are_short_standalone_and_resolve_the_city() {
    let searxng = FakeSearxng::start().await.unwrap();
    searxng.set_mode(results());
    let app = app_with_searxng(&searxng).await;
    let follow_up = "この市の最新ニュースを教えて";
    let (_, task) = ask(
        &app,
        json!([
            {"role": "user", "content": WEATHER},
            {"role": "assistant", "content": "柏市は晴れ時々曇、最高31℃です。"},
            {"role": "user", "content": follow_up},
        ]),
    )
    .await;
    assert_eq!(task["prompt"], follow_up);
    let q = searxng.queries().pop().unwrap();
    assert!(q.contains("柏市"), "{q}");
    assert!(q.chars().count() <= 200 && !q.contains("この市"), "{q}");

    // A long prompt never reaches SearXNG whole.
    let filler =
        "背景として、私は毎朝の通勤で天気を気にしていて、傘を持つべきか悩むことが多いです。"
            .repeat(80);
    let long = format!("最新ニュースを教えて。{filler}");
    assert!(long.chars().count() > 3000);
    let _ = ask(&app, json!([{"role": "user", "content": long}])).await;
    for q in searxng.queries() {
        assert!(q.chars().count() <= 200, "{} chars", q.chars().count());
    }
}

#[tokio::test]
async fn the_utility_model_rewrites_follow_up_queries_when_configured() {
    use coordinator::testkit::fake_llm::{FakeLlm, Script};
    let searxng = FakeSearxng::start().await.unwrap();
    searxng.set_mode(results());
    let fake = FakeLlm::builder()
        .model(crate::helpers::MODEL)
        .model("rewriter:1b")
        .spawn()
        .await
        .unwrap();
    fake.set_script("rewriter:1b", Some(Script::text("柏市 名物 ニュース")));
    let url = searxng.url();
    let app = spawn_app_with(fake, move |c| {
        c.web.searxng_url = url;
        c.routing.default_model = Some(crate::helpers::MODEL.into());
        c.internal_tasks.model = Some("rewriter:1b".into());
    })
    .await;
    let (_, task) = ask(
        &app,
        json!([
            {"role": "user", "content": WEATHER},
            {"role": "assistant", "content": "柏市は晴れです。"},
            {"role": "user", "content": "この市の最新ニュースを教えて"},
        ]),
    )
    .await;
    assert_eq!(task["fallback_used"], false);
    assert_eq!(searxng.queries().pop().unwrap(), "柏市 名物 ニュース");
}
