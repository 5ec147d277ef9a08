//! The service's side of the task span: what is logged while a turn is submitted, and
//! while its events are read, carries the task's id, thread and lane.

use std::sync::Arc;

use super::*;
use crate::backend::{Backend, BackendHandle, Registry};
use crate::config::{BackendConfig, BackendKind, TimeoutsConfig};
use crate::domain::ModelName;
use crate::events::InProcessEvents;
use crate::queue::in_process::InProcessQueue;
use crate::store::sqlite::SqliteStore;
use crate::testkit::log_capture::Capture;
use crate::turn::{TurnInput, build_turn};

/// An embedded service whose one backend serves `m`, with no worker running: a submitted
/// job waits in its lane.
pub(crate) async fn service(dir: &tempfile::TempDir) -> AppState {
    let backend = BackendConfig {
        name: "w1".into(),
        kind: BackendKind::Ollama,
        url: "http://127.0.0.1:9".into(),
        models: Some(vec!["m".into()]),
        api_key_env: None,
        parallel: 1,
        max_loaded: None,
        keep_alive: Default::default(),
        context_length: None,
        model_context_length: Default::default(),
        max_num_ctx: None,
    };
    let handle = BackendHandle::new(
        Backend::from_config(&backend, &TimeoutsConfig::default()).unwrap(),
        1,
        Some(vec![ModelName::parse("m").unwrap()]),
    );
    let config = Config {
        backends: vec![backend],
        ..Config::default()
    };
    let store: Arc<dyn TaskStore> = Arc::new(
        SqliteStore::open(&dir.path().join("tasks.db"))
            .await
            .unwrap(),
    );
    let events: Arc<dyn EventBus> = Arc::new(InProcessEvents::new());
    AppState::from(Services {
        decider: Decider::new(config.routing.clone(), config.internal_tasks.clone()),
        config: Arc::new(config),
        dispatch: Dispatcher::embedded(
            store.clone(),
            Arc::new(InProcessQueue::new()),
            events.clone(),
        ),
        store,
        events: events.clone(),
        directory: Arc::new(Registry::new(vec![handle])),
        started_at: Utc::now(),
        metrics: Arc::default(),
        keys: Arc::default(),
        limits: Arc::default(),
        shutdown: Default::default(),
        memory: None,
        rag: None,
    })
}

#[tokio::test]
async fn what_is_logged_for_a_submitted_task_carries_its_span() {
    let capture = Capture::default();
    let _subscriber = capture.set_default();
    let dir = tempfile::tempdir().unwrap();
    let state = service(&dir).await;
    let input = TurnInput {
        messages: vec![ChatMessage::user("how do I reverse a list in python?")],
        body_chat_id: Some("chat-7".into()),
        ..Default::default()
    };
    let turn = build_turn(input, &state.config.history).unwrap();
    let submitted = state.submit_for_answer(turn).await.unwrap();
    let task_id = submitted.task_id.to_string();

    tracing::info!("after the submission");
    drop(submitted);

    let captured = capture.events();
    let routed = captured
        .iter()
        .find(|c| c.message() == "turn routed")
        .expect("the submission logs its decision");
    assert_eq!(routed.spans.get("task_id"), Some(&task_id), "{routed:#?}");
    assert_eq!(
        routed.spans.get("thread_id").map(String::as_str),
        Some("chat-7")
    );
    assert_eq!(
        routed.spans.get("lane").map(String::as_str),
        Some("tasks:llm:m")
    );
    for own in ["task_id", "thread_id", "queue"] {
        assert!(
            !routed.event.contains_key(own),
            "{own} comes from the span: {routed:#?}"
        );
    }
    let outside = captured
        .iter()
        .find(|c| c.message() == "after the submission")
        .expect("logged by the test");
    assert!(
        outside.spans.is_empty(),
        "the test itself runs in no task span"
    );
}
