use chrono::Duration;

use super::*;
use crate::backend::activity::Recent;
use crate::backend::perf::ModelPerf;

pub(super) fn model(s: &str) -> ModelName {
    ModelName::parse(s).unwrap()
}

fn thread(s: &str) -> ThreadId {
    ThreadId::parse(s).unwrap()
}

/// A one-slot machine serving `m` (and the models in `also`), with `m` resident or not.
pub(super) fn status(name: &str, loaded: bool, in_flight: usize) -> WorkerStatus {
    WorkerStatus {
        loaded: if loaded { vec![model("m")] } else { vec![] },
        in_flight,
        ..crate::testkit::samples::idle_worker(name, &["m"])
    }
}

pub(super) fn rates(m: &str, load_s: f64, prompt_tps: f64, eval_tps: f64) -> ModelPerf {
    let mut p = ModelPerf::new(model(m));
    p.load_s = Some(load_s);
    p.prompt_tps = Some(prompt_tps);
    p.eval_tps = Some(eval_tps);
    p.answer_tokens = Some(300.0);
    p.samples = 1;
    p
}

pub(super) fn with_rates(
    mut s: WorkerStatus,
    load_s: f64,
    prompt_tps: f64,
    eval_tps: f64,
) -> WorkerStatus {
    s.perf = vec![rates("m", load_s, prompt_tps, eval_tps)];
    s
}

fn best(statuses: &[WorkerStatus], prompt_tokens: u32) -> String {
    let m = model("m");
    best_of(statuses, &Ask::fresh(&m, prompt_tokens))
        .unwrap()
        .to_string()
}

pub(super) fn running(m: &str, secs_ago: i64, tokens: u32, first_token: bool) -> Running {
    let now = Utc::now();
    Running {
        model: model(m),
        started_at: now - Duration::seconds(secs_ago),
        first_token_at: first_token.then_some(now - Duration::seconds(secs_ago / 2)),
        tokens,
        prompt_tokens: 100,
        cold: false,
        cached: false,
        priority: Default::default(),
    }
}

#[test]
fn with_nothing_learned_the_first_configured_machine_is_preferred() {
    let all_cold = [
        status("moon", false, 0),
        status("ai-core", false, 0),
        status("laptop", false, 0),
    ];
    assert_eq!(best(&all_cold, 100), "moon");
    // A machine with the model resident and a free slot saves the load.
    let warm_last = [status("moon", false, 0), status("laptop", true, 0)];
    assert_eq!(best(&warm_last, 100), "laptop");
}

#[test]
fn placement_weighs_the_queue_the_load_and_the_prompt_at_each_machines_speed() {
    let moon = |loaded, in_flight| with_rates(status("moon", loaded, in_flight), 3.0, 1500.0, 80.0);
    let laptop =
        |loaded, in_flight| with_rates(status("laptop", loaded, in_flight), 10.0, 150.0, 10.0);
    // A long prompt: 2 s on moon, 20 s on the laptop; moon's load (3 s) is worth it.
    assert_eq!(best(&[moon(false, 0), laptop(true, 0)], 3000), "moon");
    // A short one on a resident model beats a load.
    assert_eq!(best(&[moon(false, 0), laptop(true, 0)], 30), "laptop");
    // Moon busy with one answer (300 tokens at 80/s: 3.75 s) is still sooner for a
    // long prompt than the free laptop.
    assert_eq!(best(&[moon(true, 1), laptop(true, 0)], 3000), "moon");
    assert_eq!(best(&[moon(true, 3), laptop(true, 0)], 300), "laptop");
    // An unhealthy machine comes last whatever its speed.
    let mut down = moon(true, 0);
    down.healthy = false;
    assert_eq!(best(&[down, laptop(false, 0)], 3000), "laptop");
}

#[test]
fn a_machine_that_has_not_run_the_model_is_tried_when_the_known_one_is_busy() {
    let known_slow = with_rates(status("laptop", true, 1), 10.0, 150.0, 10.0);
    let unknown = status("moon", true, 0);
    assert_eq!(best(&[known_slow, unknown], 500), "moon");
}

#[test]
fn a_machine_nothing_is_known_of_is_taken_with_caution() {
    // Moon is known and busy with an answer two thirds done (100 of 300 tokens left at
    // 80/s: 1.25 s); the laptop has never run anything. Assumed as fast as moon, the idle
    // laptop would win (3 s load + 1.2 s prompt against 1.25 s + 1.2 s + nothing), but
    // taken with caution a busy known machine that is about to free up wins.
    let mut moon = with_rates(status("moon", true, 1), 3.0, 1500.0, 80.0);
    moon.running = vec![running("m", 4, 200, true)];
    let laptop = status("laptop", false, 0);
    assert_eq!(best(&[moon.clone(), laptop.clone()], 1800), "moon");
    // An answer that has only begun keeps moon busy for long: the laptop is tried.
    moon.running = vec![running("m", 1, 1, true)];
    moon.perf[0].eval_tps = Some(20.0);
    assert_eq!(best(&[moon, laptop], 1800), "laptop");
}

#[test]
fn how_far_along_the_running_answers_are_decides_when_a_slot_frees() {
    let now = Utc::now();
    let mut moon = with_rates(status("moon", true, 1), 3.0, 1500.0, 80.0);
    let statuses = std::slice::from_ref(&moon);
    let m = model("m");
    let ask = Ask::fresh(&m, 0);
    // Nothing known of the running answer: a whole answer (300 tokens at 80/s).
    assert!((estimate_on(&moon, &ask, statuses, now).ttft_s - 3.75).abs() < 1e-6);
    // 280 tokens in: about 20 left, but at least a tenth of an answer (30 tokens).
    moon.running = vec![running("m", 4, 280, true)];
    let statuses = std::slice::from_ref(&moon);
    assert!((estimate_on(&moon, &ask, statuses, now).ttft_s - 30.0 / 80.0).abs() < 1e-6);
    // Two slots, one busy: no wait.
    moon.parallel = 2;
    let statuses = std::slice::from_ref(&moon);
    assert_eq!(estimate_on(&moon, &ask, statuses, now).ttft_s, 0.0);
}

