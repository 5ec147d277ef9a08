//! Context windows end to end on the realistic fake (one simulated Ollama machine with a
//! 4096-token default window): the window sent, history trimmed with the row saying so, a
//! resident window kept, the client's own `num_ctx`, and a prompt too long for any window.

use std::time::Duration;

use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, Realism, Speed};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};

const CHAT: &str = "qwen2.5:7b";

async fn machine() -> FakeLlmServer {
    FakeLlm::builder()
        .model(CHAT)
        .realistic(Realism {
            time_scale: 100.0,
            speed: Speed {
                load: Duration::from_secs(3),
                prompt_tps: 5000.0,
                eval_tps: 200.0,
            },
            answer_tokens: (10, 20),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

/// Coordinator on one machine, `max_num_ctx` set when given.
async fn app(max_num_ctx: Option<u32>) -> TestApp {
    spawn_app_with(machine().await, |c| {
        c.backends[0].parallel = 1;
        c.backends[0].max_num_ctx = max_num_ctx;
    })
    .await
}

/// A non-streamed OpenAI chat; returns its answer and its row.
async fn chat(app: &TestApp, messages: Value) -> (Value, Value) {
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": CHAT, "messages": messages}),
        )
        .await;
    let status = res.status();
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{answer}");
    (answer, app.task(&id).await)
}

/// About `tokens` tokens of pasted notes, marked so they can be found again.
fn paste(mark: &str, tokens: usize) -> String {
    format!("[{mark}] ") + &"meeting notes: the budget was approved. ".repeat(tokens / 10)
}

fn sent_text(sent: &Value) -> String {
    sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A chat whose history outgrows the backend's cap loses its oldest turn, whole: the
/// machine truncates nothing, gets the capped window, and the row counts the two
/// messages left out.
#[tokio::test]
async fn history_beyond_the_window_is_trimmed_oldest_first_and_the_row_says_so() {
    let app = app(Some(4096)).await;
    let messages = json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": paste("first", 1700)},
        {"role": "assistant", "content": "Noted the first notes."},
        {"role": "user", "content": paste("second", 1700)},
        {"role": "assistant", "content": "Noted the second notes."},
        {"role": "user", "content": "What did both meetings decide?"},
    ]);
    let (_, row) = chat(&app, messages).await;
    let sent = app.last_backend_body("/api/chat");
    assert_eq!(sent["options"]["num_ctx"], 4096, "{sent}");
    let text = sent_text(&sent);
    assert!(!text.contains("[first]"), "the oldest turn stays out");
    assert!(text.contains("[second]") && text.contains("What did both meetings decide?"));
    assert!(
        text.contains("You are a helpful assistant."),
        "system messages stay"
    );
    assert_eq!(row["context"]["history_dropped"], 2, "{row}");
    assert_eq!(row["context"]["num_ctx"], 4096, "{row}");
    let estimate = row["context"]["estimated_prompt_tokens"].as_u64().unwrap();
    assert!(estimate <= 4096 - 1024, "{row}");
    let g = app.fake.generations().pop().unwrap();
    assert!(!g.truncated, "{g:?}");
    assert_eq!(app.fake.stats().truncated_prompts, 0);
    app.stop().await;
}

/// Once a long prompt has loaded the model with a larger window (the whole window at
/// once), a short one gets that same window: no reload (which would cost a load and the
/// prompt cache).
#[tokio::test]
async fn a_resident_model_with_a_larger_window_is_not_reloaded_for_a_smaller_prompt() {
    let app = app(None).await;
    let long = json!([{"role": "user", "content": paste("long", 5000)}]);
    let (_, row) = chat(&app, long).await;
    assert_eq!(row["context"]["num_ctx"], 16_384, "{row}");
    let short = json!([{"role": "user", "content": "And in one sentence?"}]);
    let (_, row) = chat(&app, short).await;
    assert_eq!(row["context"]["num_ctx"], 16_384, "{row}");
    assert_eq!(
        app.last_backend_body("/api/chat")["options"]["num_ctx"],
        16_384
    );
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.reloads), (1, 0), "{stats:?}");
    // `GET /workers` shows the model's window, the cap and the resident window.
    let workers: Value = app.get("/workers").await.json().await.unwrap();
    let moon = &workers["workers"][0];
    assert_eq!(moon["max_num_ctx"], 16_384, "{moon}");
    let window = &moon["windows"][0];
    assert_eq!(window["model"], CHAT, "{moon}");
    assert_eq!(window["context_length"], 32_768, "{moon}");
    assert_eq!(window["loaded_num_ctx"], 16_384, "{moon}");
    // And the model's size, as `/api/tags` reported it (the fake's default, 4.7 GB).
    assert_eq!(
        moon["sizes"],
        json!([{"model": CHAT, "bytes": 4_683_087_332u64}]),
        "{moon}"
    );
    app.stop().await;
}

/// A client's own `options.num_ctx` (Ollama's front door) is sent as it is, and capped
/// by the window when it asks for more.
#[tokio::test]
async fn the_clients_own_num_ctx_wins_within_the_window() {
    let app = app(Some(12_288)).await;
    for (asked, sent) in [(6144, 6144), (100_000, 12_288)] {
        let body = json!({
            "model": CHAT,
            "stream": false,
            "messages": [{"role": "user", "content": "hello there"}],
            "options": {"num_ctx": asked},
        });
        let res = app.post("/api/chat", body).await;
        assert_eq!(res.status(), 200);
        let got = app.last_backend_body("/api/chat");
        assert_eq!(got["options"]["num_ctx"], sent, "asked {asked}: {got}");
    }
    app.stop().await;
}

/// A prompt that does not fit even alone is refused in its own language, naming the
/// field; no machine sees it (it would have lost its start there).
#[tokio::test]
async fn a_prompt_too_long_for_the_window_is_refused_in_its_language() {
    let app = app(Some(4096)).await;
    let prompt = "会議の議事録です。".repeat(600);
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": CHAT, "messages": [{"role": "user", "content": prompt}]}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("長すぎます"), "{body}");
    assert_eq!(body["error"]["param"], "messages", "{body}");
    assert!(app.fake.requests_to("/api/chat").is_empty());
    // An English one hears it in English.
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": CHAT, "messages": [{"role": "user", "content": "word ".repeat(4000)}]}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too long"),
        "{body}"
    );
    app.stop().await;
}
