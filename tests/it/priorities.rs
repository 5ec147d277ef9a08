//! Priorities on a realistic single-slot machine: interactive turns go before queued
//! background and batch work, waiting promotes work so batch jobs are not starved, and
//! `X-Coordinator-Priority` / `/route`'s `priority` set the class (a bad value is a 400
//! that writes nothing).

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};
use crate::household::{CHAT, CODER, machine, stats_until};

/// One machine with one slot; Open WebUI's background tasks are sent to `CHAT`.
async fn app(answer_tokens: (usize, usize), eval_tps: f64, aging_s: u64) -> TestApp {
    spawn_app_with(machine(answer_tokens, eval_tps).await, |c| {
        c.backends[0].parallel = 1;
        c.internal_tasks.mode = coordinator::config::InternalTasksMode::Model;
        c.internal_tasks.model = Some(CHAT.to_owned());
        c.scheduler.aging_s = aging_s;
    })
    .await
}

/// `POST /route` with `headers`; the task id.
async fn route(app: &TestApp, body: Value, headers: &[(&str, &str)]) -> String {
    let mut req = app.http.post(app.url("/route")).json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    body["task_id"].as_str().unwrap().to_owned()
}

/// Which of `prompts` each generation on the machine answered, in the order they ran.
fn ran(app: &TestApp, prompts: &[&str]) -> Vec<String> {
    app.fake
        .generations()
        .iter()
        .map(|g| {
            prompts
                .iter()
                .find(|p| g.last_user.contains(*p))
                .map_or_else(|| g.last_user.clone(), |p| (*p).to_owned())
        })
        .collect()
}

/// The machine is busy with background work, more background work waits (asked for by
/// the body, by the header, and an Open WebUI title task sent to the model), then a person
/// asks: their turn runs next, after only the background generation already running.
#[tokio::test]
async fn an_interactive_turn_waits_for_at_most_one_background_generation() {
    let app = app((200, 200), 50.0, 600).await;
    let running = route(
        &app,
        json!({"prompt": "busy summary", "model": CHAT, "priority": "background"}),
        &[],
    )
    .await;
    stats_until(&app.fake, |s| s.requests >= 1).await;
    let by_body = route(
        &app,
        json!({"prompt": "condense memory", "model": CHAT, "priority": "background"}),
        &[],
    )
    .await;
    let by_header = route(
        &app,
        json!({"prompt": "rewrite the query", "model": CHAT}),
        &[("X-Coordinator-Priority", "background")],
    )
    .await;
    let title = route(
        &app,
        json!({"prompt": "make a title for the chat"}),
        &[("X-OpenWebUI-Task", "title_generation")],
    )
    .await;
    let person = route(&app, json!({"prompt": "person asks", "model": CHAT}), &[]).await;

    for id in [&running, &by_body, &by_header, &title, &person] {
        assert_eq!(app.finished_task(id).await["status"], "done");
    }
    let order = ran(
        &app,
        &[
            "busy summary",
            "person asks",
            "condense memory",
            "rewrite the query",
            "make a title",
        ],
    );
    assert_eq!(
        order,
        [
            "busy summary",
            "person asks",
            "condense memory",
            "rewrite the query",
            "make a title"
        ],
        "the person's turn runs right after the running generation"
    );
    for (id, priority) in [
        (&running, "background"),
        (&by_header, "background"),
        (&title, "background"),
        (&person, "interactive"),
    ] {
        assert_eq!(app.task(id).await["priority"], priority, "{id}");
    }
    assert_eq!(app.task(&title).await["internal_task"], "title_generation");
    app.stop().await;
}

/// Interactive turns keep arriving (one waits at all times); a batch job queued among
/// them runs once it has waited two aging steps, while interactive work still waits.
#[tokio::test]
async fn a_batch_job_is_not_starved_by_interactive_work() {
    // 100 tokens at 10 tokens/s: 10 s of life, 0.1 s here; aging every 1 s.
    let app = app((100, 100), 10.0, 1).await;
    let ask = |n: usize| json!({"prompt": format!("person turn {n}"), "model": CHAT});
    let mut waiting = std::collections::VecDeque::new();
    waiting.push_back(route(&app, ask(0), &[]).await);
    stats_until(&app.fake, |s| s.requests >= 1).await;
    let batch = route(
        &app,
        json!({"prompt": "batch backfill", "model": CHAT, "priority": "batch"}),
        &[],
    )
    .await;
    let mut asked = 1;
    for _ in 0..2 {
        waiting.push_back(route(&app, ask(asked), &[]).await);
        asked += 1;
    }
    // Each time a turn ends, another arrives: interactive work never runs out.
    while app.task(&batch).await["status"] != "done" {
        assert!(asked < 200, "the batch job never ran");
        let next = waiting.pop_front().unwrap();
        assert_eq!(app.finished_task(&next).await["status"], "done");
        waiting.push_back(route(&app, ask(asked), &[]).await);
        asked += 1;
    }
    let order = ran(&app, &["batch backfill"]);
    let at = order.iter().position(|p| p == "batch backfill").unwrap();
    assert!(
        at >= 5,
        "interactive turns queued after the batch job went first: {order:?}"
    );
    assert!(
        !waiting.is_empty(),
        "interactive work was still waiting when the batch job ran"
    );
    assert_eq!(app.task(&batch).await["priority"], "batch");
    for id in waiting {
        app.finished_task(&id).await;
    }
    app.stop().await;
}

