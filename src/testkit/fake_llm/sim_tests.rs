//! Tests of the realistic mode, one behaviour each: queueing, the queue limit, loading and
//! eviction, keep-alive and expiry, context truncation, the prompt cache, disconnects,
//! reported durations, and the OpenAI routes sharing the same machine.
//!
//! Machines here run 100 times faster than life, so a 3 s load takes 30 ms; assertions
//! compare simulated (reported) times, which do not depend on the wall clock, or order
//! events, never wall-clock durations.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use super::sim::{self, SimMessage};
use super::*;

const CHAT: &str = "qwen2.5:7b";
const CODER: &str = "qwen2.5-coder:7b";

fn realism() -> Realism {
    Realism {
        time_scale: 100.0,
        speed: Speed {
            load: Duration::from_secs(3),
            prompt_tps: 1000.0,
            eval_tps: 50.0,
        },
        answer_tokens: (20, 40),
        ..Realism::default()
    }
}

async fn machine(realism: Realism) -> FakeLlmServer {
    FakeLlm::builder()
        .model(CHAT)
        .model(CODER)
        .realistic(realism)
        .spawn()
        .await
        .unwrap()
}

fn chat(model: &str, text: &str, stream: bool) -> Value {
    json!({ "model": model, "stream": stream, "messages": [{ "role": "user", "content": text }] })
}

async fn post(server: &FakeLlmServer, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A whole `/api/chat` answer's final object.
async fn ollama_whole(server: &FakeLlmServer, body: Value) -> Value {
    let res = post(server, "/api/chat", &body).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// Reads a streamed `/api/chat` answer to its end: the content and the final line.
async fn ollama_stream(server: &FakeLlmServer, body: Value) -> (String, Value) {
    let res = post(server, "/api/chat", &body).await;
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let content = lines
        .iter()
        .filter_map(|l| l.pointer("/message/content")?.as_str())
        .collect();
    (content, lines.last().cloned().unwrap())
}

/// A duration Ollama reported (wall time), in the life time of [`realism`]'s scale.
fn nanos(v: &Value, key: &str) -> Duration {
    let wall = v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"));
    Duration::from_nanos(wall * realism().time_scale as u64)
}

/// Waits (bounded) until `check` holds for the machine's stats.
async fn stats_until(server: &FakeLlmServer, check: impl Fn(&SimStats) -> bool) -> SimStats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = server.stats();
        if check(&stats) {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "stats never got there: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn one_generation_at_a_time_the_rest_wait_in_order() {
    let server = machine(realism()).await;
    tokio::join!(
        ollama_whole(&server, chat(CHAT, "first question", false)),
        ollama_whole(&server, chat(CHAT, "second question", false)),
        ollama_whole(&server, chat(CHAT, "third question", false)),
    );
    let stats = server.stats();
    assert_eq!(stats.loads, 1);
    assert_eq!(stats.deepest_queue, 3, "all three were inside at once");
    let generations = server.generations();
    assert_eq!(generations.len(), 3);
    // Each started once the one before it had ended (in simulated time, 50 tokens/s and
    // 1000 prompt tokens/s; a microsecond of slack for rounding).
    let mut runs: Vec<(Duration, Duration)> = generations
        .iter()
        .map(|g| {
            let busy = Duration::from_secs_f64(
                f64::from(g.prompt_evaluated) / 1000.0 + f64::from(g.tokens) / 50.0,
            );
            (g.arrived + g.waited, busy)
        })
        .collect();
    runs.sort();
    for pair in runs.windows(2) {
        let (start, busy) = pair[0];
        assert!(
            pair[1].0 + Duration::from_micros(1) >= start + busy,
            "{runs:?}"
        );
    }
}

#[tokio::test]
async fn requests_waiting_for_the_same_load_start_in_arrival_order() {
    for _ in 0..5 {
        let server = machine(realism()).await;
        let (first, second) = tokio::join!(
            ollama_whole(&server, chat(CHAT, "came first", false)),
            async {
                stats_until(&server, |s| s.requests == 1).await;
                ollama_whole(&server, chat(CHAT, "came second", false)).await
            }
        );
        assert!(nanos(&first, "load_duration") >= Duration::from_secs(3));
        // The second waited for the load too, but not for its turn on the slot.
        assert!(nanos(&second, "load_duration") < nanos(&first, "load_duration"));
        let mut runs: Vec<(Duration, String)> = server
            .generations()
            .into_iter()
            .map(|g| (g.arrived + g.waited, g.last_user))
            .collect();
        runs.sort();
        let order: Vec<&str> = runs.iter().map(|(_, u)| u.as_str()).collect();
        assert_eq!(order, ["came first", "came second"]);
    }
}

#[tokio::test]
async fn parallel_slots_run_together() {
    let server = machine(Realism {
        parallel: 3,
        // 4 s of generation each: had they run one after another, the last would wait 8 s.
        answer_tokens: (200, 200),
        ..realism()
    })
    .await;
    let _ = tokio::join!(
        ollama_whole(&server, chat(CHAT, "one", false)),
        ollama_whole(&server, chat(CHAT, "two", false)),
        ollama_whole(&server, chat(CHAT, "three", false)),
    );
    // All three attached to the runner while it loaded, and none waited for a slot: each
    // one's wait is the load itself.
    for g in server.generations() {
        assert!(g.waited - g.load < Duration::from_secs(2), "{g:?}");
    }
}

#[tokio::test]
async fn past_max_queue_the_machine_answers_503() {
    let server = machine(Realism {
        max_queue: 1,
        ..realism()
    })
    .await;
    let first = tokio::spawn({
        let url = format!("{}/api/chat", server.base_url());
        async move {
            let res = reqwest::Client::new()
                .post(url)
                .json(&chat(CHAT, "long one", false))
                .send()
                .await
                .unwrap();
            res.status()
        }
    });
    stats_until(&server, |s| s.requests == 1).await;
    let res = post(&server, "/api/chat", &chat(CHAT, "no room", false)).await;
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["error"],
        "server busy, please try again.  maximum pending requests exceeded"
    );
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(server.stats().rejected, 1);
}

#[tokio::test]
async fn a_second_model_on_a_one_model_machine_evicts_the_first_and_pays_a_load() {
    let server = machine(realism()).await;
    let first = ollama_whole(&server, chat(CHAT, "hello", false)).await;
    assert!(nanos(&first, "load_duration") >= Duration::from_secs(3));
    let warm = ollama_whole(&server, chat(CHAT, "again", false)).await;
    assert!(
        nanos(&warm, "load_duration") < Duration::from_secs(1),
        "a resident model loads nothing: {warm}"
    );
    let other = ollama_whole(&server, chat(CODER, "code please", false)).await;
    assert!(nanos(&other, "load_duration") >= Duration::from_secs(3));
    let stats = server.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 1), "{stats:?}");
    assert_eq!(ps_models(&server).await, [CODER]);
}