#[test]
fn a_load_behind_a_busy_model_waits_for_it_once() {
    // One slot, room for one model: `a` runs an answer about 30 tokens from its end
    // (0.375 s at 80/s). A task for `small` waits for that answer once (the slot and the
    // resident model free together), then loads (1.5 s).
    let now = Utc::now();
    let mut moon = status("moon", false, 1);
    moon.models = vec![model("a"), model("small")];
    moon.loaded = vec![model("a")];
    moon.max_loaded = Some(1);
    moon.perf = vec![
        rates("a", 3.0, 1500.0, 80.0),
        rates("small", 1.5, 3000.0, 150.0),
    ];
    moon.running = vec![running("a", 4, 280, true)];
    let small = model("small");
    let e = estimate_on(
        &moon,
        &Ask::fresh(&small, 0),
        std::slice::from_ref(&moon),
        now,
    );
    assert!((e.ttft_s - (0.375 + 1.5)).abs() < 1e-6, "{e:?}");
}

#[test]
fn a_machine_slower_on_the_models_both_ran_is_assumed_slower_on_the_others() {
    // Both ran `small`; the laptop at a tenth of moon's rates. Neither ran `m` on the
    // laptop, moon ran it at 80 tokens/s: the laptop is assumed at 8.
    let mut moon = with_rates(status("moon", false, 0), 3.0, 1500.0, 80.0);
    moon.perf.push(rates("small", 1.0, 3000.0, 150.0));
    let mut laptop = status("laptop", false, 0);
    laptop.perf = vec![rates("small", 5.0, 300.0, 15.0)];
    let statuses = [moon, laptop.clone()];
    let r = rates_on(&laptop, &model("m"), &statuses);
    assert!((r.eval_tps - 8.0).abs() < 1e-6, "{r:?}");
    assert!((r.prompt_tps - 150.0).abs() < 1e-6, "{r:?}");
    assert!(r.load_s > 3.0, "{r:?}");
}

#[test]
fn a_machine_that_loads_one_model_slowly_is_assumed_to_load_the_others_as_slowly() {
    // The household: moon loads the chat model in 3 s and the small one in 1.5 s; the
    // laptop has run only the small one, loading it in 5 s. Its disk and bus load the
    // chat model as slowly: 10 s (its rates alone said 3 s / sqrt(0.13) = 8.2 s at
    // best, and the laptop looked sooner than a desktop that loads it in 6 s).
    let mut moon = with_rates(status("moon", false, 0), 3.0, 1500.0, 80.0);
    moon.perf.push(rates("small", 1.5, 3000.0, 150.0));
    let mut laptop = status("laptop", false, 0);
    laptop.perf = vec![rates("small", 5.0, 300.0, 20.0)];
    let statuses = [moon, laptop.clone()];
    let r = rates_on(&laptop, &model("m"), &statuses);
    assert!((r.load_s - 10.0).abs() < 1e-6, "{r:?}");
    assert!((r.eval_tps - 80.0 * 20.0 / 150.0).abs() < 1e-6, "{r:?}");
    // A machine that has loaded nothing another has is taken from its rates, as before.
    // (A model only it has does not count: there is nothing to compare its load with.)
    let mut mini = status("mini", false, 0);
    let mut own = rates("own", 2.0, 300.0, 20.0);
    own.model = model("own");
    own.prompt_tps = None;
    own.eval_tps = None;
    mini.perf = vec![own, rates("small", 5.0, 300.0, 20.0)];
    mini.perf[1].load_s = None;
    let moon = statuses[0].clone();
    let r = rates_on(&mini, &model("m"), &[moon, mini.clone()]);
    assert!(
        (r.load_s - 3.0 / (20.0f64 / 150.0).sqrt()).abs() < 1e-6,
        "{r:?}"
    );
}

#[test]
fn a_load_known_only_as_a_bound_is_taken_as_long_as_the_machines_other_loads_say() {
    // Seed 2's day before: a chat turn left the laptop after about 5 s with no first
    // token, which says its chat-model load takes at least that; it has loaded the small
    // model in 5 s, moon in 1.5 s. The next morning the chat model was assumed to load
    // there in the bound's 5 s and a turn went to it: the load took 10 s, which is what
    // its small-model load says (3.3 times moon's, and moon loads the chat model in 3 s).
    let mut moon = with_rates(status("moon", false, 0), 3.0, 1500.0, 80.0);
    moon.perf.push(rates("small", 1.5, 3000.0, 150.0));
    let mut laptop = status("laptop", false, 0);
    let mut bound = ModelPerf::new(model("m"));
    bound.left_late(
        perf::Began {
            was_loaded: false,
            alone: true,
            cached: false,
        },
        0,
        5.0,
        perf::ASSUMED,
    );
    assert!(bound.load_bound);
    laptop.perf = vec![rates("small", 5.0, 300.0, 20.0), bound];
    let statuses = [moon, laptop.clone()];
    let r = rates_on(&laptop, &model("m"), &statuses);
    assert!((r.load_s - 10.0).abs() < 1e-6, "{r:?}");
    // A bound longer than the extrapolation stands.
    laptop.perf[1].load_s = Some(14.0);
    let statuses = [statuses[0].clone(), laptop.clone()];
    let r = rates_on(&laptop, &model("m"), &statuses);
    assert!((r.load_s - 14.0).abs() < 1e-6, "{r:?}");
    // A bound is not a load the fleet has seen: a machine that has loaded nothing is
    // not assumed to load `m` as quickly as a bound somewhere says.
    let mut only_bound = status("mini", false, 0);
    only_bound.perf = vec![ModelPerf::new(model("m"))];
    only_bound.perf[0].load_s = Some(0.5);
    only_bound.perf[0].load_bound = true;
    let statuses = [statuses[0].clone(), only_bound.clone()];
    let fresh = status("fresh", false, 0);
    let all = [statuses[0].clone(), statuses[1].clone(), fresh.clone()];
    let r = rates_on(&fresh, &model("m"), &all);
    assert!(r.load_s >= 3.0, "{r:?}");
}

