//! Keep-alives and what the machine holds: the order Ollama pushes resident models out
//! in, the keep-alives Coordinator sends and learns, the looks at `/api/ps` between
//! answers, and a machine whose clock reads apart from Coordinator's.

use std::time::Duration;

use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer, Realism, Speed};
use serde_json::{Value, json};

use crate::helpers::{MODEL, spawn_app_with};

/// A realistic machine keeping `max_loaded` models, whose loads take 300 ms and whose
/// answers are a few tokens, in real time.
async fn machine_of(models: &[&str], max_loaded: usize, keep_alive: Duration) -> FakeLlmServer {
    machine_ahead(models, max_loaded, keep_alive, chrono::TimeDelta::zero()).await
}

/// [`machine_of`], its clock reading `ahead` of this one's.
async fn machine_ahead(
    models: &[&str],
    max_loaded: usize,
    keep_alive: Duration,
    ahead: chrono::TimeDelta,
) -> FakeLlmServer {
    models
        .iter()
        .fold(FakeLlm::builder().clock_ahead(ahead), |b, m| b.model(*m))
        .realistic(Realism {
            max_loaded,
            keep_alive: coordinator::testkit::fake_llm::KeepAlive::For(keep_alive),
            speed: Speed {
                load: Duration::from_millis(300),
                prompt_tps: 10_000.0,
                eval_tps: 1_000.0,
            },
            answer_tokens: (4, 4),
            ..Realism::default()
        })
        .spawn()
        .await
        .unwrap()
}

/// Where `/workers` shows machine `w`'s resident model `m` in Ollama's order of models
/// to push out (`evict_rank`), if it does.
fn evict_rank(w: &Value, m: &str) -> Option<u64> {
    w["resident"]
        .as_array()?
        .iter()
        .find(|r| r["model"] == m)
        .and_then(|r| r["evict_rank"].as_u64())
}