#[tokio::test]
async fn a_request_for_another_model_waits_until_the_resident_one_is_idle() {
    let server = machine(realism()).await;
    let (busy, other) = tokio::join!(
        ollama_whole(&server, chat(CHAT, "a long answer", false)),
        async {
            stats_until(&server, |s| s.requests == 1).await;
            ollama_whole(&server, chat(CODER, "behind it", false)).await
        }
    );
    let busy_time = nanos(&busy, "total_duration");
    // The coder's wait (in load_duration, as Ollama reports it) covers the chat model's
    // whole generation and its own load.
    assert!(
        nanos(&other, "load_duration") >= Duration::from_secs(3) + busy_time / 2,
        "{busy} {other}"
    );
    assert_eq!(server.stats().evictions, 1);
}

#[tokio::test]
async fn two_resident_models_need_no_eviction() {
    let server = machine(Realism {
        max_loaded: 2,
        ..realism()
    })
    .await;
    ollama_whole(&server, chat(CHAT, "one", false)).await;
    ollama_whole(&server, chat(CODER, "two", false)).await;
    ollama_whole(&server, chat(CHAT, "three", false)).await;
    let stats = server.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 0), "{stats:?}");
}

#[tokio::test]
async fn keep_alive_zero_unloads_when_idle_and_an_empty_chat_loads_or_unloads() {
    let server = machine(realism()).await;
    let mut body = chat(CHAT, "bye", false);
    body["keep_alive"] = json!(0);
    ollama_whole(&server, body).await;
    assert_eq!(server.stats().expiries, 1);
    let ps = ps(&server).await;
    assert_eq!(ps["models"], json!([]));

    let load = ollama_whole(&server, json!({"model": CHAT, "messages": []})).await;
    assert_eq!(load["done_reason"], "load");
    assert!(nanos(&load, "load_duration") >= Duration::from_secs(3));
    let unload = ollama_whole(
        &server,
        json!({"model": CHAT, "messages": [], "keep_alive": 0}),
    )
    .await;
    assert_eq!(unload["done_reason"], "unload");
    assert_eq!(server.stats().expiries, 2);
}