#[test]
fn a_machine_that_has_shown_only_a_slow_load_is_assumed_that_much_slower() {
    // Moon loads `m` in 3 s and runs it at 1500/80 tokens/s; the laptop has shown only
    // that its load takes 6 s (a turn left it late): half moon's load speed, so a quarter
    // of its rates (placement takes a load to scale as one over the square root of the
    // rates; in the household, a machine that loads in twice moon's time runs at a fifth
    // to a third of its rates, and in three times at a tenth).
    let moon = with_rates(status("moon", false, 0), 3.0, 1500.0, 80.0);
    let mut laptop = status("laptop", true, 0);
    let mut load_only = ModelPerf::new(model("m"));
    load_only.load_s = Some(6.0);
    laptop.perf = vec![load_only];
    let statuses = [moon.clone(), laptop.clone()];
    let r = rates_on(&laptop, &model("m"), &statuses);
    assert!((r.prompt_tps - 375.0).abs() < 1e-6, "{r:?}");
    assert!((r.eval_tps - 20.0).abs() < 1e-6, "{r:?}");
    assert!((r.load_s - 6.0).abs() < 1e-6, "{r:?}");
    // Another model it has not run is taken to load as its rates say: in 6 s too.
    let mut other = rates("o", 3.0, 1500.0, 80.0);
    other.model = model("o");
    let mut moon_o = moon.clone();
    moon_o.perf.push(other);
    let statuses = [moon_o, laptop.clone()];
    let r = rates_on(&laptop, &model("o"), &statuses);
    assert!((r.load_s - 6.0).abs() < 1e-6, "{r:?}");
    // One that loads as fast as moon is taken to be as fast.
    laptop.perf[0].load_s = Some(3.0);
    let statuses = [moon, laptop.clone()];
    let r = rates_on(&laptop, &model("m"), &statuses);
    assert!((r.prompt_tps - 1500.0).abs() < 1e-6, "{r:?}");
}

/// Moon holds two models at most and has `a` and `b` resident; `b` was used by two
/// conversations lately, `a` by nobody; ai-core serves `small` too, with nothing resident.
fn full_moon(b_users: usize) -> (WorkerStatus, WorkerStatus) {
    let now = Utc::now();
    let mut moon = status("moon", false, 0);
    moon.models = vec![model("a"), model("b"), model("small")];
    moon.loaded = vec![model("a"), model("b")];
    moon.max_loaded = Some(2);
    moon.perf = vec![
        rates("a", 3.0, 1500.0, 80.0),
        rates("b", 3.0, 1500.0, 80.0),
        rates("small", 1.5, 3000.0, 150.0),
    ];
    moon.recent = (0..b_users)
        .map(|i| Recent {
            thread: thread(&format!("t{i}")),
            model: model("b"),
            at: now - Duration::seconds(30),
            tokens: 100,
        })
        .collect();
    let mut ai_core = status("ai-core", false, 0);
    ai_core.models = vec![model("small")];
    ai_core.perf = vec![rates("small", 3.0, 600.0, 50.0)];
    (moon, ai_core)
}

#[test]
fn a_load_evicts_the_least_recently_used_idle_model_and_counts_what_that_costs() {
    let now = Utc::now();
    let small = model("small");
    let ask = Ask::fresh(&small, 100);
    let (mut moon, ai_core) = full_moon(2);
    // `a` was used longer ago than `b`: `a` goes, and nobody uses it: free.
    moon.recent.insert(
        0,
        Recent {
            thread: thread("old"),
            model: model("a"),
            at: now - Duration::seconds(200),
            tokens: 100,
        },
    );
    let statuses = [moon.clone(), ai_core.clone()];
    let e = estimate_on(&moon, &ask, &statuses, now);
    assert_eq!(e.evicts, Some(model("a")));
    assert!((e.eviction_s - 3.0).abs() < 1e-6, "{e:?}");
    // With `a` busy, `b` goes: two conversations come back to it, two loads of 3 s.
    moon.running = vec![running("a", 2, 10, true)];
    let statuses = [moon.clone(), ai_core.clone()];
    let e = estimate_on(&moon, &ask, &statuses, now);
    assert_eq!(e.evicts, Some(model("b")));
    assert!((e.eviction_s - 6.0).abs() < 1e-6, "{e:?}");
    // Both busy: the load waits for the first to fall idle and pushes it out, in use as
    // it is. `b` ends first (30 tokens left at 80/s), so `b` goes, at the same cost.
    moon.running = vec![running("a", 2, 10, true), running("b", 8, 290, true)];
    let statuses = [moon.clone(), ai_core.clone()];
    let e = estimate_on(&moon, &ask, &statuses, now);
    assert_eq!(e.evicts, Some(model("b")));
    assert!((e.eviction_s - 6.0).abs() < 1e-6, "{e:?}");
    assert!(
        (e.ttft_s - (0.375 + 1.5 + 100.0 / 3000.0)).abs() < 1e-6,
        "{e:?}"
    );
    // `a` ends first: `a` goes, and one conversation used it lately.
    moon.running = vec![running("a", 8, 290, true), running("b", 2, 10, true)];
    let e = estimate_on(&moon, &ask, &[moon.clone(), ai_core], now);
    assert_eq!((e.evicts, e.eviction_s), (Some(model("a")), 3.0));
    // Room left: nothing evicted.
    moon.max_loaded = Some(3);
    let e = estimate_on(&moon, &ask, &[moon.clone()], now);
    assert_eq!((e.evicts, e.eviction_s), (None, 0.0));
}

#[test]
fn one_persons_occasional_model_goes_where_it_evicts_nobodys() {
    let small = model("small");
    let ask = Ask::fresh(&small, 100);
    // Nobody used moon's models lately: moon, the fastest, takes it.
    let (moon, ai_core) = full_moon(0);
    assert_eq!(best_of(&[moon, ai_core], &ask).unwrap().to_string(), "moon");
    // Two people keep coming back to `b` (and `a` is busy): ai-core loads it instead.
    let (mut moon, ai_core) = full_moon(2);
    moon.running = vec![running("a", 2, 10, true)];
    moon.in_flight = 0;
    moon.parallel = 2;
    assert_eq!(
        best_of(&[moon, ai_core], &ask).unwrap().to_string(),
        "ai-core"
    );
}

/// Thread `t` served on the machine with model `m` 20 s ago; its cache holds `tokens`.
fn served_lately(t: &ThreadId, m: &ModelName, tokens: u32, now: DateTime<Utc>) -> Recent {
    Recent {
        thread: t.clone(),
        model: m.clone(),
        at: now - Duration::seconds(20),
        tokens,
    }
}

/// A turn of thread `t` whose new part is 50 tokens, nothing waiting before it.
fn chat_ask<'a>(m: &'a ModelName, t: &'a ThreadId, prompt_tokens: u32) -> Ask<'a> {
    Ask {
        model: m,
        prompt_tokens,
        fresh_tokens: 50,
        thread: Some(t),
        request: None,
        ahead: Ahead::NONE,
        backlog: &backlog::NONE,
    }
}

