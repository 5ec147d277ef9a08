//! What a person sees while a chat waits: a streamed chat queued behind a long answer on a
//! one-slot realistic machine gets its head at once and keep-alives with its place and
//! expected wait (OpenAI SSE comments, Ollama empty chunks), `GET /tasks/{id}` shows the
//! place, a failure while queued comes in the stream in the API's error shape, and with
//! `routing_info = "header_footer"` the header says why the answer waited.

use std::time::Duration;

use coordinator::config::{Config, RoutingInfo};
use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, Realism, Speed};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};

const CHAT: &str = "qwen2.5:7b";

/// One slot; an answer of `answer_tokens` at 10 tokens a second, 100 times faster than
/// life (1000 tokens: 1 s here); a 3 s load (30 ms here). Long enough that a second task
/// is still queued when `queued_head_ms` (50 ms) is over, on a loaded test machine too.
async fn slow_machine(answer_tokens: usize) -> FakeLlmServer {
    FakeLlm::builder()
        .model(CHAT)
        .realistic(Realism {
            time_scale: 100.0,
            speed: Speed {
                load: Duration::from_secs(3),
                prompt_tps: 1000.0,
                eval_tps: 10.0,
            },
            answer_tokens: (answer_tokens, answer_tokens),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

async fn app_on(fake: FakeLlmServer, tweak: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_with(fake, |c| {
        c.backends[0].parallel = 1;
        c.timeouts.queued_head_ms = 50;
        tweak(c);
    })
    .await
}

/// A streamed request on `path`, answered 200; its task id and body.
async fn stream(app: &TestApp, path: &str, prompt: &str) -> (String, Body) {
    stream_to(app, path, CHAT, prompt).await
}

/// [`stream`] for `model`.
async fn stream_to(app: &TestApp, path: &str, model: &str, prompt: &str) -> (String, Body) {
    let res = app
        .post(
            path,
            json!({"model": model, "stream": true, "messages": [{"role": "user", "content": prompt}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    (id, res.bytes_stream().map(|b| b.unwrap().to_vec()).boxed())
}

type Body = futures::stream::BoxStream<'static, Vec<u8>>;

/// Reads `body` until `done` holds for what was read; everything read.
async fn read_until(body: &mut Body, done: impl Fn(&str) -> bool) -> String {
    let mut seen = Vec::new();
    // A frame may end inside a character: the text is whole once the check holds.
    while !done(&String::from_utf8_lossy(&seen)) {
        let more = tokio::time::timeout(Duration::from_secs(30), body.next())
            .await
            .expect("the stream went quiet")
            .unwrap_or_else(|| panic!("the stream ended first: {seen:?}"));
        seen.extend(more);
    }
    String::from_utf8(seen).unwrap()
}

/// A long answer running in the machine's only slot (its first token is in).
async fn occupy(app: &TestApp, path: &str) -> Body {
    let (_, mut body) = stream(app, path, "tell me a long story").await;
    read_until(&mut body, |s| {
        s.contains("\"content\":\"") && s.matches("\"content\"").count() > 1
    })
    .await;
    body
}

/// The text of an SSE answer's content deltas.
fn sse_text(body: &str) -> String {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn a_queued_stream_gets_its_head_and_keep_alives_with_its_place_before_its_first_token() {
    let app = app_on(slow_machine(2000).await, |_| {}).await;
    let _running = occupy(&app, "/v1/chat/completions").await;
    let (id, mut body) = stream(&app, "/v1/chat/completions", "and a short one").await;
    let head = read_until(&mut body, |s| s.contains("\n\n")).await;
    let comment = head.lines().next().unwrap();
    let eta: u64 = comment
        .strip_prefix(": queued position=1 eta_s=")
        .unwrap_or_else(|| panic!("not a queued comment: {head:?}"))
        .parse()
        .unwrap();
    assert!(eta >= 1, "{comment}");

    // Meanwhile the task's page says where it waits.
    let task = app.task(&id).await;
    assert_eq!(task["status"], "queued", "{task}");
    assert_eq!(task["position"], 1, "{task}");
    assert!(task["eta_s"].as_u64().is_some(), "{task}");

    let rest = read_until(&mut body, |s| s.contains("data: [DONE]")).await;
    let all = head + &rest;
    let first_data = all.find("data: ").unwrap();
    assert!(
        all[..first_data].starts_with(": queued position=1"),
        "{all}"
    );
    assert!(!sse_text(&all).is_empty(), "{all}");
    let done = app.finished_task(&id).await;
    assert_eq!(done["status"], "done", "{done}");
    let task = app.task(&id).await;
    assert!(
        task.get("position").is_none() && task.get("eta_s").is_none(),
        "{task}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_queued_ollama_stream_gets_empty_chunks_before_its_first_token() {
    let app = app_on(slow_machine(2000).await, |_| {}).await;
    let _running = occupy(&app, "/api/chat").await;
    let (_, mut body) = stream(&app, "/api/chat", "and a short one").await;
    let all = read_until(&mut body, |s| s.contains("\"done\":true")).await;
    let lines: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let first = &lines[0];
    assert_eq!(
        first["message"],
        json!({"role": "assistant", "content": ""}),
        "{first}"
    );
    assert_eq!(
        (first["done"].as_bool(), first["model"].as_str()),
        (Some(false), Some(CHAT))
    );
    let text: String = lines
        .iter()
        .filter_map(|l| l["message"]["content"].as_str())
        .collect();
    assert!(!text.is_empty(), "{all}");
    app.stop().await;
}

#[tokio::test]
async fn a_failure_while_queued_comes_in_the_stream_in_the_apis_error_shape() {
    // The long answer holds the slot for 3 s; the route timeout is 1 s.
    let app = app_on(slow_machine(3000).await, |c| c.timeouts.route_s = 1).await;
    let _running = occupy(&app, "/v1/chat/completions").await;
    let (id, mut body) = stream(&app, "/v1/chat/completions", "and a short one").await;
    let all = read_until(&mut body, |s| s.contains("data: [DONE]")).await;
    assert!(all.starts_with(": queued position=1"), "{all}");
    let error: Value = all
        .lines()
        .find_map(|l| l.strip_prefix("data: {"))
        .map(|d| serde_json::from_str(&format!("{{{d}")).unwrap())
        .unwrap_or_else(|| panic!("no error event: {all}"));
    assert_eq!(error["error"]["code"], "cluster_busy", "{error}");
    assert_eq!(error["error"]["type"], "server_error", "{error}");
    assert_eq!(error["error"]["task_id"], id.as_str(), "{error}");

    // The slot is still taken (and the task above still waits): the Ollama shape.
    let (_, mut body) = stream(&app, "/api/chat", "and a short one").await;
    let all = read_until(&mut body, |s| s.contains("\"error\"")).await;
    let last: Value = serde_json::from_str(all.lines().last().unwrap()).unwrap();
    assert!(last["error"].as_str().unwrap().contains("busy"), "{last}");
    app.stop().await;
}

#[tokio::test]
async fn the_header_says_the_answer_waited_or_loaded_in_the_prompts_language_and_history_drops_it()
{
    let app = app_on(slow_machine(2000).await, |c| {
        c.server.routing_info = RoutingInfo::HeaderFooter;
        c.history.enabled = true;
    })
    .await;
    // The first answer loads the model.
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": CHAT, "messages": [{"role": "user", "content": "hello"}]}),
        )
        .await;
    let body: Value = res.json().await.unwrap();
    let answer = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        answer.contains("- ⏳ moon: loading qwen2.5:7b, about "),
        "{answer}"
    );

    // The next turn sends it back as history (its text cut short, so the history budget
    // keeps it): the backend sees the text without the decoration.
    let header_end = answer.find("\n\n").unwrap() + 2;
    let footer_start = answer.rfind("\n\n---\n*domain: ").unwrap();
    let answer = format!(
        "{}It was a short answer.{}",
        &answer[..header_end],
        &answer[footer_start..]
    );
    app.fake.clear_requests();
    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": CHAT, "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": "and again"},
            ]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let sent = app.last_backend_body("/api/chat");
    let earlier = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("no history: {sent}"));
    assert_eq!(earlier["content"], "It was a short answer.", "{sent}");

    // A Japanese turn queued behind a long answer says so in Japanese.
    let _running = occupy(&app, "/v1/chat/completions").await;
    let (_, mut body) = stream(&app, "/v1/chat/completions", "短い話をしてください").await;
    let all = read_until(&mut body, |s| s.contains("data: [DONE]")).await;
    let text = sse_text(&all);
    assert!(text.contains("- ⏳ 1 件の回答の後ろで "), "{text}");
    assert!(text.contains(" 秒待ちました\n"), "{text}");
    app.stop().await;
}

#[tokio::test]
async fn a_queued_stream_whose_client_goes_away_cancels_its_task() {
    let app = app_on(slow_machine(2000).await, |_| {}).await;
    let _running = occupy(&app, "/v1/chat/completions").await;
    let (id, mut body) = stream(&app, "/v1/chat/completions", "and a short one").await;
    read_until(&mut body, |s| s.starts_with(": queued position=1")).await;
    drop(body);
    let row = app.finished_task(&id).await;
    assert_eq!(row["status"], "cancelled", "{row}");
    let error = row["error"].as_str().unwrap();
    assert!(error.contains("the client went away"), "{row}");
    // It never reached the machine: only the long answer did.
    assert_eq!(app.fake.requests_to("/api/chat").len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn queued_responses_and_messages_streams_open_then_keep_alive_before_their_first_token() {
    let cases = [
        (
            "/v1/responses",
            json!({"model": CHAT, "stream": true, "input": "and a short one"}),
            (
                "event: response.created",
                ": queued position=1",
                "event: response.completed",
            ),
        ),
        (
            "/v1/messages",
            json!({"model": CHAT, "stream": true, "max_tokens": 50,
                   "messages": [{"role": "user", "content": "and a short one"}]}),
            ("event: message_start", "event: ping", "event: message_stop"),
        ),
    ];
    for (path, request, (opening, keep_alive, end)) in cases {
        let app = app_on(slow_machine(2000).await, |_| {}).await;
        let _running = occupy(&app, "/v1/chat/completions").await;
        let res = app.post(path, request).await;
        assert_eq!(res.status(), 200);
        let mut body: Body = res.bytes_stream().map(|b| b.unwrap().to_vec()).boxed();
        let head = read_until(&mut body, |s| s.contains(keep_alive)).await;
        assert!(head.starts_with(opening), "{path}: {head}");
        assert!(!head.contains("delta"), "no token yet: {head}");
        let rest = read_until(&mut body, |s| s.contains(end)).await;
        assert!(rest.contains("delta"), "{path}: {rest}");
        app.stop().await;
    }
}

/// The expected wait counts what the machine owes first in another lane, as placement
/// does: behind a running answer, a coder turn waits in the coder's lane, then a chat turn
/// in the chat lane. The machine takes the older coder turn first, so the chat turn's
/// expected wait holds the coder turn's whole answer on top of what the coder turn itself
/// waits for.
#[tokio::test]
async fn the_expected_wait_counts_what_the_machine_owes_in_another_lane() {
    use crate::household::{CODER, machine};
    // A machine known to keep one model, one slot; answers of 3000 tokens at 1 a second
    // (30 s here). Slow enough that the coder turn, which nothing is known of but what the
    // chat model shows, is expected to take whole seconds: the figures are whole seconds.
    let app = app_on(machine((3000, 3000), 1.0).await, |c| {
        c.backends[0].max_loaded = Some(1);
    })
    .await;
    let _running = occupy(&app, "/v1/chat/completions").await;
    let path = "/v1/chat/completions";
    let (coder, _coder_body) = stream_to(&app, path, CODER, "fix my script").await;
    let (chat, _chat_body) = stream_to(&app, path, CHAT, "and a short one").await;
    let eta = |task: Value| {
        assert_eq!(task["status"], "queued", "{task}");
        assert_eq!(task["position"], 1, "{task}");
        task["eta_s"].as_u64().unwrap()
    };
    let coder_eta = eta(app.task(&coder).await);
    let chat_eta = eta(app.task(&chat).await);
    assert!(
        chat_eta > coder_eta,
        "the chat turn waits for the coder turn's answer too: {chat_eta} s, {coder_eta} s"
    );
    app.stop().await;
}
