//! Whole decisions through `Decider::decide`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::*;
use crate::config::{InternalTasksConfig, InternalTasksMode};
use crate::domain::InternalTask;
use crate::routing::{ClassifierBackend, RouteError};
use crate::testkit::owui as t;

#[tokio::test]
async fn seed_incidents_route_as_intended() {
    let r = decider();
    let cat = two_models();
    let ping = "Ubuntuでpingコマンドが見つかりません。何をインストールすればいいですか？";
    let d = r.decide(&user_turn(ping), &cat).await.unwrap();
    assert_eq!(
        (d.domain.as_str(), d.web_search()),
        ("code", false),
        "{:?}",
        d.reasons
    );
    assert_eq!(d.lane().to_string().as_str(), "tasks:llm:coder");
    assert!(d.may_recall());

    let d = r
        .decide(&user_turn("今日の柏市の天気は？"), &cat)
        .await
        .unwrap();
    assert!(d.web_search(), "{:?}", d.reasons);
    assert_eq!(
        (d.lane().to_string().as_str(), d.domain.as_str()),
        ("tasks:web", "general")
    );
    assert!(!d.may_recall());

    // The seed's query-generation template: "Today's date", JSON, search... no web, no code.
    let chat = t::history(&[("USER", ping)]);
    let d = r
        .decide(&task_turn(&t::queries(&chat), None, None), &cat)
        .await
        .unwrap();
    assert_eq!(d.internal_task, Some(InternalTask::QueryGeneration));
    assert!(!d.web_search());
    assert_eq!(d.domain.as_str(), "general");
    assert_eq!(
        d.rules_reply(),
        Some(&*format!("{{\"queries\":[\"{ping}\"]}}"))
    );
}