/// A job of the same model waiting before the ask takes the one slot's cache first: the
/// ask's whole prompt counts again there (in the household, two long chats on moon's one
/// chat slot: each turn evaluated in full, placement had it cached).
#[test]
fn a_job_ahead_of_the_same_model_takes_the_cache_of_the_slot_it_starts_in() {
    let now = Utc::now();
    let m = model("m");
    let t = thread("chat-1");
    let mut moon = with_rates(status("moon", true, 0), 3.0, 1000.0, 50.0);
    moon.recent = vec![served_lately(&t, &m, 9900, now)];
    let ask = chat_ask(&m, &t, 10_000);
    let statuses = [moon];
    let alone = &estimates(&statuses, &ask, now)[0];
    assert!(alone.cached && alone.ttft_s < 0.2, "{alone:?}");
    let behind = ask.behind(Ahead {
        jobs: 1,
        prompt_tokens: Some(1000),
    });
    let e = &estimates(&statuses, &behind, now)[0];
    assert!(!e.cached, "{e:?}");
    // The job ahead: 1 s of prompt, a 6 s answer; then all 10,000 tokens, 10 s.
    assert!((e.ttft_s - 17.0).abs() < 1e-6, "{e:?}");
}

#[test]
fn a_conversation_goes_back_to_the_machine_whose_cache_holds_it() {
    let now = Utc::now();
    let m = model("m");
    let t = thread("chat-1");
    // Two equal machines with the model resident; the second served this chat last.
    let moon = with_rates(status("moon", true, 0), 3.0, 500.0, 30.0);
    let mut twin = with_rates(status("twin", true, 0), 3.0, 500.0, 30.0);
    twin.recent = vec![served_lately(&t, &m, 2900, now)];
    let ask = chat_ask(&m, &t, 3000);
    let statuses = [moon.clone(), twin.clone()];
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "twin");
    // The cache holds 2,900 of the 3,000 tokens: 100 are left, at 500/s.
    let e = estimate_on(&twin, &ask, &statuses, now);
    assert!(e.cached && (e.ttft_s - 0.2).abs() < 1e-6, "{e:?}");
    // A history cut at the front since: the cached prefix is gone.
    let shorter = Ask {
        prompt_tokens: 2000,
        ..ask
    };
    assert!(!estimate_on(&twin, &shorter, &statuses, now).cached);
    // Another conversation ran there since: the slot's cache holds that one now.
    twin.recent.push(Recent {
        thread: thread("chat-2"),
        model: m.clone(),
        at: now - Duration::seconds(5),
        tokens: 100,
    });
    let statuses = [moon.clone(), twin.clone()];
    assert!(!estimate_on(&twin, &ask, &statuses, now).cached);
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "moon");
    // Two slots, one running another conversation: the other slot still holds this one.
    twin.recent.pop();
    twin.parallel = 2;
    twin.in_flight = 1;
    twin.running = vec![running("m", 1, 10, true)];
    let statuses = [moon.clone(), twin.clone()];
    assert!(estimate_on(&twin, &ask, &statuses, now).cached);
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "twin");
    // Both slots taken by answers that have only begun: this conversation's cache goes
    // with them, and the free machine is clearly sooner.
    twin.in_flight = 2;
    twin.running = vec![running("m", 1, 1, true), running("m", 1, 1, true)];
    let statuses = [moon, twin];
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "moon");
}

#[test]
fn the_new_part_of_a_request_is_its_last_user_message_and_what_follows() {
    use crate::chat::ChatMessage;
    let request = BackendRequest {
        model: model("m"),
        messages: vec![
            ChatMessage::system("s".repeat(400)),
            ChatMessage::user("u".repeat(4000)),
            ChatMessage::new(Role::Assistant, "a".repeat(4000)),
            ChatMessage::user("q".repeat(40)),
        ],
        params: Default::default(),
        tools: Vec::new(),
    };
    let t = thread("x");
    let ask = Ask::of(&request, Some(&t));
    assert_eq!(ask.fresh_tokens, 10);
    assert!(ask.prompt_tokens >= 2100, "{ask:?}");
    assert_eq!(ask.thread, Some(&t));
}

/// Moon (fast) busy with one answer (300 tokens at 80/s: 3.75 s), ai-core (a fifth of
/// its prompt rate, a third of its answers) idle; both hold the model.
fn moon_busy_ai_core_idle() -> [WorkerStatus; 2] {
    [
        with_rates(status("moon", true, 1), 3.0, 1500.0, 80.0),
        with_rates(status("ai-core", true, 0), 6.0, 300.0, 27.0),
    ]
}

/// Each machine's expected time to first token for `ask`, in the order of `statuses`.
pub(super) fn ttfts(statuses: &[WorkerStatus], ask: &Ask<'_>) -> Vec<f64> {
    estimates(statuses, ask, Utc::now())
        .iter()
        .map(|e| e.ttft_s)
        .collect()
}

fn ahead(jobs: usize, prompt_tokens: Option<u64>) -> Ahead {
    Ahead {
        jobs,
        prompt_tokens,
    }
}

#[test]
fn the_jobs_waiting_in_the_queue_make_a_machine_look_as_busy_as_it_is() {
    let statuses = moon_busy_ai_core_idle();
    let m = model("m");
    let ask = Ask::fresh(&m, 3000);
    let ttft = |ask: &Ask<'_>| ttfts(&statuses, ask);
    // Nothing waits: moon frees in 3.75 s and takes 2 s for the prompt (5.75 s), sooner
    // than ai-core's 10 s.
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "moon");
    let t = ttft(&ask);
    assert!(
        (t[0] - 5.75).abs() < 1e-6 && (t[1] - 10.0).abs() < 1e-6,
        "{t:?}"
    );
    // One job of 3,000 tokens waits before it: that job starts soonest on moon too (at
    // 5.75 s), and holds moon for its answer (3.75 s more); the task would get its first
    // token there at 11.5 s, later than on idle ai-core.
    let behind = ask.behind(ahead(1, Some(3000)));
    let t = ttft(&behind);
    assert!(
        (t[0] - 11.5).abs() < 1e-6 && (t[1] - 10.0).abs() < 1e-6,
        "{t:?}"
    );
    assert_eq!(best_of(&statuses, &behind).unwrap().to_string(), "ai-core");
    // Their prompts unknown (a queue in Redis): each counts as long as the task's own.
    let unknown = ask.behind(Ahead::jobs(1));
    assert_eq!(ttft(&unknown), ttft(&behind));
    assert_eq!(best_of(&statuses, &unknown).unwrap().to_string(), "ai-core");
}