#[tokio::test]
async fn an_idle_model_unloads_when_its_keep_alive_ends() {
    let server = machine(realism()).await;
    let mut body = chat(CHAT, "short stay", false);
    // 20 s of life: 200 ms here.
    body["keep_alive"] = json!("20s");
    ollama_whole(&server, body).await;
    let ps = ps(&server).await;
    let expires = ps["models"][0]["expires_at"].as_str().unwrap();
    let expires = chrono::DateTime::parse_from_rfc3339(expires).unwrap();
    let left = expires.signed_duration_since(chrono::Utc::now());
    assert!(left <= chrono::Duration::milliseconds(250), "{ps}");
    let stats = stats_until(&server, |s| s.expiries == 1).await;
    assert_eq!(stats.evictions, 0);
    // The next request pays the load again.
    let again = ollama_whole(&server, chat(CHAT, "back again", false)).await;
    assert!(nanos(&again, "load_duration") >= Duration::from_secs(3));
}

fn long_history(turns: usize) -> Vec<Value> {
    let filler = "The backup job copies the photo library to the NAS every night. ".repeat(20);
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    for i in 0..turns {
        messages.push(json!({"role": "user", "content": format!("turn {i}: {filler}")}));
        messages.push(json!({"role": "assistant", "content": filler.clone()}));
    }
    messages
}

#[tokio::test]
async fn a_prompt_longer_than_the_window_loses_its_oldest_part() {
    let server = machine(realism()).await;
    let mut messages = long_history(30);
    messages.push(json!({"role": "user", "content": "what did I say first?"}));
    let body = json!({"model": CHAT, "stream": false, "messages": messages});
    let answer = ollama_whole(&server, body.clone()).await;
    let evaluated = answer["prompt_eval_count"].as_u64().unwrap();
    assert!(evaluated <= 4096, "{answer}");
    assert!(evaluated > 3000, "only the oldest part goes: {answer}");
    let g = server.generations().pop().unwrap();
    assert!(g.truncated);
    assert_eq!(g.last_user, "what did I say first?");
    assert_eq!(server.stats().truncated_prompts, 1);

    // A window that is large enough keeps it whole (and needs a runner of that size).
    let mut body = body;
    body["options"] = json!({"num_ctx": 32768});
    let whole = ollama_whole(&server, body).await;
    assert!(
        whole["prompt_eval_count"].as_u64().unwrap() > 4096,
        "{whole}"
    );
    let stats = server.stats();
    assert_eq!(
        (stats.truncated_prompts, stats.reloads),
        (1, 1),
        "{stats:?}"
    );
}

#[test]
fn fitting_keeps_system_messages_and_the_end_of_the_last_message() {
    let m = |role: &str, text: &str| SimMessage {
        role: role.to_owned(),
        text: text.to_owned(),
    };
    let fitted = sim::fit(
        vec![
            m("system", "rules"),
            m("user", &"a".repeat(400)),
            m("assistant", &"b".repeat(400)),
            m("user", "the question"),
        ],
        120,
    );
    let roles: Vec<&str> = fitted.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "assistant", "user"]);
    assert!(fitted.truncated && fitted.tokens <= 120);

    let alone = sim::fit(vec![m("user", &format!("{}tail", "x".repeat(4000)))], 50);
    assert!(alone.tokens <= 50);
    assert!(alone.messages[0].text.ends_with("tail"));
    assert_eq!(sim::estimate_tokens("猫の名前はミケ"), 7);
    assert_eq!(sim::estimate_tokens("abcdefgh"), 2);
}