#[tokio::test]
async fn decisions_serialise_for_the_preview() {
    let d = decider()
        .decide(&user_turn("最新ニュースを教えて"), &two_models())
        .await
        .unwrap();
    let v = serde_json::to_value(&d).unwrap();
    for key in [
        "domain",
        "auto_web_search",
        "internal_task",
        "queue",
        "model",
        "worker",
        "named",
        "reasons",
    ] {
        assert!(v.get(key).is_some(), "{key} missing in {v}");
    }
    assert_eq!(v["queue"], "tasks:web");
    assert_eq!(v["auto_web_search"], true);
    assert_eq!(v["reasons"][1], r#"web_search: pos="最新" -> web"#);
}

#[tokio::test]
async fn internal_tasks_in_rules_mode_need_no_model() {
    let chat = t::history(&[
        ("USER", "東京でおすすめのラーメン屋は？"),
        ("ASSISTANT", "いくつかあります"),
    ]);
    let empty = Catalog::default();
    let d = decider()
        .decide(&task_turn(&t::title(&chat), None, Some(1000)), &empty)
        .await
        .unwrap();
    assert_eq!(d.internal_task, Some(InternalTask::TitleGeneration));
    assert_eq!(
        d.rules_reply(),
        Some(r#"{"title":"東京でおすすめのラーメン屋は"}"#)
    );
    assert_eq!(
        (d.lane().to_string().as_str(), d.model.as_str()),
        ("tasks:utility", "rules")
    );
    assert!(!d.may_recall() && !d.web_search());
}

#[tokio::test]
async fn model_mode_and_model_tasks_use_the_utility_lane() {
    let internal = InternalTasksConfig {
        mode: InternalTasksMode::Model,
        model: Some("tiny".into()),
        max_tokens: 64,
    };
    let r = Decider::new(config(), internal);
    let cat = catalog(&[("chat", "moon", None), ("tiny", "moon", None)]);
    let d = r
        .decide(&task_turn("anything", Some("tags_generation"), None), &cat)
        .await
        .unwrap();
    assert_eq!(
        (d.lane().to_string().as_str(), d.model.as_str()),
        ("tasks:utility", "tiny")
    );
    assert_eq!(d.rules_reply(), None);

    // Rules mode: MoA still needs a model; without internal_tasks.model the request's route.
    let d = decider()
        .decide(&task_turn(&t::moa("Rustとは？"), None, None), &two_models())
        .await
        .unwrap();
    assert_eq!(d.internal_task, Some(InternalTask::MoaResponseGeneration));
    assert_eq!(
        (d.lane().to_string().as_str(), d.model.as_str()),
        ("tasks:utility", "chat")
    );
    assert_eq!(d.rules_reply(), None);
}

/// Resident mode answers background work with a model that is resident anyway: the one
/// the task was sent to, else `[internal_tasks] model`, pinned to the worker holding it;
/// by rules when neither is resident, so nothing is ever loaded for it.
#[tokio::test]
async fn resident_mode_answers_with_a_resident_model_or_by_rules() {
    let internal = InternalTasksConfig {
        mode: InternalTasksMode::Resident,
        model: Some("tiny".into()),
        max_tokens: 64,
    };
    let r = Decider::new(config(), internal);
    let with_resident = |resident: &[(&str, &str)]| {
        let mut cat = catalog(&[
            ("chat", "moon", None),
            ("tiny", "laptop", None),
            ("chat", "laptop", None),
        ]);
        for e in &mut cat.entries {
            e.resident = resident
                .iter()
                .any(|(m, w)| e.model.as_str() == *m && e.worker.as_str() == *w);
        }
        cat
    };
    let chat = t::history(&[("USER", "what is rust?")]);
    let sent_to = |model: &str| {
        request(
            vec![ChatMessage::user(t::title(&chat))],
            false,
            None,
            None,
            model,
        )
    };
    // The model the task was sent to, resident on laptop.
    let d = r
        .decide(
            &sent_to("chat"),
            &with_resident(&[("chat", "laptop"), ("tiny", "laptop")]),
        )
        .await
        .unwrap();
    assert_eq!(
        d.lane().to_string(),
        "tasks:llm:chat@laptop",
        "{:?}",
        d.reasons
    );
    assert_eq!(d.rules_reply(), None);
    // Not resident: the configured model where it is.
    let d = r
        .decide(&sent_to("chat"), &with_resident(&[("tiny", "laptop")]))
        .await
        .unwrap();
    assert_eq!(
        d.lane().to_string(),
        "tasks:llm:tiny@laptop",
        "{:?}",
        d.reasons
    );
    // Neither: rules, and the reasons say why.
    let d = r
        .decide(&sent_to("chat"), &with_resident(&[]))
        .await
        .unwrap();
    assert_eq!(d.model.as_str(), "rules");
    assert!(d.rules_reply().is_some());
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("no model for it is resident")),
        "{:?}",
        d.reasons
    );
}

#[tokio::test]
async fn named_requests_keep_their_model_and_record_the_domain() {
    let turn = request(
        vec![ChatMessage::user("Rustのコンパイルエラーを直して")],
        true,
        None,
        None,
        "chat@moon",
    );
    let d = decider().decide(&turn, &two_models()).await.unwrap();
    assert!(d.named);
    assert_eq!(d.domain.as_str(), "code");
    assert_eq!(d.lane().to_string().as_str(), "tasks:llm:chat@moon");
}

fn with_tools(model: &str) -> Turn {
    let mut turn = request(
        vec![ChatMessage::user("hello there")],
        true,
        None,
        None,
        model,
    );
    turn.tools = vec![crate::chat::ToolSpec {
        name: "get_current_timestamp".into(),
        description: None,
        parameters: serde_json::json!({}),
    }];
    turn
}

