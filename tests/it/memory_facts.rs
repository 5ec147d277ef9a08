//! Memory against answers that look like a model's: the fake LLM in its realistic-answer
//! mode (several sentences in the prompt's language, mostly not the fact), driven through
//! `/v1/chat/completions` in separate Open WebUI chats, as a household uses it.

use coordinator::config::Config;
use coordinator::memory::OpenWebUiMemory;
use coordinator::testkit::fake_llm::FakeLlm;
use serde_json::{Value, json};

use crate::helpers::{MODEL, TestApp, spawn_app_with};

async fn realistic_app(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let fake = FakeLlm::builder()
        .model(MODEL)
        .realistic_answers()
        .spawn()
        .await
        .unwrap();
    spawn_app_with(fake, tweak).await
}

/// One whole turn in chat `chat` (with an optional system prompt): the task id and the
/// answer's text.
async fn chat(app: &TestApp, chat: &str, system: Option<&str>, prompt: &str) -> (String, String) {
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": prompt}));
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-OpenWebUI-Chat-Id", chat)
        .json(&json!({"model": "auto", "stream": false, "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let task = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = res.json().await.unwrap();
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    (task, answer)
}

fn facts(items: &[Value]) -> Vec<&str> {
    items
        .iter()
        .filter(|i| i["kind"] == "fact")
        .filter_map(|i| i["text"].as_str())
        .collect()
}

/// Tells `prompt` in chat `thread` and waits until the turn is remembered.
async fn tell(app: &TestApp, thread: &str, prompt: &str) {
    chat(app, thread, None, prompt).await;
    app.remembered(thread).await;
}

/// Every fact item in `/memory` whose text holds `word`.
async fn facts_holding(app: &TestApp, word: &str) -> Vec<Value> {
    let all: Value = app.get("/memory").await.json().await.unwrap();
    all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "fact" && i["text"].as_str().unwrap().contains(word))
        .cloned()
        .collect()
}

/// What the backend was sent for the last chat turn, as one string.
fn last_prompt(app: &TestApp) -> String {
    app.last_backend_body("/api/chat")["messages"].to_string()
}

/// The seed's own case, with a model's answer: the fact is remembered in the person's
/// words, the question is not a fact, and a new chat's prompt carries the fact, fenced,
/// dated and introduced as the person's own earlier words.
#[tokio::test]
async fn the_seeds_cat_is_recalled_after_a_long_realistic_answer() {
    let app = realistic_app(|_| {}).await;
    let told = "私の猫の名前はミケです。覚えておいてね。";
    let (_, answer) = chat(&app, "chat-a", None, told).await;
    assert!(
        answer.chars().count() >= 80 && !answer.contains("ミケ"),
        "a model's answer, not an echo: {answer}"
    );
    let a = app.remembered("chat-a").await;
    assert_eq!(facts(&a), ["私の猫の名前はミケです"], "{a:?}");

    let question = "私の猫の名前は何でしたっけ？";
    let (task, _) = chat(&app, "chat-b", None, question).await;
    let sent = last_prompt(&app);
    assert!(sent.contains("私の猫の名前はミケです"), "{sent}");
    assert!(
        sent.contains("この人が以前の会話で話したことの記憶です"),
        "{sent}"
    );
    assert!(
        sent.contains("<memory>") && sent.contains("</memory>"),
        "{sent}"
    );
    assert!(sent.contains("[たった今] 私の猫の名前はミケです"), "{sent}");
    assert!(
        !sent.contains("覚えておいてね"),
        "the fact, not the transcript: {sent}"
    );
    let row: Value = app
        .get(&format!("/tasks/{task}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        row["prompt"], question,
        "the stored prompt is what was typed"
    );
    let b = app.remembered("chat-b").await;
    assert!(facts(&b).is_empty(), "a question is not a fact: {b:?}");
}

/// Facts of every kind, told in one chat each and asked in another in other words, in
/// both languages; and a question about something never told gets no memory.
#[tokio::test]
async fn facts_of_every_kind_are_recalled_in_both_languages() {
    let app = realistic_app(|_| {}).await;
    let cases = [
        (
            "うちの犬はポチという柴犬です。",
            "うちの犬の名前を覚えてる？",
            "ポチ",
        ),
        (
            "札幌の北区に住んでるんだけど、雪かきを楽にする方法ある？",
            "私ってどこに住んでるんだっけ？",
            "札幌",
        ),
        (
            "うちのNASはSynologyのDS920+です。",
            "家にあるNASの型番なんだっけ？",
            "DS920+",
        ),
        (
            "コーヒーはブラックしか飲みません。",
            "私のコーヒーの好みって何だっけ？",
            "ブラック",
        ),
        (
            "私の誕生日は3月14日です。",
            "私の誕生日はいつだった？",
            "3月14日",
        ),
        (
            "My daughter is called Emma and she just turned six.",
            "What's my kid's name again?",
            "Emma",
        ),
        (
            "I've got a Pixel 7 Pro and the battery drains fast, any tips?",
            "What phone do I have?",
            "Pixel 7 Pro",
        ),
        (
            "I live in Leeds, just moved here for work.",
            "Which city do I live in?",
            "Leeds",
        ),
        (
            "I prefer dark mode in every editor I use.",
            "Do I like dark mode or light mode?",
            "dark mode",
        ),
        (
            "Our wedding anniversary is on June 2nd.",
            "When is our anniversary?",
            "June 2nd",
        ),
    ];
    for (n, (told, _, _)) in cases.iter().enumerate() {
        tell(&app, &format!("tell-{n}"), told).await;
    }
    for (n, (_, asked, fact)) in cases.iter().enumerate() {
        chat(&app, &format!("ask-{n}"), None, asked).await;
        let sent = last_prompt(&app);
        assert!(sent.contains("<memory>"), "{asked}: no memory in {sent}");
        assert!(sent.contains(fact), "{asked}: {fact} not in {sent}");
    }
    for never in [
        "うちのハムスターの名前は？",
        "When is my mother's birthday?",
        "ありがとう、助かりました！",
    ] {
        chat(&app, "never", None, never).await;
        let sent = last_prompt(&app);
        assert!(!sent.contains("<memory>"), "{never}: {sent}");
    }
}

/// "I moved to Osaka" after "I live in Kashiwa": the prompt carries Osaka, not Kashiwa;
/// the listing keeps Kashiwa, marked with what superseded it. The same fact told twice is
/// stored once.
#[tokio::test]
async fn newer_facts_win_and_repeated_facts_are_stored_once() {
    let app = realistic_app(|_| {}).await;
    tell(&app, "c1", "I live in Kashiwa, near Tokyo.").await;
    tell(&app, "c2", "Guess what: I moved to Osaka last month!").await;
    chat(&app, "c3", None, "Where do I live these days?").await;
    let sent = last_prompt(&app);
    assert!(
        sent.contains("Osaka") && !sent.contains("Kashiwa"),
        "{sent}"
    );
    let kashiwa = facts_holding(&app, "Kashiwa").await;
    let osaka = facts_holding(&app, "Osaka").await;
    let (kashiwa, osaka) = (&kashiwa[0], &osaka[0]);
    assert_eq!(kashiwa["superseded_by"], osaka["id"], "{kashiwa} {osaka}");
    assert!(osaka.get("superseded_by").is_none(), "{osaka}");

    tell(&app, "d1", "私の猫の名前はミケです。").await;
    tell(&app, "d2", "私の猫の名前はミケです！覚えておいてね").await;
    let cats = facts_holding(&app, "ミケ").await;
    assert_eq!(cats.len(), 1, "{cats:?}");
}

const OWUI_LEGACY: &str =
    "You are a helpful assistant.\nUser Context:\n1. [2026-11-30] 私の猫の名前はミケです\n";

/// When Open WebUI's memory already put a fact in the system prompt, Coordinator does not
/// say it again; what Open WebUI does not carry is still added (`merge`); with `defer`,
/// such a turn gets nothing from Coordinator. Open WebUI's memory review task is never
/// remembered and recalls nothing.
#[tokio::test]
async fn open_webui_memories_are_not_repeated() {
    let app = realistic_app(|_| {}).await;
    tell(&app, "c1", "私の猫の名前はミケです。").await;
    tell(&app, "c2", "うちの犬はポチという柴犬です。").await;

    chat(
        &app,
        "c3",
        Some(OWUI_LEGACY),
        "私の猫の名前は何でしたっけ？",
    )
    .await;
    let sent = last_prompt(&app);
    assert!(
        sent.contains("User Context:"),
        "Open WebUI's block goes through: {sent}"
    );
    assert!(!sent.contains("<memory>"), "nothing said twice: {sent}");
    chat(&app, "c4", Some(OWUI_LEGACY), "うちの犬の名前は何だっけ？").await;
    let sent = last_prompt(&app);
    assert!(sent.contains("<memory>") && sent.contains("ポチ"), "{sent}");

    // Open WebUI's memory review is an internal task.
    let review = "You are Open WebUI's private memory reviewer. Return only valid JSON.";
    let (task, _) = chat(
        &app,
        "c5",
        Some(review),
        "USER: 私の猫の名前はミケです\nASSISTANT: かわいいですね",
    )
    .await;
    let row: Value = app
        .get(&format!("/tasks/{task}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(row["internal_task"], "memory_review", "{row}");
    let reviews: Vec<String> = app
        .fake
        .requests_to("/api/chat")
        .into_iter()
        .filter_map(|r| r.body)
        .map(|b| b["messages"].to_string())
        .filter(|m| m.contains("memory reviewer"))
        .collect();
    assert!(
        reviews.iter().all(|m| !m.contains("<memory>")),
        "{reviews:?}"
    );
    // The next remembered turn shows the review never reached memory.
    tell(&app, "c6", "I keep my bike in the garage.").await;
    let c5: Value = app.get("/memory?thread_id=c5").await.json().await.unwrap();
    assert!(c5["items"].as_array().unwrap().is_empty(), "{c5}");

    let deferring = realistic_app(|c| c.memory.openwebui_memory = OpenWebUiMemory::Defer).await;
    tell(&deferring, "c1", "うちの犬はポチという柴犬です。").await;
    chat(
        &deferring,
        "c2",
        Some(OWUI_LEGACY),
        "うちの犬の名前は何だっけ？",
    )
    .await;
    assert!(!last_prompt(&deferring).contains("<memory>"));
    chat(&deferring, "c3", None, "うちの犬の名前は何だっけ？").await;
    assert!(
        last_prompt(&deferring).contains("ポチ"),
        "without Open WebUI's block: as usual"
    );
}