#[test]
fn how_much_sooner_one_machine_is_than_another_is_what_placement_weighs() {
    let statuses = moon_busy_ai_core_idle();
    let m = model("m");
    let ask = Ask::fresh(&m, 3000);
    let (moon, ai_core) = (&statuses[0].name, &statuses[1].name);
    // Moon at 5.75 s, ai-core at 10 s (above).
    let weighed = weighed(&statuses, &ask);
    let gain = sooner_by(&weighed, ai_core, moon).unwrap();
    assert!((gain - 4.25).abs() < 1e-6, "{gain}");
    let loss = sooner_by(&weighed, moon, ai_core).unwrap();
    assert!((loss + 4.25).abs() < 1e-6, "{loss}");
    let laptop = WorkerName::parse("laptop").unwrap();
    assert_eq!(sooner_by(&weighed, &laptop, moon), None);
}

#[test]
fn a_job_ahead_takes_the_slot_where_its_own_first_token_comes_soonest() {
    let statuses = moon_busy_ai_core_idle();
    let serving: Vec<&WorkerStatus> = statuses.iter().collect();
    let m = model("m");
    let now = Utc::now();
    let after = |jobs, tokens| {
        let ask = Ask::fresh(&m, 3000).behind(ahead(jobs, Some(tokens)));
        queued::after_ahead(&serving, &statuses, &ask, now)
            .iter()
            .map(|a| a.free_s)
            .collect::<Vec<f64>>()
    };
    // A short prompt starts sooner on idle ai-core (0 s) than on busy moon (3.75 s): it
    // holds ai-core for its answer (300 tokens at 27/s), and moon still frees at 3.75 s.
    let t = after(1, 30);
    assert!((t[0] - 3.75).abs() < 1e-6, "{t:?}");
    assert!((t[1] - (0.1 + 300.0 / 27.0)).abs() < 1e-6, "{t:?}");
    // A long one (3,000 tokens) starts sooner on moon: moon frees at 5.75 + 3.75 s.
    let t = after(1, 3000);
    assert!((t[0] - 9.5).abs() < 1e-6 && t[1] == 0.0, "{t:?}");
    // Two long ones: the second goes to ai-core (10 s against 11.5 s on moon).
    let t = after(2, 6000);
    assert!((t[0] - 9.5).abs() < 1e-6, "{t:?}");
    assert!((t[1] - (10.0 + 300.0 / 27.0)).abs() < 1e-6, "{t:?}");
}

#[test]
fn a_job_ahead_that_loads_the_model_leaves_it_resident_for_the_task() {
    // One machine, the model not resident (3 s to load), one slot free: the job ahead
    // loads it and answers (3 + 0 + 3.75 s); the task then pays no load of its own.
    let moon = with_rates(status("moon", false, 0), 3.0, 1500.0, 80.0);
    let statuses = [moon];
    let m = model("m");
    let ask = Ask::fresh(&m, 1500).behind(ahead(1, Some(0)));
    let e = &estimates(&statuses, &ask, Utc::now())[0];
    assert!((e.ttft_s - (3.0 + 3.75 + 1.0)).abs() < 1e-6, "{e:?}");
    assert_eq!((e.evicts.clone(), e.eviction_s), (None, 0.0));
}

#[test]
fn slot_times_look_at_running_answers_only_when_the_free_slots_do_not_suffice() {
    // Three slots, two running answers of 300-token answers at 30 tokens/s: one 100
    // tokens in (about 6.7 s left), one 280 tokens in (the floor of a tenth of an answer: 1 s left).
    let mut s = with_rates(status("w", true, 2), 1.0, 1000.0, 30.0);
    s.parallel = 3;
    s.running = vec![running("m", 4, 100, true), running("m", 9, 280, true)];
    let statuses = vec![s.clone()];
    let now = Utc::now();

    let m = model("m");
    assert_eq!(slot_free_times(&s, &m, &statuses, now, 1), vec![0.0]);
    let all = slot_free_times(&s, &m, &statuses, now, 2);
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all[0], 0.0);
    assert!((all[1] - 1.0).abs() < 0.01, "{all:?}");
    assert!((all[2] - 200.0 / 30.0).abs() < 0.01, "{all:?}");
    // Asking for more than there are slots gives every slot, no more.
    assert_eq!(slot_free_times(&s, &m, &statuses, now, 10), all);
}

#[test]
fn each_model_has_its_own_slots_as_far_as_the_machine_keeps_models() {
    // One slot per model; a coder answer 100 tokens into 300 at 30 tokens/s (6.7 s left).
    let mut s = with_rates(status("moon", true, 1), 1.0, 1000.0, 30.0);
    s.models.push(model("coder"));
    s.loaded.push(model("coder"));
    s.perf.push(rates("coder", 1.0, 1000.0, 30.0));
    s.running = vec![running("coder", 4, 100, true)];
    let now = Utc::now();
    let (m, coder) = (model("m"), model("coder"));

    // A machine that keeps two answers a chat beside the coder at once...
    s.max_loaded = Some(2);
    let statuses = vec![s.clone()];
    assert_eq!(slot_free_times(&s, &m, &statuses, now, 1), vec![0.0]);
    // ...but a second coder answer waits for the first.
    let coder_free = slot_free_times(&s, &coder, &statuses, now, 1);
    assert!(
        (coder_free[0] - 200.0 / 30.0).abs() < 0.01,
        "{coder_free:?}"
    );

    // A machine that keeps one answers the chat once the coder is done.
    s.max_loaded = Some(1);
    let statuses = vec![s.clone()];
    let chat_free = slot_free_times(&s, &m, &statuses, now, 1);
    assert!((chat_free[0] - 200.0 / 30.0).abs() < 0.01, "{chat_free:?}");
    let ask = Ask::fresh(&m, 100);
    let e = &estimates(&statuses, &ask, now)[0];
    assert!(e.ttft_s >= 200.0 / 30.0, "{e:?}");
}