/// Another client of the machine (the owner's script, `ollama run`) sends `body` to its
/// `/api/chat` straight, past Coordinator; the machine answers it.
async fn chat_on_the_machine(fake: &FakeLlmServer, body: Value) {
    let res = reqwest::Client::new()
        .post(format!("{}/api/chat", fake.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{body}");
}

/// What the fake's `/api/ps` lists, by name.
async fn listed(fake: &FakeLlmServer) -> Vec<String> {
    let ps: Value = reqwest::get(format!("{}/api/ps", fake.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<String> = ps["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// Ollama pushes out the idle model whose last request set the shortest keep-alive, then
/// the first by model file path, not the least recently used. Coordinator stamps each
/// keep-alive with the time it is sent, so that within one keep-alive the least recently
/// used goes first, as placement weighs it. `alpha`'s file sorts before `beta`'s: sent as
/// asked ("5m" each), the machine keeping two pushes out `alpha`, used last, to load
/// `gamma`; stamped, it pushes out `beta`.
#[tokio::test]
async fn ollama_pushes_out_the_least_recently_used_model_once_keep_alives_are_stamped() {
    let app = alpha_beta_alpha_gamma(json!("5m")).await;
    assert_eq!(listed(&app.fake).await, ["alpha", "gamma"]);
    let stats = app.fake.stats();
    assert_eq!((stats.loads, stats.evictions), (3, 1), "{stats:?}");
    // Each request carried five minutes, stamped no earlier than the one before.
    let sent: Vec<Value> = app
        .fake
        .requests_to("/api/chat")
        .iter()
        .map(|r| r.body.as_ref().unwrap()["keep_alive"].clone())
        .collect();
    let ranks: Vec<u64> = sent
        .iter()
        .map(|k| {
            crate::helpers::assert_keep_alive(k, 300);
            coordinator::backend::keep_alive::KeepAlive::parse(k)
                .unwrap()
                .rank()
        })
        .collect();
    // Requests a tenth of a second apart are told apart (a load of 300 ms came between
    // each of the first three); the last came at once after the third.
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{sent:?}");
    assert!(ranks[0] < ranks[1] && ranks[1] < ranks[2], "{sent:?}");
    // `/workers` shows the order placement reads: `alpha` goes no later than `gamma`.
    let w = crate::placement::worker_until(&app, "moon", |w| {
        w["resident"].as_array().is_some_and(|r| r.len() == 2)
    })
    .await;
    let rank_of = |m: &str| evict_rank(&w, m).unwrap_or_else(|| panic!("{m}'s rank is shown: {w}"));
    assert!(rank_of("alpha") <= rank_of("gamma"), "{w}");
    app.stop().await;
}

/// A machine keeping two of `alpha`, `beta` and `gamma` after a chat with each of
/// `alpha`, `beta`, `alpha`, `gamma` in turn, every request asking for `keep_alive`.
async fn alpha_beta_alpha_gamma(keep_alive: Value) -> crate::helpers::TestApp {
    let fake = machine_of(&["alpha", "beta", "gamma"], 2, Duration::from_secs(300)).await;
    let app = spawn_app_with(fake, |c| c.backends[0].parallel = 1).await;
    for model in ["alpha", "beta", "alpha", "gamma"] {
        let res = app
            .post(
                "/api/chat",
                json!({"model": model, "stream": false, "keep_alive": keep_alive,
                       "messages": [{"role": "user", "content": format!("hello {model}")}]}),
            )
            .await;
        assert_eq!(res.status(), 200, "{model}");
    }
    app
}

/// Models kept forever (`keep_alive: -1`) all rank alike in Ollama, which then goes by
/// file path: Coordinator sends two hundred years, stamped, and the least recently used
/// of them goes first.
#[tokio::test]
async fn models_kept_forever_are_pushed_out_least_recently_used_first() {
    let app = alpha_beta_alpha_gamma(json!(-1)).await;
    assert_eq!(listed(&app.fake).await, ["alpha", "gamma"]);
    let sent = app.last_backend_body("/api/chat")["keep_alive"].clone();
    match coordinator::backend::keep_alive::KeepAlive::parse(&sent) {
        Some(coordinator::backend::keep_alive::KeepAlive::For(d)) => {
            assert_eq!(d.as_secs(), 200 * 365 * 86_400, "{sent}")
        }
        other => panic!("{sent}: {other:?}"),
    }
    // `/api/ps` shows the expiry two centuries ahead; `/workers` keeps it.
    let ps: Value = reqwest::get(format!("{}/api/ps", app.fake.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expires = ps["models"][0]["expires_at"].as_str().unwrap().to_owned();
    assert!(expires.starts_with("22"), "{expires}");
    app.stop().await;
}

/// Models resident before Coordinator started (or loaded by another client of the
/// machine) rank in Ollama's order by the keep-alive they were loaded with, which
/// `/api/ps` shows as their expiry: the owner keeps `alpha` forever and `beta` five
/// minutes, so a load of `gamma` pushes out `beta`, as placement expects, although
/// `alpha`'s file sorts first.
#[tokio::test]
async fn models_resident_before_start_rank_by_their_expiry() {
    let fake = machine_of(&["alpha", "beta", "gamma"], 2, Duration::from_secs(300)).await;
    // `alpha` loaded last: `/api/ps` lists it first.
    for (model, keep_alive) in [("beta", json!("5m")), ("alpha", json!(-1))] {
        chat_on_the_machine(
            &fake,
            json!({"model": model, "messages": [], "keep_alive": keep_alive}),
        )
        .await;
    }
    let app = spawn_app_with(fake, |c| {
        c.backends[0].parallel = 1;
        c.backends[0].max_loaded = Some(2);
    })
    .await;
    let w = crate::placement::worker_until(&app, "moon", |w| {
        w["resident"]
            .as_array()
            .is_some_and(|r| r.len() == 2 && r.iter().all(|r| r["expires_at"].is_string()))
    })
    .await;
    let status: coordinator::backend::registry::WorkerStatus =
        serde_json::from_value(w.clone()).unwrap();
    let model = |m: &str| coordinator::domain::ModelName::parse(m).unwrap();
    let beta = model("beta");
    assert_eq!(
        coordinator::placement::pushes_out(&status, &model("gamma")),
        coordinator::placement::Pushes::Idle(&beta),
        "{w}"
    );
    let res = app
        .post(
            "/api/chat",
            json!({"model": "gamma", "stream": false,
                   "messages": [{"role": "user", "content": "hello gamma"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(listed(&app.fake).await, ["alpha", "gamma"]);
    app.stop().await;
}

/// A model another client of the machine asked to keep longer ranks by what that client
/// set, not by the keep-alive Coordinator sent it before: Coordinator serves `alpha` and
/// then `beta`, ten minutes each; then the owner's script chats with `alpha` straight on
/// the machine and keeps it two hours. Ollama now pushes out `beta` to load `gamma`, and
/// placement expects it to.
#[tokio::test]
async fn a_keep_alive_another_client_set_since_outranks_the_one_sent_here() {
    let fake = machine_of(&["alpha", "beta", "gamma"], 2, Duration::from_secs(300)).await;
    let app = spawn_app_with(fake, |c| {
        c.backends[0].parallel = 1;
        c.backends[0].max_loaded = Some(2);
        c.timeouts.discovery_interval_s = 1;
    })
    .await;
    let ask = |model: &str| {
        json!({"model": model, "stream": false, "keep_alive": "10m",
               "messages": [{"role": "user", "content": format!("hello {model}")}]})
    };
    for model in ["alpha", "beta"] {
        assert_eq!(
            app.post("/api/chat", ask(model)).await.status(),
            200,
            "{model}"
        );
    }
    let sent = |model: &str| {
        let body = app
            .fake
            .requests_to("/api/chat")
            .into_iter()
            .filter_map(|r| r.body)
            .rfind(|b| b["model"] == model)
            .unwrap();
        let rank = coordinator::backend::keep_alive::KeepAlive::parse(&body["keep_alive"])
            .unwrap()
            .rank();
        (body, rank)
    };
    let (alpha_body, _) = sent("alpha");
    let (_, beta_rank) = sent("beta");
    // The owner's script, with the window Coordinator loaded `alpha` with (another
    // window would reload it).
    let mut theirs = ask("alpha");
    theirs["keep_alive"] = json!("2h");
    if let Some(options) = alpha_body.get("options") {
        theirs["options"] = options.clone();
    }
    chat_on_the_machine(&app.fake, theirs).await;
    assert_eq!(app.fake.stats().loads, 2, "the owner's chat loaded nothing");
    let w = crate::placement::worker_until(&app, "moon", |w| {
        evict_rank(w, "alpha").is_some_and(|a| a > 3_600_000_000_000)
    })
    .await;
    assert_eq!(evict_rank(&w, "beta"), Some(beta_rank), "{w}");
    let status: coordinator::backend::registry::WorkerStatus =
        serde_json::from_value(w.clone()).unwrap();
    let beta = coordinator::domain::ModelName::parse("beta").unwrap();
    let gamma = coordinator::domain::ModelName::parse("gamma").unwrap();
    assert_eq!(
        coordinator::placement::pushes_out(&status, &gamma),
        coordinator::placement::Pushes::Idle(&beta),
        "{w}"
    );
    assert_eq!(app.post("/api/chat", ask("gamma")).await.status(), 200);
    assert_eq!(listed(&app.fake).await, ["alpha", "gamma"]);
    app.stop().await;
}

/// Between answers, Coordinator asks the machine which models it holds every
/// `look_interval_s`: the owner unloads `alpha` straight on the machine (`ollama stop`)
/// and later loads `beta` there, with no answer through Coordinator in between, and
/// `/workers` shows each within the interval, although discovery comes once an hour.
#[tokio::test]
async fn the_machines_resident_models_are_looked_at_between_answers() {
    let fake = machine_of(&["alpha", "beta"], 2, Duration::from_secs(300)).await;
    let app = spawn_app_with(fake, |c| {
        c.timeouts.discovery_interval_s = 3600;
        c.timeouts.look_interval_s = 1;
    })
    .await;
    let res = app
        .post(
            "/api/chat",
            // A keep-alive of its own: no look comes to learn the server's.
            json!({"model": "alpha", "stream": false, "keep_alive": "5m",
                   "messages": [{"role": "user", "content": "hello alpha"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    crate::placement::worker_until(&app, "moon", |w| w["loaded"] == json!(["alpha"])).await;
    let looks = app.fake.requests_to("/api/ps").len();
    let owner = |model: &str, keep_alive: Value| {
        let body = json!({"model": model, "messages": [], "keep_alive": keep_alive});
        chat_on_the_machine(&app.fake, body)
    };
    owner("alpha", json!(0)).await;
    assert!(listed(&app.fake).await.is_empty());
    crate::placement::worker_until(&app, "moon", |w| w["loaded"] == json!([])).await;
    owner("beta", json!("5m")).await;
    let w = crate::placement::worker_until(&app, "moon", |w| w["loaded"] == json!(["beta"])).await;
    assert!(w["resident"][0]["expires_at"].is_string(), "{w}");
    assert!(app.fake.requests_to("/api/ps").len() >= looks + 2);
    app.stop().await;
}

/// Where neither the request nor the config sets a keep-alive, the server's own applies
/// (`OLLAMA_KEEP_ALIVE`, seven minutes on this machine): Coordinator sends none until it
/// has learned it from `/api/ps` after a load, shows it in `/workers`, and then sends it
/// stamped.
#[tokio::test]
async fn the_servers_own_keep_alive_is_learned_and_then_sent_stamped() {
    let fake = machine_of(&[MODEL], 1, Duration::from_secs(420)).await;
    let app = spawn_app_with(fake, |_| {}).await;
    let ask = |content: &str| {
        json!({"model": MODEL, "stream": false,
               "messages": [{"role": "user", "content": content}]})
    };
    assert_eq!(app.post("/api/chat", ask("first")).await.status(), 200);
    let first = app.last_backend_body("/api/chat");
    assert!(first.get("keep_alive").is_none(), "{first}");
    crate::placement::worker_until(&app, "moon", |w| w["server_keep_alive_s"] == 420).await;
    assert_eq!(app.post("/api/chat", ask("second")).await.status(), 200);
    crate::helpers::assert_keep_alive(&app.last_backend_body("/api/chat")["keep_alive"], 420);
    app.stop().await;
}

/// A machine whose clock reads 20 s ahead of Coordinator's (a home machine weeks from
/// its last sync) tells its expiries on that clock. Coordinator reads them on its own:
/// the keep-alive it sent `beta` ("10m") stays the one the machine ranks it by, it learns
/// the server's own keep-alive as seven minutes, not seven minutes and twenty seconds,
/// and `/workers` shows the expiries on its clock and how far ahead the machine's is.
#[tokio::test]
async fn a_machine_whose_clock_is_ahead_is_read_on_coordinators_clock() {
    let ahead = chrono::TimeDelta::seconds(20);
    let fake = machine_ahead(&["alpha", "beta"], 2, Duration::from_secs(420), ahead).await;
    let app = spawn_app_with(fake, |c| c.backends[0].max_loaded = Some(2)).await;
    let res = app
        .post(
            "/api/chat",
            json!({"model": "beta", "stream": false, "keep_alive": "10m",
                   "messages": [{"role": "user", "content": "hello beta"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let beta_rank = coordinator::backend::keep_alive::KeepAlive::parse(
        &app.last_backend_body("/api/chat")["keep_alive"],
    )
    .unwrap()
    .rank();
    // `alpha` with no keep-alive: the server's own applies, learned at a look once its
    // expiry is set, by when `beta`'s request ended long enough ago to be checked too.
    let res = app
        .post(
            "/api/chat",
            json!({"model": "alpha", "stream": false,
                   "messages": [{"role": "user", "content": "hello alpha"}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let w = crate::placement::worker_until(&app, "moon", |w| {
        w["server_keep_alive_s"].as_i64().is_some()
    })
    .await;
    // To the second: one look's whole-second `Date` places the clock within about half
    // a second (unread, it would be 440).
    let learned = w["server_keep_alive_s"].as_i64().unwrap();
    assert!((419..=421).contains(&learned), "{w}");
    assert_eq!(evict_rank(&w, "beta"), Some(beta_rank), "{w}");
    let found = w["clock_ahead_ms"].as_i64().unwrap();
    assert!((found - 20_000).abs() <= 600, "{w}");
    let expires_at = w["resident"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["model"] == "beta")
        .and_then(|r| r["expires_at"].as_str())
        .and_then(|e| chrono::DateTime::parse_from_rfc3339(e).ok())
        .unwrap();
    let left = expires_at.to_utc() - chrono::Utc::now();
    assert!(
        left > chrono::TimeDelta::seconds(590) && left <= chrono::TimeDelta::seconds(601),
        "{w}"
    );
    app.stop().await;
}

/// An idle machine's clock is placed closer with every look between answers: the looks
/// come at fractions of a second that spread across it, so their whole-second `Date`s
/// narrow the offset (20.3 s here) to a tenth of a second within a dozen looks.
#[tokio::test]
async fn an_idle_machines_clock_is_placed_closer_with_every_look() {
    let ahead = chrono::TimeDelta::milliseconds(20_300);
    let fake = machine_ahead(&["alpha"], 1, Duration::from_secs(300), ahead).await;
    let app = spawn_app_with(fake, |c| {
        c.timeouts.discovery_interval_s = 3600;
        c.timeouts.look_interval_s = 1;
    })
    .await;
    // Polled: the looks come on their own time.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let workers: Value = app.get("/workers").await.json().await.unwrap();
        let found = workers["workers"][0]["clock_ahead_ms"].as_i64();
        if found.is_some_and(|ms| (ms - 20_300).abs() <= 100) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {found:?} after {} looks",
            app.fake.requests_to("/api/ps").len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}