#[tokio::test]
async fn tools_go_to_a_model_that_takes_them() {
    let r = decider();
    let cat = catalog(&[("chat", "moon", Some(false)), ("coder", "gpu", Some(true))]);
    let d = r.decide(&with_tools("auto"), &cat).await.unwrap();
    assert_eq!(d.model.as_str(), "coder");
    assert!(
        d.reasons
            .iter()
            .any(|x| x.starts_with("tools: chat does not support tools"))
    );
    // Unknown support counts as allowed.
    let d = r.decide(&with_tools("auto"), &two_models()).await.unwrap();
    assert_eq!(d.model.as_str(), "chat");

    let none = catalog(&[("chat", "moon", Some(false)), ("coder", "gpu", Some(false))]);
    let err = r.decide(&with_tools("auto"), &none).await.unwrap_err();
    assert!(matches!(err, RouteError::NoToolModel { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("no available model supports tools")
    );

    let err = r.decide(&with_tools("chat"), &cat).await.unwrap_err();
    assert_eq!(
        err,
        RouteError::ToolsUnsupported {
            model: "chat".into(),
            tool_capable: vec!["coder".into()]
        }
    );
    assert!(err.to_string().contains("coder"));
}

#[tokio::test]
async fn a_domain_model_that_is_not_served_falls_back_to_the_default() {
    let d = decider()
        .decide(
            &user_turn("Pythonでファイルを読むコードは？"),
            &catalog(&[("chat", "m", None)]),
        )
        .await
        .unwrap();
    assert_eq!((d.domain.as_str(), d.model.as_str()), ("code", "chat"));
}

/// A classifier that answers after `delay` on tokio's clock and counts its calls.
struct SlowFake {
    delay: Duration,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl ClassifierBackend for SlowFake {
    async fn classify(&self, _: &ModelName, _: &str, _: &[String]) -> Result<String, String> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        Ok("general".into())
    }
}

fn classifier_router(delay_ms: u64) -> (Arc<SlowFake>, Decider) {
    let fake = Arc::new(SlowFake {
        delay: Duration::from_millis(delay_ms),
        calls: Default::default(),
    });
    let mut cfg = config();
    cfg.classifier.model = Some("tiny".into());
    let r = Decider::with_classifier(cfg, InternalTasksConfig::default(), fake.clone());
    (fake, r)
}

#[tokio::test(start_paused = true)]
async fn the_classifier_is_asked_only_when_unsure_and_never_for_tasks() {
    let (fake, r) = classifier_router(300);
    let cat = two_models();
    let calls = || fake.calls.load(std::sync::atomic::Ordering::SeqCst);
    let d = r
        .decide(&user_turn("Is a python a good pet?"), &cat)
        .await
        .unwrap();
    assert_eq!(d.domain.as_str(), "general", "{:?}", d.reasons);
    assert_eq!(calls(), 1);
    r.decide(&user_turn("```rust\nfn main() {}\n```"), &cat)
        .await
        .unwrap();
    r.decide(&user_turn("おすすめの映画は？"), &cat)
        .await
        .unwrap();
    assert_eq!(calls(), 1, "sure rule results skip the classifier");
    let chat = t::history(&[("USER", "python?")]);
    r.decide(&task_turn(&t::title(&chat), None, Some(1000)), &cat)
        .await
        .unwrap();
    assert_eq!(calls(), 1, "internal tasks never reach the classifier");
}

#[tokio::test(start_paused = true)]
async fn a_slow_classifier_cannot_delay_routing_past_its_deadline() {
    let (_, r) = classifier_router(19_300);
    let start = tokio::time::Instant::now();
    let d = r
        .decide(&user_turn("Is a python a good pet?"), &two_models())
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    assert_eq!(d.domain.as_str(), "code", "rule result kept");
    assert!(
        d.reasons.iter().any(|x| x.contains("deadline of 1500 ms")),
        "{:?}",
        d.reasons
    );
}

/// A client that asks for JSON gets the model's JSON: no web search (whose cited answer,
/// disclaimer or sources list would not be the JSON asked for).
#[tokio::test]
async fn structured_output_is_never_sent_to_web_search() {
    let r = decider();
    let mut turn = user_turn("今日の柏市の天気は？");
    turn.params.format = Some(crate::chat::AnswerFormat::Json);
    let d = r.decide(&turn, &two_models()).await.unwrap();
    assert!(!d.web_search(), "{:?}", d.reasons);
    assert_ne!(d.lane().to_string().as_str(), "tasks:web");
    assert!(
        d.reasons.iter().any(|r| r.contains("structured output")),
        "{:?}",
        d.reasons
    );
}
