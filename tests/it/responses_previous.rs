//! `previous_response_id` on `POST /v1/responses`, answered from the task store: a stateless
//! backend of either kind gets the whole conversation (the earlier turns, their answers and
//! function calls), in the same thread; a response that cannot be continued (unknown,
//! another person's, not stored) is a clear error that writes no row.

use coordinator::config::BackendKind;
use serde_json::{Value, json};

use crate::helpers::{MODEL, read_sse};
use crate::people::household_keys;
use crate::responses::{TOOL_MODEL, app_of, output_text, sent_messages, task_rows};

#[tokio::test]
async fn previous_response_id_gives_a_stateless_backend_the_whole_conversation() {
    for kind in [BackendKind::Ollama, BackendKind::Openai] {
        let app = app_of(kind, |_| {}).await;
        let first: Value = app
            .post(
                "/v1/responses",
                json!({"model": MODEL, "input": "my name is Ada"}),
            )
            .await
            .json()
            .await
            .unwrap();
        let res = app
            .post(
                "/v1/responses",
                json!({"model": MODEL, "input": "what is my name?", "previous_response_id": first["id"], "stream": true}),
            )
            .await;
        assert_eq!(res.status(), 200);
        let second_task = res.headers()["x-coordinator-task-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let events = read_sse(res).await;
        let completed = &events.last().unwrap().1["response"];
        assert_eq!(completed["previous_response_id"], first["id"]);
        let sent = sent_messages(&app, kind);
        let turns: Vec<(&str, &str)> = sent
            .iter()
            .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let answer = format!("Echo from {MODEL}: my name is Ada");
        assert_eq!(
            turns[..2],
            [("user", "my name is Ada"), ("assistant", answer.as_str())],
            "{kind:?}"
        );
        // The new prompt comes last (after what memory may recall, as for any chat).
        assert_eq!(turns.len(), 3, "{turns:?}");
        assert_eq!(turns[2].0, "user");
        assert!(turns[2].1.ends_with("what is my name?"), "{turns:?}");
        // One conversation: the same thread, and the row keeps only the new prompt.
        let first_task = first["id"].as_str().unwrap().strip_prefix("resp_").unwrap();
        let a = app.finished_task(first_task).await;
        let b = app.finished_task(&second_task).await;
        assert_eq!(a["thread_id"], b["thread_id"]);
        assert_eq!(b["prompt"], "what is my name?");
    }
}

#[tokio::test]
async fn a_function_call_and_its_output_go_round_through_previous_response_id() {
    for kind in [BackendKind::Ollama, BackendKind::Openai] {
        let app = app_of(kind, |_| {}).await;
        let tools = json!([{"type": "function", "name": "get_weather", "description": "Weather for a city",
                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
        let first: Value = app
            .post(
                "/v1/responses",
                json!({"model": TOOL_MODEL, "input": r#"call tool get_weather {"city":"Kashiwa"}"#, "tools": tools}),
            )
            .await
            .json()
            .await
            .unwrap();
        let call = first["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["type"] == "function_call")
            .unwrap_or_else(|| panic!("{kind:?}: {first}"))
            .clone();
        assert_eq!(call["name"], "get_weather");
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["city"], "Kashiwa");
        assert_eq!(first["tools"], tools, "the response repeats the tools");

        let res = app
            .post(
                "/v1/responses",
                json!({"model": TOOL_MODEL, "previous_response_id": first["id"], "tools": tools, "stream": true,
                       "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 24C"}]}),
            )
            .await;
        assert_eq!(res.status(), 200);
        let events = read_sse(res).await;
        let text = output_text(&events.last().unwrap().1["response"]);
        assert!(
            text.contains("get_weather") && text.contains("sunny, 24C"),
            "{kind:?}: {text}"
        );
        let sent = sent_messages(&app, kind);
        assert_eq!(
            sent.len(),
            3,
            "the question, the call, its output: {sent:?}"
        );
    }
}

#[tokio::test]
async fn a_response_that_cannot_be_continued_is_a_clear_error_and_writes_no_row() {
    let app = app_of(BackendKind::Ollama, household_keys).await;
    let post = |key: &'static str, body: Value| {
        app.http
            .post(app.url("/v1/responses"))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let bob = "bob-user-key-0000002";
    let alice = "alice-admin-key-0001";
    let kept: Value = post(bob, json!({"model": MODEL, "input": "remember this"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let unkept: Value = post(
        bob,
        json!({"model": MODEL, "input": "not this", "store": false}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(unkept["store"], false);
    let rows = task_rows(&app).await;
    let cases = [
        (alice, kept["id"].clone(), "there is no response"),
        (
            bob,
            json!("resp_0190f5b2-7c1e-7a3b-8c4d-5e6f7a8b9c0d"),
            "there is no response",
        ),
        (bob, json!("chatcmpl-1"), "there is no response"),
        (bob, unkept["id"].clone(), "was not stored"),
    ];
    for (key, id, says) in cases {
        let res = post(
            key,
            json!({"model": MODEL, "input": "go on", "previous_response_id": id}),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), 400, "{id}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["param"], "previous_response_id", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    assert_eq!(
        task_rows(&app).await,
        rows,
        "no refused request wrote a row"
    );
}