#[tokio::test]
async fn the_next_turn_of_a_chat_finds_its_history_in_the_prompt_cache() {
    let server = machine(realism()).await;
    let first_q = "Tell me about backups. ".repeat(40);
    let (answer, _) = ollama_stream(&server, chat(CHAT, &first_q, true)).await;
    let next = json!({"model": CHAT, "stream": false, "messages": [
        {"role": "user", "content": first_q},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "and restores?"},
    ]});
    let whole = ollama_whole(&server, next).await;
    let g = server.generations();
    assert_eq!(g[0].prompt_evaluated, g[0].prompt_tokens);
    assert!(g[1].prompt_evaluated < 20, "{:?}", g[1]);
    // As Ollama's runner does, the count is of the whole prompt, the part the cache held
    // included; the duration is of the part evaluated.
    assert_eq!(
        whole["prompt_eval_count"].as_u64(),
        Some(u64::from(g[1].prompt_tokens))
    );
    assert!(nanos(&whole, "prompt_eval_duration") < Duration::from_millis(50));
    // Another model in between evicts the runner, and its cache with it.
    ollama_whole(&server, chat(CODER, "unrelated", false)).await;
    let stats = server.stats();
    assert_eq!(
        stats.cached_prompt_tokens,
        u64::from(g[1].prompt_tokens - g[1].prompt_evaluated)
    );
}

#[tokio::test]
async fn a_client_that_goes_away_stops_its_generation_and_frees_the_slot() {
    let server = machine(Realism {
        answer_tokens: (300, 300),
        ..realism()
    })
    .await;
    let res = post(&server, "/api/chat", &chat(CHAT, "a long story", true)).await;
    let mut body = res.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"{\"model\""));
    let left = Instant::now();
    drop(body);
    let stats = stats_until(&server, |s| s.cancelled == 1).await;
    let g = server.generations().pop().unwrap();
    assert!(g.cancelled);
    assert!(g.tokens < 300, "{g:?}");
    assert_eq!(stats.tokens_generated, u64::from(g.tokens));
    // Each token's time is recorded, in order; the first was made before the client left
    // (it read it), none after the generation was recorded.
    assert_eq!(g.token_times.len(), g.tokens as usize, "{g:?}");
    assert!(g.token_times.is_sorted(), "{g:?}");
    assert!(g.token_times[0] <= left, "{g:?}");
    assert!(g.token_times.iter().all(|t| *t <= Instant::now()), "{g:?}");
    // The slot is free: the next request does not wait behind the abandoned answer.
    ollama_whole(&server, chat(CHAT, "next", false)).await;
    let next = server.generations().pop().unwrap();
    // (What was left of the abandoned answer would have taken about 6 s.)
    assert!(next.waited < Duration::from_secs(3), "{next:?}");
}

/// A request for `model` sent in a task of its own (its client goes away when the task
/// is aborted).
fn sent(server: &FakeLlmServer, model: &str, text: &str) -> tokio::task::JoinHandle<()> {
    let url = format!("{}/api/chat", server.base_url());
    let body = chat(model, text, false);
    tokio::spawn(async move {
        let _ = reqwest::Client::new().post(url).json(&body).send().await;
    })
}

