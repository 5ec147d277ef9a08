//! RAG follow-ups: "and what about its schedule?" is rewritten into a standalone retrieval
//! query by the utility model, from the history, as the web lane does; the documents are
//! searched with that query while the model is asked the user's own words. The rewriter
//! serves the RAG lane with web search switched off too.

use coordinator::testkit::fake_llm::{FakeLlm, Script};
use coordinator::testkit::log_capture::Capture;
use serde_json::{Value, json};

use super::{app_with_notes_on, messages};
use crate::helpers::{MODEL, task_id};

const REWRITER: &str = "rewriter:1b";
const FOLLOW_UP: &str = "and what about its schedule?";

// A current-thread runtime: the app's tasks run on this thread, under the subscriber set
// for it alone, so the lane's log line with the query it searched is seen here.
#[tokio::test]
async fn a_follow_up_is_searched_with_the_rewritten_query() {
    let capture = Capture::default();
    let _subscriber = capture.set_default();
    let fake = FakeLlm::builder()
        .model(MODEL)
        .model(REWRITER)
        .spawn()
        .await
        .unwrap();
    fake.set_script(REWRITER, Some(Script::text("Query: NAS backup schedule")));
    let app = app_with_notes_on(fake, |c| {
        c.web.enabled = false;
        c.routing.default_model = Some(MODEL.into());
        c.internal_tasks.model = Some(REWRITER.into());
    })
    .await;
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": "rag:notes", "messages": [
                {"role": "user", "content": "What do my notes say about the NAS backup?"},
                {"role": "assistant", "content": "It goes to the external USB disk [1]."},
                {"role": "user", "content": FOLLOW_UP},
            ]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-coordinator-queue"], "tasks:rag");
    let task_id = task_id(&res);
    let body: Value = res.json().await.unwrap();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();

    // The rewriter was asked, with the history and the follow-up.
    let asked: Vec<Value> = app
        .fake
        .requests_to("/api/chat")
        .into_iter()
        .filter_map(|r| r.body)
        .collect();
    let rewrite = asked
        .iter()
        .find(|b| b["model"] == REWRITER)
        .expect("the rewriter is asked");
    let rewrite_text = rewrite.to_string();
    assert!(
        rewrite_text.contains("What do my notes say about the NAS backup?")
            && rewrite_text.contains(FOLLOW_UP),
        "{rewrite_text}"
    );
    // The documents were searched with its (cleaned) answer, in the task's span.
    let retrieved: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|e| e.message() == "documents retrieved")
        .collect();
    assert_eq!(retrieved.len(), 1, "{retrieved:#?}");
    assert_eq!(
        retrieved[0].event.get("query").map(String::as_str),
        Some("NAS backup schedule")
    );
    assert_eq!(retrieved[0].spans.get("task_id"), Some(&task_id));
    // The answering model gets the user's own question and the chunk the query found.
    let answer = asked.iter().rfind(|b| b["model"] == MODEL).unwrap();
    let user = messages(answer).last().unwrap().1.clone();
    assert!(
        user.starts_with(&format!("Question: {FOLLOW_UP}")),
        "{user}"
    );
    assert!(
        user.contains("<<<DOCUMENT 1>>>\nSource: notes/backup.md › Backup › NAS › Schedule"),
        "{user}"
    );
    assert!(
        text.contains("Sources:\n- [1] notes/backup.md › Backup › NAS › Schedule"),
        "{text}"
    );
    let task = app.task(&task_id).await;
    assert_eq!(
        task["prompt"], FOLLOW_UP,
        "the stored prompt is the user's own"
    );
    app.stop().await;
}