#[test]
fn a_machine_of_unknown_room_is_tried_with_a_second_model_beside_a_running_one() {
    // The coder answers; `/api/ps` does not list it yet (its load is under way), and
    // whether the machine keeps two models is not known.
    let mut s = with_rates(status("moon", false, 1), 1.0, 1000.0, 30.0);
    s.models.push(model("coder"));
    s.perf.push(rates("coder", 1.0, 1000.0, 30.0));
    s.running = vec![running("coder", 4, 100, true)];
    assert_eq!(s.max_loaded, None);
    assert_eq!(s.models_at_once(), 2, "the one answering, and one more");
    let statuses = vec![s.clone()];
    let now = Utc::now();
    assert_eq!(
        slot_free_times(&s, &model("m"), &statuses, now, 1),
        vec![0.0]
    );
    // Known to keep one: the chat waits for the coder.
    s.max_loaded = Some(1);
    let statuses = vec![s.clone()];
    let chat_free = slot_free_times(&s, &model("m"), &statuses, now, 1);
    assert!((chat_free[0] - 200.0 / 30.0).abs() < 0.01, "{chat_free:?}");
}

#[test]
fn a_load_beside_busy_models_on_a_machine_of_unknown_room_is_counted_as_fitting() {
    // ai-core answers with the chat model `m`; how many models it keeps is not known.
    let mut s = with_rates(status("ai-core", true, 1), 3.0, 600.0, 50.0);
    s.models.push(model("small"));
    s.perf.push(rates("small", 1.0, 600.0, 50.0));
    s.running = vec![running("m", 2, 40, true)];
    assert_eq!(s.max_loaded, None);
    let small = model("small");
    let ask = Ask::fresh(&small, 60);
    let now = Utc::now();
    let on = |s: &WorkerStatus| estimate_on(s, &ask, std::slice::from_ref(s), now);
    let full = |s: &WorkerStatus| wait_if_full(s, &small, std::slice::from_ref(s), now);
    // Tried beside the answer: the load and the prompt...
    let e = on(&s);
    assert!(e.wait_s == 0.0 && e.evicts.is_none(), "{e:?}");
    assert!((e.ttft_s - (1.0 + 0.1)).abs() < 0.01, "{e:?}");
    // ...and were it full, the rest of the chat answer first (260 of 300 tokens at
    // 50/s): no lateness.
    assert!((full(&s) - 5.2).abs() < 0.01, "{}", full(&s));
    // Known to keep two: nothing to wait for, either way.
    let mut roomy = s.clone();
    roomy.max_loaded = Some(2);
    let e = on(&roomy);
    assert!(e.wait_s == 0.0 && e.evicts.is_none(), "{e:?}");
    assert_eq!(full(&roomy), 0.0);
    // Known to keep one: the load waits for the answer, and evicts its model.
    let mut one = s.clone();
    one.max_loaded = Some(1);
    let e = on(&one);
    assert!((e.wait_s - 5.2).abs() < 0.01, "{e:?}");
    assert_eq!(e.evicts, Some(model("m")), "{e:?}");
    assert_eq!(full(&one), 0.0, "placement counts it already");
    // The chat model idle: nothing to wait for (the load fits, or evicts it at once).
    let mut idle = s.clone();
    idle.running.clear();
    idle.in_flight = 0;
    let e = on(&idle);
    assert_eq!(e.wait_s, 0.0, "{e:?}");
    assert_eq!(full(&idle), 0.0);
}

/// A model resident beside a busy one on a machine of unknown room needs no room: a turn
/// for it waits for nothing, and the late rule must not count the busy model's answer as
/// a wait for room (it did, and in the household's seed 6 a turn for the chat model,
/// resident and free on moon while the coder answered, left moon after 100 ms for the
/// slower ai-core).
#[test]
fn a_model_resident_beside_a_busy_one_waits_for_no_room() {
    let mut s = with_rates(status("moon", true, 1), 3.0, 1500.0, 80.0);
    s.models.push(model("coder"));
    s.loaded.push(model("coder"));
    s.perf.push(rates("coder", 3.0, 1500.0, 80.0));
    s.running = vec![running("coder", 2, 40, true)];
    assert_eq!(s.max_loaded, None);
    let chat = model("m");
    let ask = Ask::fresh(&chat, 400);
    let now = Utc::now();
    let statuses = std::slice::from_ref(&s);
    let e = estimate_on(&s, &ask, statuses, now);
    assert!(e.resident && e.wait_s == 0.0, "{e:?}");
    assert_eq!(wait_if_full(&s, &chat, statuses, now), 0.0);
    // Not resident, it would wait for the coder were the machine full.
    let mut not = s.clone();
    not.loaded.retain(|m| m != &chat);
    let statuses = std::slice::from_ref(&not);
    assert!(wait_if_full(&not, &chat, statuses, now) > 0.0);
}

#[test]
fn a_free_machine_goes_before_a_busy_one_expected_as_soon() {
    // Moon has the model resident and its one slot busy with an answer that ends in about
    // three seconds; ai-core is idle and loads the model in as long. The task would wait
    // for moon's slot and hold it next: ai-core takes it, and whoever asks next finds moon
    // free after one answer instead of two.
    let mut moon = with_rates(status("moon", true, 1), 3.0, 1500.0, 80.0);
    moon.running = vec![running("m", 2, 40, true)];
    let ai_core = with_rates(status("ai-core", false, 0), 3.0, 300.0, 27.0);
    let m = model("m");
    let ask = Ask::fresh(&m, 30);
    let e = estimates(&[moon.clone(), ai_core.clone()], &ask, Utc::now());
    let (busy, free) = (&e[0], &e[1]);
    assert!(
        busy.waits() && busy.resident && !free.waits() && !free.resident,
        "{e:?}"
    );
    let (factor, seconds) = SAME_WITHIN;
    assert!(
        free.score() <= busy.score() * factor + seconds
            && busy.score() <= free.score() * factor + seconds,
        "the two are expected about as soon: {e:?}"
    );
    assert_eq!(best(&[moon.clone(), ai_core.clone()], 30), "ai-core");

    // Not when the free machine's load would push out a model resident there…
    let mut full = ai_core.clone();
    full.models.push(model("other"));
    full.loaded = vec![model("other")];
    full.max_loaded = Some(1);
    assert_eq!(best(&[moon.clone(), full], 30), "moon");
    // … nor when the busy machine holds the conversation in its prompt cache.
    let t = thread("chat");
    let mut cached = moon.clone();
    cached.recent = vec![Recent {
        model: m.clone(),
        thread: t.clone(),
        tokens: 500,
        at: Utc::now(),
    }];
    let ask = Ask {
        thread: Some(&t),
        fresh_tokens: 30,
        ..Ask::fresh(&m, 530)
    };
    assert_eq!(
        best_of(&[cached, ai_core.clone()], &ask)
            .unwrap()
            .to_string(),
        "moon"
    );
    // A resident model with a free slot needs no load and no wait: it goes first.
    let idle_moon = with_rates(status("moon", true, 0), 3.0, 1500.0, 80.0);
    assert_eq!(best(&[ai_core, idle_moon], 30), "moon");
}