/// What `/api/ps` says.
async fn ps(server: &FakeLlmServer) -> Value {
    reqwest::get(format!("{}/api/ps", server.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The models `/api/ps` lists.
async fn ps_models(server: &FakeLlmServer) -> Vec<String> {
    let ps = ps(server).await;
    ps["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits (bounded) until `/api/ps` lists `models`.
async fn ps_until(server: &FakeLlmServer, models: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = ps_models(server).await;
        if listed == models {
            return;
        }
        assert!(Instant::now() < deadline, "/api/ps lists {listed:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Ollama aborts a load whose client closes before the model is ready: the model stays
/// listed until Ollama's next poll of the loading runner, then is not resident, and what
/// the load evicted stays evicted. While another request still waits for the load, it
/// goes on.
#[tokio::test]
async fn a_load_nobody_waits_for_any_more_is_aborted() {
    let slow = Speed {
        // A load that outlasts the test.
        load: Duration::from_secs(100_000),
        ..realism().speed
    };
    let server = FakeLlm::builder()
        .model(CHAT)
        .model_spec(ModelSpec::new(CODER).with_speed(slow))
        .realistic(Realism {
            max_loaded: 1,
            give_up_within: Duration::from_secs(2),
            ..realism()
        })
        .spawn()
        .await
        .unwrap();
    ollama_whole(&server, chat(CHAT, "warm", false)).await;
    assert_eq!(ps_models(&server).await, [CHAT]);
    // The coder's load pushes the chat model out; its client leaves during the load.
    let left = sent(&server, CODER, "left");
    stats_until(&server, |s| s.loads == 2).await;
    assert_eq!(
        ps_models(&server).await,
        [CODER],
        "a loading model is listed"
    );
    left.abort();
    let _ = left.await;
    stats_until(&server, |s| s.aborted_loads == 1).await;
    assert_eq!(ps_models(&server).await, [CODER], "listed until it is gone");
    ps_until(&server, &[]).await;

    // Two wait for the same load; one leaves, and the load goes on for the other.
    let first = sent(&server, CODER, "first");
    stats_until(&server, |s| s.loads == 3).await;
    let second = sent(&server, CODER, "second");
    stats_until(&server, |s| s.requests == 4).await;
    first.abort();
    let _ = first.await;
    stats_until(&server, |s| s.left_waiting == 2).await;
    assert_eq!(ps_models(&server).await, [CODER]);
    assert_eq!(server.stats().aborted_loads, 1);
    second.abort();
    let _ = second.await;
    let stats = stats_until(&server, |s| s.aborted_loads == 2).await;
    ps_until(&server, &[]).await;
    assert_eq!((stats.loads, stats.evictions), (3, 1), "{stats:?}");
}

#[tokio::test]
async fn a_client_that_leaves_while_queued_gives_up_its_place() {
    let server = machine(realism()).await;
    let running = tokio::spawn({
        let url = format!("{}/api/chat", server.base_url());
        async move {
            reqwest::Client::new()
                .post(url)
                .json(&chat(CHAT, "first", false))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    stats_until(&server, |s| s.requests == 1).await;
    let queued = tokio::spawn({
        let url = format!("{}/api/chat", server.base_url());
        async move {
            let _ = reqwest::Client::new()
                .post(url)
                .json(&chat(CHAT, "gives up", false))
                .send()
                .await;
        }
    });
    stats_until(&server, |s| s.requests == 2).await;
    queued.abort();
    let _ = queued.await;
    stats_until(&server, |s| s.left_waiting == 1).await;
    assert_eq!(running.await.unwrap(), 200);
    // Admission is first come, first served: had the second stayed, it would run before this.
    ollama_whole(&server, chat(CHAT, "third", false)).await;
    let ran: Vec<String> = server
        .generations()
        .into_iter()
        .map(|g| g.last_user)
        .collect();
    assert_eq!(ran, ["first", "third"], "{:?}", server.stats());
}

#[tokio::test]
async fn reported_durations_follow_the_simulated_rates() {
    let server = machine(Realism {
        answer_tokens: (100, 100),
        ..realism()
    })
    .await;
    let (content, last) = ollama_stream(&server, chat(CHAT, "count the tokens", true)).await;
    assert_eq!(last["eval_count"], 100);
    assert_eq!(reply::tokens(&content).count(), 100);
    // 100 tokens at 50 tokens/s: 2 s of life.
    assert_eq!(nanos(&last, "eval_duration"), Duration::from_secs(2));
    let prompt_tokens = u32::try_from(last["prompt_eval_count"].as_u64().unwrap()).unwrap();
    let expected = Duration::from_secs_f64(f64::from(prompt_tokens) / 1000.0);
    let prompt = nanos(&last, "prompt_eval_duration");
    assert!(
        prompt.abs_diff(expected) < Duration::from_micros(1),
        "{last}"
    );
    let total = nanos(&last, "total_duration");
    assert!(total >= nanos(&last, "load_duration") + prompt + Duration::from_secs(2));
    assert_eq!(server.stats().tokens_generated, 100);
}

#[tokio::test]
async fn open_webui_task_templates_get_json_and_are_counted_apart() {
    let server = machine(realism()).await;
    let template = "### Task:\nGenerate a concise title.\n### Output:\nJSON format: { \"title\": \"your title\" }\n### Chat History:\n<chat_history>\nUSER: hi\n</chat_history>";
    let answer = ollama_whole(&server, chat(CHAT, template, false)).await;
    let content = answer["message"]["content"].as_str().unwrap();
    let parsed: Value = serde_json::from_str(content).unwrap();
    assert!(parsed["title"].is_string(), "{content}");
    ollama_whole(&server, chat(CHAT, "a normal question", false)).await;
    let stats = server.stats();
    let template_tokens = answer["eval_count"].as_u64().unwrap();
    assert_eq!(stats.template_tokens, template_tokens);
    assert!(stats.tokens_generated > template_tokens);
}

#[tokio::test]
async fn the_openai_routes_share_the_same_machine() {
    let server = machine(realism()).await;
    let openai = async {
        let res = reqwest::Client::new()
            .post(format!("{}/chat/completions", server.openai_base_url()))
            .json(&chat(CODER, "via openai", false))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.json::<Value>().await.unwrap()
    };
    let (via_openai, via_ollama) = tokio::join!(openai, async {
        stats_until(&server, |s| s.requests == 1).await;
        ollama_whole(&server, chat(CHAT, "via ollama", false)).await
    });
    assert!(via_openai["usage"]["completion_tokens"].as_u64().unwrap() >= 20);
    // One resident model: the Ollama request had to evict the coder after it finished.
    assert!(nanos(&via_ollama, "load_duration") >= Duration::from_secs(3));
    let stats = server.stats();
    assert_eq!((stats.loads, stats.evictions), (2, 1), "{stats:?}");
}

#[tokio::test]
async fn show_reports_the_context_length_and_stats_are_served() {
    let server = FakeLlm::builder()
        .model_spec(ModelSpec::new(CHAT).with_context_length(8192))
        .realistic(realism())
        .spawn()
        .await
        .unwrap();
    let show = post(&server, "/api/show", &json!({"model": CHAT})).await;
    let show: Value = show.json().await.unwrap();
    assert_eq!(show["model_info"]["qwen.context_length"], 8192);
    // num_ctx above the model's own window is capped at it.
    let mut body = chat(CHAT, "hi", false);
    body["options"] = json!({"num_ctx": 100_000});
    ollama_whole(&server, body).await;
    let stats: Value = reqwest::get(format!("{}/fake/stats", server.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["stats"]["loads"], 1);
    assert_eq!(stats["resident"][0]["num_ctx"], 8192);
}

/// With Ollama's eviction a load on a full machine evicts the idle model whose last
/// request set the shortest keep-alive, then the first by model file path, not the least
/// recently used: with equal keep-alives the model used last may go, and a longer
/// keep-alive keeps it. The least recently used rule evicts the other.
#[tokio::test]
async fn ollamas_eviction_goes_by_keep_alive_then_model_path() {
    const SMALL: &str = "llama3.2:3b";
    let machine = |eviction: Eviction| {
        FakeLlm::builder()
            .model(CHAT)
            .model(CODER)
            .model(SMALL)
            .realistic(Realism {
                max_loaded: 2,
                eviction,
                ..realism()
            })
            .spawn()
    };
    // The two models in the order of their files.
    let mut two = [CHAT, CODER];
    two.sort_by_key(|m| sim::model_path(m));
    let [first, second] = two;
    // `second` used, then `first`, then a third model loads.
    let day = |eviction: Eviction, keep_first: Option<&'static str>| async move {
        let server = machine(eviction).await.unwrap();
        ollama_whole(&server, chat(second, "older", false)).await;
        let mut newer = chat(first, "newer", false);
        if let Some(keep) = keep_first {
            newer["keep_alive"] = json!(keep);
        }
        ollama_whole(&server, newer).await;
        ollama_whole(&server, chat(SMALL, "a third model", false)).await;
        assert_eq!(server.stats().evictions, 1);
        let mut resident = ps_models(&server).await;
        resident.sort();
        resident
    };
    let sorted = |mut models: Vec<&str>| {
        models.sort();
        models.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    assert_eq!(
        day(Eviction::Ollama, None).await,
        sorted(vec![second, SMALL]),
        "the first by path went, though used last"
    );
    assert_eq!(
        day(Eviction::Ollama, Some("1h")).await,
        sorted(vec![first, SMALL]),
        "a longer keep-alive kept it"
    );
    assert_eq!(
        day(Eviction::LeastRecentlyUsed, None).await,
        sorted(vec![first, SMALL]),
        "the least recently used went"
    );
}

/// A request that sets no keep-alive leaves a resident model the one it had, as Ollama
/// does (it changes the runner's only when the request sets one): `first`, kept an hour
/// by its first request and used again without one, stays over `second`, kept five
/// minutes, when a third model loads, though `first` sorts first by path and `second`
/// was used last.
#[tokio::test]
async fn a_request_without_a_keep_alive_leaves_the_one_the_model_had() {
    const SMALL: &str = "llama3.2:3b";
    let server = FakeLlm::builder()
        .model(CHAT)
        .model(CODER)
        .model(SMALL)
        .realistic(Realism {
            max_loaded: 2,
            ..realism()
        })
        .spawn()
        .await
        .unwrap();
    let mut two = [CHAT, CODER];
    two.sort_by_key(|m| sim::model_path(m));
    let [first, second] = two;
    let mut kept = chat(first, "kept an hour", false);
    kept["keep_alive"] = json!("1h");
    ollama_whole(&server, kept).await;
    ollama_whole(&server, chat(first, "again, saying nothing", false)).await;
    ollama_whole(&server, chat(second, "used last", false)).await;
    ollama_whole(&server, chat(SMALL, "a third model", false)).await;
    let mut resident = ps_models(&server).await;
    resident.sort();
    let mut want = vec![first.to_owned(), SMALL.to_owned()];
    want.sort();
    assert_eq!(resident, want);
}

/// `ps_fails` makes `/api/ps` answer 500, and only it.
#[tokio::test]
async fn ps_fails_on_demand() {
    let server = machine(realism()).await;
    server.update_knobs(|k| k.ps_fails = true);
    let ps = reqwest::get(format!("{}/api/ps", server.base_url()))
        .await
        .unwrap();
    assert_eq!(ps.status(), 500);
    let tags = reqwest::get(format!("{}/api/tags", server.base_url()))
        .await
        .unwrap();
    assert_eq!(tags.status(), 200);
    server.update_knobs(|k| k.ps_fails = false);
    assert!(ps_models(&server).await.is_empty());
}

/// A machine whose clock drifted tells its expiries and its answers' `Date` on its own
/// clock: thirty seconds ahead of the host's here.
#[tokio::test]
async fn a_machine_tells_times_on_its_own_clock() {
    let ahead = chrono::TimeDelta::seconds(30);
    let server = FakeLlm::builder()
        .model(CHAT)
        .realistic(realism())
        .clock_ahead(ahead)
        .spawn()
        .await
        .unwrap();
    let before = chrono::Utc::now();
    let res = post(&server, "/api/chat", &chat(CHAT, "hello", false)).await;
    let after = chrono::Utc::now();
    assert_eq!(res.status(), 200);
    let date = res.headers()[axum::http::header::DATE].to_str().unwrap();
    let date = crate::backend::clock::parse_http_date(date).unwrap();
    // Whole seconds: the machine's clock read up to a second past what it says.
    assert!(
        date >= before + ahead - chrono::TimeDelta::seconds(1) && date <= after + ahead,
        "{date} against {before}..{after}"
    );
    let ps = ps(&server).await;
    let expires_at = ps["models"][0]["expires_at"].as_str().unwrap();
    let expires_at = crate::backend::ollama::parse_expiry(expires_at).unwrap();
    // Five minutes of keep-alive at 100 times: 3 s of wall clock after the answer, on a
    // clock 30 s ahead.
    let left = expires_at - chrono::Utc::now();
    assert!(
        left > ahead && left <= ahead + chrono::TimeDelta::seconds(3),
        "{ps}"
    );
}

/// A request with no messages only loads the model: Ollama's scheduler answers it once
/// the runner is ready, although its one slot is busy with another answer, and the
/// keep-alive it carries applies. Here the answer is held after its first token, so only
/// an answer that does not wait for the slot comes.
#[tokio::test]
async fn a_load_only_request_does_not_wait_for_a_busy_slot() {
    let server = machine(realism()).await;
    server.hold();
    let res = post(&server, "/api/chat", &chat(CHAT, "a long answer", true)).await;
    assert_eq!(res.status(), 200);
    let mut running = res.bytes_stream();
    // Its first token: the slot is taken, and stays so while held.
    running.next().await.unwrap().unwrap();
    let load = json!({"model": CHAT, "messages": [], "keep_alive": "2h"});
    let answer = tokio::time::timeout(Duration::from_secs(10), post(&server, "/api/chat", &load))
        .await
        .expect("a load-only request answers while the slot is busy");
    assert_eq!(answer.status(), 200);
    let record: Value = answer.json().await.unwrap();
    assert_eq!(record["done_reason"], "load");
    // The keep-alive it carried: two hours of life, from when the held answer ends.
    server.release();
    while running.next().await.is_some() {}
    let ps = ps(&server).await;
    let expires_at = ps["models"][0]["expires_at"].as_str().unwrap();
    let left = crate::backend::ollama::parse_expiry(expires_at).unwrap() - chrono::Utc::now();
    // At 100 times faster than life, two hours are 72 s of wall clock.
    assert!(left > chrono::TimeDelta::seconds(60), "{ps}");
    assert_eq!(server.stats().loads, 1);
}
