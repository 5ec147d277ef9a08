//! Text completions (`SamplingParams::text`) against the fake LLM server, over both
//! backend kinds: Ollama's `/api/generate`, OpenAI's legacy `completions` (or a chat when
//! the form needs no completion endpoint), streamed and whole; and `dimensions` on both
//! embedding APIs.

use super::*;
use crate::chat::{ChatMessage, FinishReason, TextForm};
use crate::testkit::chunks::{collect_chunks as collect, content_text as text_of, done_of};
use crate::testkit::fake_llm::{FakeLlm, FakeLlmServer};

const MODEL: &str = "qwen2.5-coder:7b";

async fn server() -> FakeLlmServer {
    FakeLlm::builder()
        .model(MODEL)
        .model("nomic-embed-text")
        .spawn()
        .await
        .unwrap()
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

fn request(form: TextForm, system: Option<&str>) -> BackendRequest {
    let mut messages: Vec<ChatMessage> = system.map(ChatMessage::system).into_iter().collect();
    let mut user = ChatMessage::user("def f():");
    user.images = vec!["iVBORw0KGgo=".into()];
    messages.push(user);
    BackendRequest {
        model: ModelName::parse(MODEL).unwrap(),
        messages,
        params: SamplingParams {
            max_tokens: Some(40),
            stop: vec!["\n\n".into()],
            text: Some(form),
            ..SamplingParams::default()
        },
        tools: Vec::new(),
    }
}

fn fim() -> TextForm {
    TextForm {
        suffix: Some("return 1".into()),
        raw: false,
    }
}

#[tokio::test]
async fn ollama_asks_api_generate_streamed_and_whole() {
    let server = server().await;
    let [ollama, _] = both(&server);
    let req = request(fim(), Some("You write Python."));
    let chunks = collect(ollama.chat(&req).await.unwrap()).await;
    assert_eq!(
        text_of(&chunks),
        format!("Echo from {MODEL}: def f(): [suffix: return 1]")
    );
    let (reason, _, completion_tokens) = done_of(&chunks).unwrap();
    assert_eq!(reason, FinishReason::Stop);
    assert!(completion_tokens > 0);
    let sent = server.requests_to("/api/generate");
    let body = sent[0].body.as_ref().unwrap();
    assert_eq!(body["prompt"], "def f():");
    assert_eq!(body["suffix"], "return 1");
    assert_eq!(body["system"], "You write Python.");
    assert_eq!(body["images"][0], "iVBORw0KGgo=");
    assert_eq!(body["stream"], true);
    assert_eq!(body["options"]["num_predict"], 40);
    assert_eq!(body["options"]["stop"][0], "\n\n");
    assert!(
        body.get("messages").is_none() && body.get("raw").is_none(),
        "{body}"
    );

    let raw = TextForm {
        suffix: None,
        raw: true,
    };
    let chunks = collect(ollama.complete(&request(raw, None)).await.unwrap()).await;
    assert_eq!(text_of(&chunks), format!("Echo from {MODEL}: def f():"));
    let sent = server.requests_to("/api/generate");
    let body = sent[1].body.as_ref().unwrap();
    assert_eq!(body["raw"], true);
    assert_eq!(body["stream"], false);
    assert!(server.requests_to("/api/chat").is_empty());
}

#[tokio::test]
async fn openai_asks_legacy_completions_for_a_suffix_or_raw_and_a_chat_otherwise() {
    let server = server().await;
    let [_, openai] = both(&server);
    let chunks = collect(openai.chat(&request(fim(), Some("Py."))).await.unwrap()).await;
    assert_eq!(
        text_of(&chunks),
        format!("Echo from {MODEL}: def f(): [suffix: return 1]")
    );
    let (_, _, completion_tokens) = done_of(&chunks).unwrap();
    assert!(completion_tokens > 0, "usage from the stream");
    let sent = server.requests_to("/v1/completions");
    let body = sent[0].body.as_ref().unwrap();
    assert_eq!(
        body["prompt"], "def f():",
        "no system text in a completion's prompt"
    );
    assert_eq!(body["suffix"], "return 1");
    assert_eq!(body["max_tokens"], 40);
    assert_eq!(body["stream_options"]["include_usage"], true);

    let raw = TextForm {
        suffix: None,
        raw: true,
    };
    let chunks = collect(openai.complete(&request(raw, None)).await.unwrap()).await;
    assert_eq!(text_of(&chunks), format!("Echo from {MODEL}: def f():"));
    let sent = server.requests_to("/v1/completions");
    let body = sent[1].body.as_ref().unwrap();
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none() && body.get("suffix").is_none());

    let templated = TextForm::default();
    let chunks = collect(
        openai
            .complete(&request(templated, Some("Py.")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text_of(&chunks), format!("Echo from {MODEL}: def f():"));
    let sent = server.requests_to("/v1/chat/completions");
    assert_eq!(sent.len(), 1, "a templated prompt is a chat");
    assert_eq!(
        sent[0].body.as_ref().unwrap()["messages"][0]["content"],
        "Py."
    );
}

#[tokio::test]
async fn embeddings_pass_dimensions_on_both_apis() {
    let server = server().await;
    let model = ModelName::parse("nomic-embed-text").unwrap();
    for backend in both(&server) {
        let v = backend
            .embed_sized(&model, &["a cat".to_owned()], Some(8))
            .await
            .unwrap();
        assert_eq!(v[0].len(), 8);
        let full = backend.embed(&model, &["a cat".to_owned()]).await.unwrap();
        assert_eq!(full[0].len(), 64);
    }
    assert_eq!(
        server.requests_to("/api/embed")[0].body.as_ref().unwrap()["dimensions"],
        8
    );
    assert_eq!(
        server.requests_to("/v1/embeddings")[0]
            .body
            .as_ref()
            .unwrap()["dimensions"],
        8
    );
}