#[test]
fn a_short_turn_keeps_the_idle_machine_when_a_long_one_waits_behind_it_for_the_fast_one() {
    // Seed 1's warm row: moon's chat slot is busy for about 2 s more; a 23-token turn is
    // sooner there (2 s) than on ai-core (its 6 s load), and a 2,291-token turn waits
    // behind it. Left for moon, the short one would hold moon's slot for a whole answer
    // and the long one would have its first token after 7 s; kept on ai-core, the short
    // one has it after 6 s and the long one after 3.5.
    let m = model("m");
    let mut moon = with_rates(status("moon", true, 1), 3.0, 1500.0, 80.0);
    moon.running = vec![running("m", 2, 150, true)];
    let ai_core = with_rates(status("ai-core", false, 0), 6.0, 300.0, 27.0);
    let statuses = [moon, ai_core];
    let (me, fast) = (statuses[1].name.clone(), statuses[0].name.clone());
    let short = Ask::fresh(&m, 23);
    assert_eq!(best_of(&statuses, &short), Some(fast.clone()));
    let long_behind = Ahead {
        jobs: 1,
        prompt_tokens: Some(2291),
    };
    assert!(kept(&statuses, &short, &me, &fast, long_behind));
    // Nothing behind it, or only another short turn: it goes to moon.
    assert!(!kept(&statuses, &short, &me, &fast, Ahead::NONE));
    let short_behind = Ahead {
        jobs: 1,
        prompt_tokens: Some(23),
    };
    assert!(!kept(&statuses, &short, &me, &fast, short_behind));
    // A long turn is not kept on the slow machine for a short one behind it: its own
    // wait there would be the longest.
    let long = Ask::fresh(&m, 2291);
    assert!(!kept(&statuses, &long, &me, &fast, short_behind));
}

/// Whether `me` should keep the ask's job for those `behind` it, rather than leave it for
/// `best` ([`keeper_for_those_behind`] with `me` as the only keeper).
fn kept(
    statuses: &[WorkerStatus],
    ask: &Ask<'_>,
    me: &WorkerName,
    best: &WorkerName,
    behind: Ahead,
) -> bool {
    let weighed = weighed(statuses, ask);
    keeper_for_those_behind(
        statuses,
        ask,
        &weighed,
        std::slice::from_ref(me),
        best,
        behind,
    )
    .is_some()
}

/// With one machine serving the model, placement names it without weighing anything, and
/// it is the machine the estimates would have named, healthy or not, busy or not; with
/// two, or none, there is no sole server.
#[test]
fn one_machine_serving_the_model_is_chosen_as_the_estimates_would() {
    let m = model("m");
    let ask = Ask::fresh(&m, 500);
    let other = crate::testkit::samples::idle_worker("other", &["x"]);
    let mut sick = status("sick", false, 0);
    sick.healthy = false;
    for only in [
        status("idle", true, 0),
        with_rates(status("busy", false, 1), 30.0, 10.0, 1.0),
        sick,
    ] {
        let statuses = vec![other.clone(), only.clone()];
        assert_eq!(sole_server(&statuses, &m), Some(only.name.clone()));
        assert_eq!(best_of(&statuses, &ask), Some(only.name.clone()));
        assert_eq!(
            best_among(&weighed(&statuses, &ask)),
            Some(only.name.clone()),
            "the estimates name the same machine"
        );
    }
    let two = vec![status("a", true, 0), status("b", true, 0)];
    assert_eq!(sole_server(&two, &m), None);
    assert_eq!(sole_server(&[other], &m), None);
}

/// `s` with the sizes of its models as `/api/tags` reports them.
fn sized(mut s: WorkerStatus, sizes: &[(&str, u64)]) -> WorkerStatus {
    s.sizes = sizes
        .iter()
        .map(|(m, bytes)| crate::backend::registry::ModelSize {
            model: model(m),
            bytes: *bytes,
        })
        .collect();
    s
}

const SEVEN_B: u64 = 4_700_000_000;
const THREE_B: u64 = 2_000_000_000;

