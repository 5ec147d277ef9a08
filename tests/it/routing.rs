//! The routing brain through the running server: Open WebUI's background tasks never
//! reach a model or the web, while the user's own turns in the same thread are routed.

use coordinator::testkit::fake_searxng::FakeSearxng;
use serde_json::{Value, json};

use crate::helpers::{spawn_app_with, spawn_fake};

/// A title-generation request in the shape Open WebUI 0.12 sends (one user message holding
/// the task template with the chat inside, `stream: false`, `max_tokens: 1000`).
fn title_request(chat: &str) -> Value {
    let template = format!(
        "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n\
         ### Guidelines:\n- The title should clearly represent the main theme or subject of the conversation.\n\
         - Write the title in the chat's primary language; default to English if multilingual.\n\
         - Prioritize accuracy over excessive creativity; keep it clear and simple.\n\
         - Today's date is 2026-11-29, if it matters.\n\
         ### Output:\nJSON format: {{ \"title\": \"your concise title here\" }}\n\
         ### Chat History:\n<chat_history>\n{chat}\n</chat_history>"
    );
    json!({
        "model": "auto",
        "stream": false,
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": template}],
    })
}

#[tokio::test]
async fn open_webui_title_task_is_answered_by_rules_and_the_user_turn_is_routed() {
    let searxng = FakeSearxng::start().await.unwrap();
    let searx_url = searxng.url();
    let app = spawn_app_with(spawn_fake().await, |c| c.web.searxng_url = searx_url).await;
    let chat = "USER: 今日の千葉県柏市の天気を教えて\nASSISTANT: 柏市は晴れ時々曇、最高31℃です。";

    for with_header in [true, false] {
        let mut req = app
            .http
            .post(app.url("/v1/chat/completions"))
            .header("X-OpenWebUI-Chat-Id", "chat-kashiwa");
        if with_header {
            req = req.header("X-OpenWebUI-Task", "title_generation");
        }
        let res = req.json(&title_request(chat)).send().await.unwrap();
        assert_eq!(res.status(), 200);
        let id = res.headers()["x-coordinator-task-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(res.headers()["x-coordinator-queue"], "tasks:utility");
        let body: Value = res.json().await.unwrap();
        let content = body["choices"][0]["message"]["content"].as_str().unwrap();
        // Open WebUI slices from the first `{` to the last `}` and reads `title`.
        let json_part = &content[content.find('{').unwrap()..=content.rfind('}').unwrap()];
        let parsed: Value = serde_json::from_str(json_part).unwrap();
        let title = parsed["title"].as_str().unwrap();
        assert!(!title.is_empty() && title.chars().count() <= 60, "{title}");
        assert!(
            title.contains("柏") || title.contains("天気"),
            "a Japanese chat gets a Japanese title: {title}"
        );

        let task: Value = app.get(&format!("/tasks/{id}")).await.json().await.unwrap();
        assert_eq!(task["internal_task"], "title_generation");
        assert_eq!(task["web_search"], false);
        assert_eq!(task["status"], "done");
        assert_eq!(task["thread_id"], "chat-kashiwa");
    }
    assert!(
        searxng.queries().is_empty(),
        "a task template never reaches SearXNG"
    );
    assert_eq!(
        app.fake.requests_to("/api/chat").len(),
        0,
        "no model was used"
    );

    // The user's own turn in the same thread is a weather question: the web lane.
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-OpenWebUI-Chat-Id", "chat-kashiwa")
        .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "今日の千葉県柏市の天気を教えて"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-coordinator-queue"], "tasks:web");
    assert_eq!(searxng.queries().len(), 1);
}

#[tokio::test]
async fn preview_shows_the_decision_for_a_prompt_and_for_an_open_webui_body() {
    let app = spawn_app_with(spawn_fake().await, |_| {}).await;
    let d: Value = app
        .get("/route/preview?prompt=%E4%BB%8A%E6%97%A5%E5%AD%A6%E3%82%93%E3%81%A0Python%E3%82%B3%E3%83%BC%E3%83%89%E3%81%AE%E5%AE%9F%E8%A3%85%E3%82%92%E5%BE%A9%E7%BF%92%E3%81%97%E3%81%9F%E3%81%84")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(d["auto_web_search"], false, "{d}");
    assert_eq!(d["domain"], "code", "{d}");
    assert!(d["reasons"].as_array().unwrap().len() >= 2);

    let d: Value = app
        .post("/route/preview", json!({"prompt": "最新ニュースを教えて"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(d["auto_web_search"], true, "{d}");
    assert_eq!(d["queue"], "tasks:web");

    let res = app
        .http
        .post(app.url("/route/preview"))
        .header("X-OpenWebUI-Task", "tags_generation")
        .json(&json!({"model": "auto", "stream": false, "messages": [{"role": "user", "content": "### Task:\nGenerate 1-3 broad tags.\n### Output:\nJSON format: { \"tags\": [\"tag1\"] }\n### Chat History:\n<chat_history>\nUSER: latest news today\n</chat_history>"}]}))
        .send()
        .await
        .unwrap();
    let d: Value = res.json().await.unwrap();
    assert_eq!(d["internal_task"], "tags_generation", "{d}");
    assert_eq!(d["auto_web_search"], false);
    let answer: Value = serde_json::from_str(d["rules_answer"].as_str().unwrap()).unwrap();
    assert!(answer["tags"].is_array());
    // Nothing ran.
    assert_eq!(app.fake.requests_to("/api/chat").len(), 0);
}