/// A bad priority, in the header on a chat front door or in `/route`'s body, is a 400 that
/// names it, and nothing is recorded or run.
#[tokio::test]
async fn a_bad_priority_is_refused_by_name_and_records_nothing() {
    let app = app((10, 10), 50.0, 60).await;
    let chat = json!({"model": CHAT, "messages": [{"role": "user", "content": "hi"}]});
    for path in ["/v1/chat/completions", "/api/chat", "/route"] {
        let body = if path == "/route" {
            json!({"prompt": "hi"})
        } else {
            chat.clone()
        };
        let res = app
            .http
            .post(app.url(path))
            .header("X-Coordinator-Priority", "urgent")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{path}");
        let text = res.text().await.unwrap();
        assert!(text.contains("X-Coordinator-Priority"), "{path}: {text}");
        assert!(text.contains("urgent"), "{path}: {text}");
    }
    let res = app
        .post("/route", json!({"prompt": "hi", "priority": "soon"}))
        .await;
    assert_eq!(res.status(), 400);
    let text = res.text().await.unwrap();
    assert!(text.contains("priority"), "{text}");
    let rows = app.rows().await;
    assert!(rows.is_empty(), "{rows:?}");
    assert!(app.fake.generations().is_empty());
    // A good one is taken, on a chat front door too.
    let res = app
        .http
        .post(app.url("/v1/chat/completions"))
        .header("X-Coordinator-Priority", "batch")
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(app.task(&id).await["priority"], "batch");
    app.stop().await;
}

/// A one-model machine answers a person; background work for another model arrives, then
/// the person's next turn. The background job would push out the model the person is
/// using, so it waits in Coordinator's queue (it is not sent to the machine to wait there
/// for the model to go) and runs once nobody needs that model: the machine loads each
/// model once.
#[tokio::test]
async fn background_work_never_evicts_a_model_a_person_needs() {
    // 200 tokens at 5 tokens/s: 40 s of life, 0.4 s here.
    let app = spawn_app_with(machine((200, 200), 5.0).await, |c| {
        c.backends[0].parallel = 2;
        c.backends[0].max_loaded = Some(1);
    })
    .await;
    let first = route(&app, json!({"prompt": "person first", "model": CHAT}), &[]).await;
    stats_until(&app.fake, |s| s.requests >= 1).await;
    let background = route(
        &app,
        json!({"prompt": "background on the coder", "model": CODER, "priority": "background"}),
        &[],
    )
    .await;
    let second = route(&app, json!({"prompt": "person second", "model": CHAT}), &[]).await;
    for id in [&first, &second, &background] {
        assert_eq!(app.finished_task(id).await["status"], "done", "{id}");
    }
    let order = ran(
        &app,
        &["person first", "person second", "background on the coder"],
    );
    assert_eq!(
        order,
        ["person first", "person second", "background on the coder"]
    );
    let generations = app.fake.generations();
    // Each model loaded once: the person's model was not pushed out between their turns.
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 1), "{stats:?}");
    // The background job reached the machine only after the person's turns ended there.
    let person_done = generations[1].arrived + generations[1].waited;
    assert!(
        generations[2].arrived >= person_done,
        "the background job was sent while the person's model was needed: {generations:?}"
    );
    app.stop().await;
}

/// With nobody needing the resident model, background work for another model runs at
/// once: the guard holds work back only for people.
#[tokio::test]
async fn background_work_loads_its_model_when_nobody_needs_the_resident_one() {
    let app = spawn_app_with(machine((20, 20), 50.0).await, |c| {
        c.backends[0].parallel = 1;
        c.backends[0].max_loaded = Some(1);
    })
    .await;
    let person = route(&app, json!({"prompt": "person asks", "model": CHAT}), &[]).await;
    assert_eq!(app.finished_task(&person).await["status"], "done");
    let background = route(
        &app,
        json!({"prompt": "background on the coder", "model": CODER, "priority": "background"}),
        &[],
    )
    .await;
    assert_eq!(app.finished_task(&background).await["status"], "done");
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 1), "{stats:?}");
    app.stop().await;
}