#[test]
fn a_machine_that_ran_only_another_model_of_the_size_is_taken_at_its_own_rates() {
    // A cold morning: moon has run only the coder (only it has the coder), ai-core only
    // the chat model. Compared on nothing, moon's chat figures were ai-core's: a machine
    // three times as fast looked as slow as the mini PC.
    let sizes = [("chat", SEVEN_B), ("coder", SEVEN_B), ("small", THREE_B)];
    let mut moon = status("moon", false, 0);
    moon.models = vec![model("chat"), model("coder"), model("small")];
    moon.perf = vec![rates("coder", 3.0, 1500.0, 80.0)];
    let mut mini = status("ai-core", false, 0);
    mini.models = vec![model("chat"), model("small")];
    mini.perf = vec![rates("chat", 6.0, 300.0, 27.0)];
    let no_sizes = [moon.clone(), mini.clone()];
    let r = rates_on(&moon, &model("chat"), &no_sizes);
    assert!(
        (r.eval_tps - 27.0).abs() < 1e-6,
        "without sizes, as before: {r:?}"
    );
    let statuses = [sized(moon.clone(), &sizes), sized(mini.clone(), &sizes)];
    let r = rates_on(&statuses[0], &model("chat"), &statuses);
    assert!((r.prompt_tps - 1500.0).abs() < 1e-6, "{r:?}");
    assert!((r.eval_tps - 80.0).abs() < 1e-6, "{r:?}");
    assert!((r.load_s - 3.0).abs() < 1e-6, "{r:?}");
    // The mini PC's small model, which only moon ran (at 3,000 / 150 tokens a second,
    // loaded in 1.5 s), is the chat model's figures there scaled by size: 2.35 times
    // the rates, in 1 / 2.35 of the time. Without sizes it was taken at moon's.
    let mut moon_small = statuses[0].clone();
    moon_small.perf = vec![rates("small", 1.5, 3000.0, 150.0)];
    let statuses = [moon_small, statuses[1].clone()];
    let r = rates_on(&statuses[1], &model("small"), &statuses);
    let ratio = SEVEN_B as f64 / THREE_B as f64;
    assert!((r.prompt_tps - 300.0 * ratio).abs() < 1e-6, "{r:?}");
    assert!((r.eval_tps - 27.0 * ratio).abs() < 1e-6, "{r:?}");
    assert!((r.load_s - 6.0 / ratio).abs() < 1e-6, "{r:?}");
    // Where the machines compare on a model both ran, that comparison stands: the mini
    // PC that ran the small model too at a third of moon's rates is taken at a third of
    // moon's for the coder, whatever the sizes say.
    let mut both = statuses[1].clone();
    both.perf.push(rates("small", 3.0, 1000.0, 50.0));
    let mut moon_both = statuses[0].clone();
    moon_both.perf.push(rates("coder", 3.0, 1500.0, 80.0));
    let statuses = [moon_both, both];
    let r = rates_on(&statuses[1], &model("coder"), &statuses);
    assert!((r.eval_tps - 80.0 / 3.0).abs() < 1e-6, "{r:?}");
}

#[test]
fn a_load_known_only_as_a_bound_is_at_least_what_the_machines_other_loads_say_by_size() {
    // The laptop left a chat turn after 5.3 s with no first token, and loaded the small
    // model (2 GB) in 5 s; no other machine loaded the small model to compare it with.
    // Its disk reads the 4.7 GB chat model in about 11.75 s, not the bound's 5.3.
    let sizes = [("chat", SEVEN_B), ("small", THREE_B)];
    let mut moon = with_rates(status("moon", false, 0), 3.0, 1500.0, 80.0);
    moon.perf[0].model = model("chat");
    let mut laptop = status("laptop", false, 0);
    let mut bound = ModelPerf::new(model("chat"));
    bound.load_s = Some(5.3);
    bound.load_bound = true;
    laptop.perf = vec![rates("small", 5.0, 300.0, 20.0), bound];
    let statuses = [sized(moon, &sizes), sized(laptop, &sizes)];
    let r = rates_on(&statuses[1], &model("chat"), &statuses);
    assert!((r.load_s - 5.0 * 4.7 / 2.0).abs() < 1e-6, "{r:?}");
    // A bound longer than that stands; a load that was seen replaces both.
    let mut longer = statuses[1].clone();
    longer.perf[1].load_s = Some(14.0);
    let statuses = [statuses[0].clone(), longer];
    let r = rates_on(&statuses[1], &model("chat"), &statuses);
    assert!((r.load_s - 14.0).abs() < 1e-6, "{r:?}");
    let mut seen = statuses[1].clone();
    seen.perf[1].load_s = Some(9.0);
    seen.perf[1].load_bound = false;
    let statuses = [statuses[0].clone(), seen];
    let r = rates_on(&statuses[1], &model("chat"), &statuses);
    assert!((r.load_s - 9.0).abs() < 1e-6, "{r:?}");
}

#[test]
fn a_close_call_goes_to_the_machine_whose_figures_are_shown_not_guessed() {
    // Moon holds two models at most, `a` and `b` resident, one conversation came back to
    // each lately, to `a` first; it has run `c` (a 3 s load). The laptop has run nothing: its load of `c`
    // is moon's taken with caution (4.5 s), a guess. For a 3,000-token prompt moon's
    // reload and what it costs `a` (3 + 2 + 3 s) and the laptop's guess (4.5 + 3 s) are
    // close: moon's shown figures go before the guess that pushes out nothing.
    let now = Utc::now();
    let c = model("c");
    let ask = Ask::fresh(&c, 3000);
    let (mut moon, _) = full_moon(0);
    moon.models.push(c.clone());
    moon.perf.push(rates("c", 3.0, 1500.0, 80.0));
    moon.recent = vec![
        Recent {
            thread: thread("t"),
            model: model("a"),
            at: now - Duration::seconds(30),
            tokens: 100,
        },
        Recent {
            thread: thread("u"),
            model: model("b"),
            at: now - Duration::seconds(20),
            tokens: 100,
        },
    ];
    let mut laptop = status("laptop", false, 0);
    laptop.models = vec![c.clone()];
    let statuses = [moon.clone(), laptop.clone()];
    let e = estimates(&statuses, &ask, now);
    let (shown, guess) = (&e[0], &e[1]);
    assert!(!shown.guessed && guess.guessed, "{e:?}");
    assert_eq!(shown.evicts, Some(model("a")));
    assert!(guess.evicts.is_none() && !guess.waits(), "{e:?}");
    let (factor, seconds) = SAME_WITHIN;
    assert!(
        guess.score() < shown.score() && shown.score() <= guess.score() * factor + seconds,
        "close, the guess ahead: {e:?}"
    );
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "moon");

    // Once the laptop has shown its figures for `c` (the same ones), they are no guess
    // and the machine that pushes out nothing takes the close call.
    laptop.perf = vec![rates("c", 4.5, 1000.0, 50.0)];
    let statuses = [moon.clone(), laptop.clone()];
    let e = estimates(&statuses, &ask, now);
    assert!(!e[1].guessed, "{e:?}");
    assert!((e[1].score() - guess.score()).abs() < 1e-6, "{e:?}");
    assert_eq!(best_of(&statuses, &ask).unwrap().to_string(), "laptop");

    // A machine that has shown only another model is no guess once it compares with
    // another machine that ran that model too; until then its figures are the fleet's.
    let mut ai_core = status("ai-core", false, 0);
    ai_core.models = vec![c.clone(), model("small")];
    ai_core.perf = vec![rates("small", 3.0, 600.0, 50.0)];
    assert!(!rates_shown(&ai_core, &c, &[laptop, ai_core.clone()]).1);
    // Moon ran `small` too.
    assert!(rates_shown(&ai_core, &c, &[moon, ai_core.clone()]).1);
}
