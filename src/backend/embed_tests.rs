//! `Backend::embed` against the fake LLM server, over both wire formats.

use super::*;
use crate::testkit::fake_llm::{Failure, FakeLlm, FakeLlmServer};

const MODEL: &str = "nomic-embed-text";

async fn server() -> FakeLlmServer {
    FakeLlm::builder().model(MODEL).spawn().await.unwrap()
}

fn both(server: &FakeLlmServer) -> [Backend; 2] {
    let name = WorkerName::parse("moon").unwrap();
    [
        Backend::Ollama(
            ollama::OllamaClient::new(server.ollama_settings(name.clone()).unwrap()).unwrap(),
        ),
        Backend::OpenAi(openai::OpenAiClient::new(server.openai_settings(name).unwrap()).unwrap()),
    ]
}

fn inputs(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

#[tokio::test]
async fn both_apis_return_one_vector_per_input_in_order() {
    let server = server().await;
    let model = ModelName::parse(MODEL).unwrap();
    let texts = inputs(&[
        "私の猫の名前はミケです",
        "the cat sat",
        "私の猫の名前はミケです",
    ]);
    let [ollama, openai] = both(&server);
    let a = ollama.embed(&model, &texts).await.unwrap();
    let b = openai.embed(&model, &texts).await.unwrap();
    assert_eq!(a.len(), 3);
    assert_eq!(a, b, "the fake makes the same vectors on both APIs");
    assert_eq!(a[0], a[2]);
    assert_ne!(a[0], a[1]);
    assert!(!a[0].is_empty());
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.contains(&"/api/embed".to_owned()), "{paths:?}");
    assert!(paths.contains(&"/v1/embeddings".to_owned()), "{paths:?}");
    let sent = server.requests_to("/api/embed");
    let body = sent[0].body.as_ref().unwrap();
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["input"][1], "the cat sat");
}

#[tokio::test]
async fn unknown_model_and_server_failure_are_errors() {
    let server = server().await;
    let [ollama, openai] = both(&server);
    let missing = ModelName::parse("no-such-model").unwrap();
    for backend in [&ollama, &openai] {
        let err = backend.embed(&missing, &inputs(&["x"])).await.unwrap_err();
        assert!(
            matches!(err, BackendError::Rejected { status: 404, .. }),
            "{err}"
        );
    }
    server.update_knobs(|k| {
        k.fail_next = 2;
        k.failure = Failure::Status(500);
    });
    let model = ModelName::parse(MODEL).unwrap();
    for backend in [&ollama, &openai] {
        let err = backend.embed(&model, &inputs(&["x"])).await.unwrap_err();
        assert!(
            matches!(err, BackendError::Server { status: 500, .. }),
            "{err}"
        );
    }
}