/// `[internal_tasks] mode = "resident"`: an Open WebUI title task sent to the model a
/// person is using is answered there (it is resident: nothing loads); one sent to a model
/// that is not resident is answered by rules, and the machine loads nothing for it.
#[tokio::test]
async fn resident_mode_answers_background_tasks_only_where_a_model_is_resident() {
    let app = spawn_app_with(machine((20, 20), 50.0).await, |c| {
        c.backends[0].parallel = 1;
        c.internal_tasks.mode = coordinator::config::InternalTasksMode::Resident;
    })
    .await;
    let person = route(&app, json!({"prompt": "person asks", "model": CHAT}), &[]).await;
    assert_eq!(app.finished_task(&person).await["status"], "done");
    let title = |model: &str| json!({"prompt": format!("### Task:\nGenerate a title for the chat on {model}"), "model": model});
    let on_resident = route(
        &app,
        title(CHAT),
        &[("X-OpenWebUI-Task", "title_generation")],
    )
    .await;
    let task = app.finished_task(&on_resident).await;
    assert_eq!(task["status"], "done");
    assert_eq!(task["model"], CHAT, "{task}");
    assert_eq!(task["priority"], "background");
    let on_cold = route(
        &app,
        title(CODER),
        &[("X-OpenWebUI-Task", "title_generation")],
    )
    .await;
    let task = app.finished_task(&on_cold).await;
    assert_eq!(task["status"], "done");
    assert_eq!(task["model"], "rules", "{task}");
    let stats = app.fake.stats();
    assert_eq!(stats.loads, 1, "only the person's model loaded: {stats:?}");
    assert_eq!(
        ran(&app, &["person asks", "Generate a title"]),
        ["person asks", "Generate a title"],
        "the title on the resident model ran there, the other did not reach the machine"
    );
    app.stop().await;
}

/// People take turns on a busy one-slot machine (embedded mode; [`people_take_turns`]).
#[tokio::test]
async fn people_take_turns_on_a_busy_machine() {
    use crate::people::{Household, household_keys};

    let app = spawn_app_with(crate::helpers::spawn_fake().await, |c| {
        household_keys(c);
        c.backends[0].parallel = 1;
    })
    .await;
    let h = Household {
        base: format!("http://{}", app.addr),
        http: reqwest::Client::new(),
    };
    people_take_turns(&h, &app.fake).await;
    app.stop().await;
}

/// While Alice's answer holds the one slot of `fake`'s machine, u1 queues three chats and
/// then u2 one. u2's goes right after u1's first, before u1's second and third: `GET
/// /tasks/{id}` shows those places while they wait, and the machine runs them in that
/// order once it is free. The same scenario runs in cluster mode.
pub async fn people_take_turns(
    h: &crate::people::Household,
    fake: &coordinator::testkit::fake_llm::FakeLlmServer,
) {
    use crate::people::{ADMIN, U1, U2};
    use reqwest::Method;

    fake.update_knobs(|k| k.stall_after = Some(1));
    let (holding_id, held) =
        crate::helpers::holding_the_slot(h.request(ADMIN, Method::POST, "/v1/chat/completions"))
            .await;

    let route = async |who, prompt: &str| {
        let (status, body) = h.post(who, "/route", json!({"prompt": prompt})).await;
        assert_eq!(status, 200, "{body}");
        body["task_id"].as_str().unwrap().to_owned()
    };
    let mut u1s = Vec::new();
    for prompt in ["u1 first", "u1 second", "u1 third"] {
        u1s.push(route(U1, prompt).await);
    }
    let u2s = route(U2, "u2 only").await;

    let waiting = [
        (U1, &u1s[0], 1),
        (U2, &u2s, 2),
        (U1, &u1s[1], 3),
        (U1, &u1s[2], 4),
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut places = Vec::new();
    // In cluster mode a task's place shows once its job is in its lane's stream.
    while places.len() < waiting.len() {
        places.clear();
        for (who, id, _) in waiting {
            let (_, task) = h.get(who, &format!("/tasks/{id}")).await;
            assert_eq!(task["status"], "queued", "{task}");
            if task["position"].is_null() {
                assert!(std::time::Instant::now() < deadline, "no place: {task}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                break;
            }
            places.push(task["position"].clone());
        }
    }
    let want: Vec<Value> = waiting.iter().map(|(_, _, place)| json!(place)).collect();
    assert_eq!(places, want, "u1 first, u2 only, u1 second, u1 third");

    fake.update_knobs(|k| k.stall_after = None);
    let (status, said) = h
        .post(ADMIN, &format!("/tasks/{holding_id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{said}");
    drop(held);
    for (who, id) in [(U1, &u1s[0]), (U1, &u1s[1]), (U1, &u1s[2]), (U2, &u2s)] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        h.done(who, id, deadline).await;
    }
    let order: Vec<String> = fake
        .requests_to("/api/chat")
        .iter()
        .filter_map(|r| {
            let body = r.body.as_ref()?;
            let last = body["messages"].as_array()?.last()?;
            let text = last["content"].as_str()?;
            ["u1 first", "u1 second", "u1 third", "u2 only"]
                .into_iter()
                .find(|p| text.contains(p))
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(order, ["u1 first", "u2 only", "u1 second", "u1 third"]);
}
