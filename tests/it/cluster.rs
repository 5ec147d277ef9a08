//! Cluster mode against real PostgreSQL and Redis: `serve` routes, `coordinator worker`
//! processes run the tasks, and nothing accepted is lost when a worker is killed or Redis
//! restarts. Runs when `DATABASE_URL` and `REDIS_URL` are set (`.ci/run` sets them).

use std::process::Stdio;
use std::time::{Duration, Instant};

use coordinator::config::{BackendConfig, BackendKind, Config, QueueConfig, StoreConfig};
use coordinator::startup::{Application, WorkerProcess};
use coordinator::testkit::fake_llm::FakeLlmServer;
use coordinator::testkit::redis_server::RedisServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;

use crate::helpers::spawn_fake;

pub(crate) struct Env {
    db: String,
    pub(crate) redis: String,
    pub(crate) schema: String,
    pub(crate) prefix: String,
}

pub(crate) fn env() -> Option<Env> {
    let (Ok(db), Ok(redis)) = (std::env::var("DATABASE_URL"), std::env::var("REDIS_URL")) else {
        eprintln!("note: DATABASE_URL / REDIS_URL not set; cluster test skipped");
        return None;
    };
    let id = uuid::Uuid::now_v7().simple().to_string();
    Some(Env {
        db,
        redis,
        schema: format!("it_{}", &id[id.len() - 16..]),
        prefix: format!("it{}:", &id[id.len() - 16..]),
    })
}

pub(crate) fn cluster_config(env: &Env, redis_url: &str) -> Config {
    let mut c = Config::default();
    c.server.listen = "127.0.0.1:0".into();
    c.server.shutdown_grace_s = 2;
    c.store = StoreConfig::Postgres {
        url: env.db.as_str().into(),
        schema: Some(env.schema.clone()),
    };
    c.queue = QueueConfig::Redis {
        url: redis_url.into(),
        prefix: env.prefix.clone(),
        lease_s: 2,
    };
    c
}

pub(crate) fn backend(name: &str, fake: &FakeLlmServer) -> BackendConfig {
    BackendConfig {
        name: name.into(),
        kind: BackendKind::Ollama,
        url: fake.base_url(),
        models: None,
        api_key_env: None,
        parallel: 4,
        max_loaded: None,
        keep_alive: Default::default(),
        context_length: None,
        model_context_length: Default::default(),
        max_num_ctx: None,
    }
}

/// `serve` in this process: its base URL, the sender that stops it, and its task.
pub(crate) async fn serve_in_process(
    config: Config,
) -> (
    String,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let app = Application::build(config).await.unwrap();
    let base = format!("http://{}", app.local_addr());
    let (stop, rx) = oneshot::channel::<()>();
    let serve = tokio::spawn(app.run_until_stopped(async move {
        let _ = rx.await;
    }));
    (base, stop, serve)
}

/// A `coordinator worker` named `laptop` with one slot on `fake`, and `serve` with
/// `serve_config` (its `admin` key, if it has keys), returned once the worker shows up.
pub(crate) struct OneSlot {
    pub base: String,
    stop: oneshot::Sender<()>,
    serve: tokio::task::JoinHandle<anyhow::Result<()>>,
    wstop: oneshot::Sender<()>,
    wtask: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl OneSlot {
    pub(crate) async fn start(
        env: &Env,
        fake: &FakeLlmServer,
        serve_config: Config,
        admin: Option<&str>,
    ) -> Self {
        let mut wcfg = cluster_config(env, &env.redis);
        let mut one_slot = backend("ollama", fake);
        one_slot.parallel = 1;
        wcfg.backends = vec![one_slot];
        let worker = WorkerProcess::build(wcfg, Some("laptop")).await.unwrap();
        let (wstop, wrx) = oneshot::channel::<()>();
        let wtask = tokio::spawn(worker.run_until_stopped(async move {
            let _ = wrx.await;
        }));
        let (base, stop, serve) = serve_in_process(serve_config).await;
        let http = reqwest::Client::new();
        eventually(Duration::from_secs(10), "the worker shows up", || async {
            let mut req = http.get(format!("{base}/workers"));
            if let Some(key) = admin {
                req = req.bearer_auth(key);
            }
            let Ok(res) = req.send().await else {
                return false;
            };
            res.text().await.is_ok_and(|t| t.contains("laptop"))
        })
        .await;
        Self {
            base,
            stop,
            serve,
            wstop,
            wtask,
        }
    }

    /// [`OneSlot::start`] with `serve` keyed for the household
    /// ([`crate::people::household_keys`]) and changed by `tweak`, and the household's
    /// clients of it.
    pub(crate) async fn household(
        env: &Env,
        fake: &FakeLlmServer,
        tweak: impl FnOnce(&mut Config),
    ) -> (Self, crate::people::Household) {
        let mut config = cluster_config(env, &env.redis);
        crate::people::household_keys(&mut config);
        tweak(&mut config);
        let cluster = Self::start(env, fake, config, Some(crate::people::ADMIN.0)).await;
        let h = crate::people::Household {
            base: cluster.base.clone(),
            http: reqwest::Client::new(),
        };
        (cluster, h)
    }

    /// Stops the worker, then `serve`, and drops the test's keys and schema.
    pub(crate) async fn stop(self, env: &Env) {
        self.wstop.send(()).unwrap();
        self.wtask.await.unwrap().unwrap();
        self.stop.send(()).unwrap();
        self.serve.await.unwrap().unwrap();
        cleanup(env).await;
    }
}

/// Polls `check` until it holds or `limit` passes (the state under test is external).
pub(crate) async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn worker_names(http: &reqwest::Client, base: &str) -> Vec<String> {
    let Ok(res) = http.get(format!("{base}/workers")).send().await else {
        return vec![];
    };
    let body: Value = res.json().await.unwrap_or_default();
    body["workers"]
        .as_array()
        .map(|ws| {
            ws.iter()
                .filter_map(|w| w["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `GET url`, and the JSON answer.
pub(crate) async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    http.get(url).send().await.unwrap().json().await.unwrap()
}

/// `POST url` with a JSON body, and the JSON answer.
async fn post_json(http: &reqwest::Client, url: &str, body: Value) -> Value {
    http.post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub(crate) async fn pg(env: &Env) -> sqlx::PgPool {
    sqlx::PgPool::connect(&env.db).await.unwrap()
}

async fn statuses(pool: &sqlx::PgPool, schema: &str) -> Vec<(String, String, Option<String>, i64)> {
    // The schema name is generated by the test (letters, digits, underscore).
    sqlx::query_as(&format!(
        "SELECT task_id::text, status, worker_id, attempts FROM {schema}.tasks"
    ))
    .fetch_all(pool)
    .await
    .unwrap()
}

pub(crate) async fn cleanup(env: &Env) {
    let pool = pg(env).await;
    let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {} CASCADE", env.schema))
        .execute(&pool)
        .await;
    let _ = coordinator::testkit::redis_server::delete_keys(&env.redis, &env.prefix).await;
}

#[tokio::test]
async fn serve_routes_and_a_worker_process_runs_the_task() {
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    let mut wcfg = cluster_config(&env, &env.redis);
    wcfg.backends = vec![backend("ollama", &fake)];
    let worker = WorkerProcess::build(wcfg, Some("gpu-desktop"))
        .await
        .unwrap();
    let (wstop, wrx) = oneshot::channel::<()>();
    let wtask = tokio::spawn(worker.run_until_stopped(async move {
        let _ = wrx.await;
    }));

    let (base, stop, serve) = serve_in_process(cluster_config(&env, &env.redis)).await;
    let http = reqwest::Client::new();
    eventually(
        Duration::from_secs(10),
        "the worker shows up in /workers",
        || async {
            worker_names(&http, &base)
                .await
                .contains(&"gpu-desktop".to_owned())
        },
    )
    .await;

    let routed = post_json(
        &http,
        &format!("{base}/route"),
        json!({"prompt": "クラスタで動く？"}),
    )
    .await;
    assert_eq!(routed["worker_id"], "gpu-desktop", "{routed}");
    let id = routed["task_id"].as_str().unwrap().to_owned();

    // Streaming through Redis: tokens arrive as SSE from another process's worker.
    let res = http
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "one two three"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body = res.text().await.unwrap();
    assert!(
        body.contains("\"three\"") || body.contains(" three"),
        "{body}"
    );
    assert!(body.trim_end().ends_with("data: [DONE]"));

    let pool = pg(&env).await;
    eventually(
        Duration::from_secs(10),
        "the routed task is done",
        || async {
            statuses(&pool, &env.schema)
                .await
                .iter()
                .any(|(t, s, _, _)| t == &id && s == "done")
        },
    )
    .await;
    // As in the seed: psql -c "SELECT prompt FROM tasks WHERE task_id = '...'"
    let prompt: String = sqlx::query_scalar(&format!(
        "SELECT prompt FROM {}.tasks WHERE task_id = $1::uuid",
        env.schema
    ))
    .bind(&id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(prompt, "クラスタで動く？");

    // The worker leaves: it drops out of /workers.
    wstop.send(()).unwrap();
    wtask.await.unwrap().unwrap();
    eventually(Duration::from_secs(10), "the worker drops out", || async {
        !worker_names(&http, &base)
            .await
            .contains(&"gpu-desktop".to_owned())
    })
    .await;
    stop.send(()).unwrap();
    serve.await.unwrap().unwrap();
    cleanup(&env).await;
}

/// A `coordinator` child process; killed when dropped.
pub(crate) struct Child(tokio::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

pub(crate) fn command(env: &Env, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_coordinator"));
    cmd.args(args)
        .env("COORDINATOR_STORE__TYPE", "postgres")
        .env("COORDINATOR_STORE__URL", &env.db)
        .env("COORDINATOR_STORE__SCHEMA", &env.schema)
        .env("COORDINATOR_QUEUE__TYPE", "redis")
        .env("COORDINATOR_QUEUE__URL", &env.redis)
        .env("COORDINATOR_QUEUE__PREFIX", &env.prefix)
        .env("COORDINATOR_QUEUE__LEASE_S", "2")
        // These tests load the cluster as one client far past any person's rate.
        .env("COORDINATOR_LIMITS__REQUESTS_PER_MINUTE", "0")
        .env("RUST_LOG", "info")
        .kill_on_drop(true)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd
}

/// Starts `coordinator serve` and returns it with the address it listens on.
pub(crate) async fn spawn_serve(env: &Env) -> (Child, String) {
    let mut child = command(env, &["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = crate::helpers::listen_addr(&mut lines).await;
    // Keep draining its log so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (Child(child), format!("http://{addr}"))
}

pub(crate) fn spawn_worker(env: &Env, name: &str, fake: &FakeLlmServer) -> Child {
    Child(
        command(
            env,
            &["worker", "--name", name, "--ollama", &fake.base_url()],
        )
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    )
}

#[tokio::test]
async fn killing_a_worker_mid_load_loses_no_task() {
    let Some(env) = env() else { return };
    let fake1 = spawn_fake().await;
    let fake2 = spawn_fake().await;
    for f in [&fake1, &fake2] {
        f.update_knobs(|k| {
            k.token_delay = Duration::from_millis(10);
            k.tokens = Some(8);
            k.record = false;
        });
    }
    let (_serve, base) = spawn_serve(&env).await;
    let mut w1 = spawn_worker(&env, "w1", &fake1);
    let _w2 = spawn_worker(&env, "w2", &fake2);
    let http = reqwest::Client::new();
    eventually(
        Duration::from_secs(20),
        "both workers registered",
        || async {
            let names = worker_names(&http, &base).await;
            names.contains(&"w1".to_owned()) && names.contains(&"w2".to_owned())
        },
    )
    .await;

    let mut ids = Vec::new();
    for i in 0..200 {
        let res = http
            .post(format!("{base}/route"))
            .json(&json!({"prompt": format!("task {i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        ids.push(body["task_id"].as_str().unwrap().to_owned());
    }
    eventually(Duration::from_secs(30), "w1 is busy", || async {
        fake1.request_count() >= 10
    })
    .await;
    // Answers w1 starts from now on stay running (held after their first token), so it
    // is killed with tasks in flight however slowly this machine runs the test.
    fake1.hold();
    let before_hold = fake1.request_count();
    eventually(
        Duration::from_secs(30),
        "w1 has an answer in flight",
        || async { fake1.request_count() > before_hold },
    )
    .await;
    w1.0.start_kill().unwrap(); // SIGKILL: no chance to clean up
    let _ = w1.0.wait().await;
    let killed_at = fake1.request_count();

    let pool = pg(&env).await;
    eventually(
        Duration::from_secs(120),
        "all 200 tasks finished",
        || async {
            let rows = statuses(&pool, &env.schema).await;
            rows.len() == 200 && rows.iter().all(|(_, s, _, _)| s == "done" || s == "failed")
        },
    )
    .await;
    let rows = statuses(&pool, &env.schema).await;
    assert_eq!(rows.len(), 200, "one row per task");
    let failed: Vec<_> = rows.iter().filter(|(_, s, _, _)| s != "done").collect();
    assert!(failed.is_empty(), "every task ends done: {failed:?}");
    for id in &ids {
        assert!(
            rows.iter().any(|(t, _, _, _)| t == id),
            "task {id} is recorded"
        );
    }
    let by_w2 = rows
        .iter()
        .filter(|(_, _, w, _)| w.as_deref() == Some("w2"))
        .count();
    assert!(
        by_w2 > 0 && by_w2 >= 200 - killed_at as usize,
        "the survivor finished the rest: w2 did {by_w2}, w1 had started {killed_at}"
    );
    let retried = rows
        .iter()
        .filter(|(_, _, w, a)| w.as_deref() == Some("w2") && *a >= 2)
        .count();
    assert!(
        retried > 0,
        "the killed worker's running tasks were taken over after the lease"
    );
    assert_eq!(
        fake1.request_count(),
        killed_at,
        "the killed worker did nothing more"
    );
    cleanup(&env).await;
}

#[tokio::test]
async fn a_redis_restart_under_load_loses_no_accepted_task() {
    let Some(env) = env() else { return };
    let _log = std::env::var("IT_LOG")
        .is_ok()
        .then(|| coordinator::telemetry::init(false));
    if RedisServer::binary().is_none() {
        eprintln!("note: redis-server not found; test skipped");
        return;
    }
    let mut redis = RedisServer::start().await.unwrap();
    let fake = spawn_fake().await;
    fake.update_knobs(|k| {
        k.token_delay = Duration::from_millis(5);
        k.tokens = Some(6);
    });
    let mut cfg = cluster_config(&env, &redis.url());
    cfg.backends = vec![backend("moon", &fake)];
    let (base, stop, serve) = serve_in_process(cfg).await;
    let http = reqwest::Client::new();
    eventually(
        Duration::from_secs(10),
        "the local worker registered",
        || async {
            worker_names(&http, &base)
                .await
                .contains(&"moon".to_owned())
        },
    )
    .await;

    let mut accepted = Vec::new();
    let submit = |i: usize| {
        let http = http.clone();
        let base = base.clone();
        async move {
            let res = http
                .post(format!("{base}/route"))
                .json(&json!({"prompt": format!("load {i}")}))
                .send()
                .await
                .unwrap();
            let ok = res.status() == 200;
            let body: Value = res.json().await.unwrap();
            if ok {
                Some(body["task_id"].as_str().unwrap().to_owned())
            } else {
                // Recorded but not queued while Redis was away: it must still run.
                let msg = body["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                eprintln!("submission {i} refused: {msg}");
                if std::env::var("IT_LOG").is_ok() {
                    let w = http
                        .get(format!("{base}/workers"))
                        .send()
                        .await
                        .unwrap()
                        .text()
                        .await
                        .unwrap();
                    eprintln!("workers then: {w}");
                }
                msg.split_whitespace()
                    .find(|w| uuid::Uuid::parse_str(w).is_ok())
                    .map(str::to_owned)
            }
        }
    };
    for i in 0..40 {
        accepted.extend(submit(i).await);
    }
    // While Redis is away the coordinator stays alive but says it is not ready.
    redis.stop().await.unwrap();
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    eventually(
        Duration::from_secs(15),
        "readyz reports the queue down",
        || async {
            let res = http.get(format!("{base}/readyz")).send().await.unwrap();
            res.status() == 503 && res.text().await.unwrap_or_default().contains("queue")
        },
    )
    .await;
    // Submitted while Redis is down: recorded, answered 503 naming the task, and run
    // once the queue is back (the store is compared with the queue every 2 s).
    let mut while_down = Vec::new();
    for i in 1000..1003 {
        let res = http
            .post(format!("{base}/route"))
            .json(&json!({"prompt": format!("down {i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        let body: Value = res.json().await.unwrap();
        let msg = body["error"]["message"].as_str().unwrap().to_owned();
        let id = msg
            .split_whitespace()
            .find(|w| uuid::Uuid::parse_str(w).is_ok())
            .unwrap()
            .to_owned();
        while_down.push(id);
    }
    accepted.extend(while_down);
    redis.restart().await.unwrap();
    eventually(Duration::from_secs(30), "readyz is ready again", || async {
        http.get(format!("{base}/readyz"))
            .send()
            .await
            .map(|r| r.status() == 200)
            .unwrap_or(false)
    })
    .await;
    for i in 40..80 {
        accepted.extend(submit(i).await);
    }
    assert!(
        accepted.len() == 83,
        "most submissions were accepted: {}",
        accepted.len()
    );

    let pool = pg(&env).await;
    eventually(
        Duration::from_secs(90),
        "every accepted task is done",
        || async {
            let rows = statuses(&pool, &env.schema).await;
            accepted
                .iter()
                .all(|id| rows.iter().any(|(t, s, _, _)| t == id && s == "done"))
        },
    )
    .await;
    stop.send(()).unwrap();
    serve.await.unwrap().unwrap();
    cleanup(&env).await;
}

/// A task cancelled at `serve` stops on the worker process running it: the cancellation
/// crosses Redis, the client hears why and the worker's only slot is free again.
#[tokio::test]
async fn a_cancel_reaches_the_worker_process_running_the_task() {
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.stall_after = Some(1));
    let cluster = OneSlot::start(&env, &fake, cluster_config(&env, &env.redis), None).await;
    let base = cluster.base.clone();
    let http = reqwest::Client::new();

    let (id, mut body) =
        crate::helpers::holding_the_slot(http.post(format!("{base}/v1/chat/completions"))).await;
    use futures::StreamExt;

    fake.update_knobs(|k| k.stall_after = None);
    let said = post_json(&http, &format!("{base}/tasks/{id}/cancel"), json!({})).await;
    assert_eq!(said["status"], "cancelled", "{said}");
    let mut rest = String::new();
    while let Some(chunk) = body.next().await {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(rest.contains("cancelled"), "{rest}");

    // The worker's one slot is free: the next task runs there to its end.
    let routed = post_json(
        &http,
        &format!("{base}/route"),
        json!({"prompt": "a short one"}),
    )
    .await;
    let next = routed["task_id"].as_str().unwrap().to_owned();
    let pool = pg(&env).await;
    eventually(Duration::from_secs(20), "the next task is done", || async {
        statuses(&pool, &env.schema)
            .await
            .iter()
            .any(|(t, s, _, _)| t == &next && s == "done")
    })
    .await;
    let rows = statuses(&pool, &env.schema).await;
    assert!(
        rows.iter().any(|(t, s, _, _)| t == &id && s == "cancelled"),
        "the cancelled task stays cancelled: {rows:?}"
    );
    cluster.stop(&env).await;
}

/// People in cluster mode: the person travels with the job to the worker process, which
/// writes the memory as theirs, and `serve` keeps each person's tasks and memories from
/// the others as in embedded mode.
#[tokio::test]
async fn people_stay_apart_across_worker_processes() {
    use crate::people::{ADMIN, Household, U1, U2, household_keys, others_cannot_reach_u1s_things};
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    let mut wcfg = cluster_config(&env, &env.redis);
    wcfg.backends = vec![backend("ollama", &fake)];
    let worker = WorkerProcess::build(wcfg, Some("ai-core")).await.unwrap();
    let (wstop, wrx) = oneshot::channel::<()>();
    let wtask = tokio::spawn(worker.run_until_stopped(async move {
        let _ = wrx.await;
    }));
    let mut scfg = cluster_config(&env, &env.redis);
    household_keys(&mut scfg);
    let (base, stop, serve) = serve_in_process(scfg).await;
    let h = Household {
        base,
        http: reqwest::Client::new(),
    };
    eventually(Duration::from_secs(10), "the worker shows up", || async {
        let (_, body) = h.get(ADMIN, "/workers").await;
        body.to_string().contains("ai-core")
    })
    .await;

    let told = h.chat(U1, "c1", "Remember this: my bank PIN is 4321").await;
    h.remembered(U1, "c1", false).await;
    h.chat(U2, "c2", "What is my bank PIN?").await;
    h.remembered(U2, "c2", false).await;
    let prompt = fake.requests_to("/api/chat").pop().unwrap().body.unwrap();
    assert!(!prompt.to_string().contains("4321"), "{prompt}");
    others_cannot_reach_u1s_things(&h, &told).await;

    wstop.send(()).unwrap();
    wtask.await.unwrap().unwrap();
    stop.send(()).unwrap();
    serve.await.unwrap().unwrap();
    cleanup(&env).await;
}

/// `[limits] queued_per_person` in cluster mode, counted from the store (read at most twice
/// a second) and what `serve` queued since: one person's flood is refused while another
/// person is still taken (see the embedded scenario).
#[tokio::test]
async fn one_persons_waiting_tasks_are_bounded_across_processes() {
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    let (cluster, h) = OneSlot::household(&env, &fake, |c| c.limits.queued_per_person = 2).await;

    let pool = pg(&env).await;
    crate::limits::one_persons_waiting_tasks_are_bounded_and_the_others_still_taken(
        &h,
        &fake,
        async || statuses(&pool, &env.schema).await.len(),
    )
    .await;
    cluster.stop(&env).await;
}

/// People take turns in cluster mode too: a one-slot `coordinator worker` takes u2's one
/// task out of turn, past u1's waiting ones (see the embedded scenario), and `GET
/// /tasks/{id}` in `serve` shows the same places.
#[tokio::test]
async fn people_take_turns_across_processes() {
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    let (cluster, h) = OneSlot::household(&env, &fake, |_| {}).await;
    crate::priorities::people_take_turns(&h, &fake).await;
    cluster.stop(&env).await;
}

/// A task cancelled while it waits in a Redis stream leaves it at once: the task behind
/// it moves up, and the cancelled one never reaches the worker's machine.
#[tokio::test]
async fn a_cancelled_waiting_task_leaves_its_stream_at_once() {
    let Some(env) = env() else { return };
    let fake = spawn_fake().await;
    fake.update_knobs(|k| k.stall_after = Some(1));
    let cluster = OneSlot::start(&env, &fake, cluster_config(&env, &env.redis), None).await;
    let base = cluster.base.clone();
    let http = reqwest::Client::new();
    let (holding_id, held) =
        crate::helpers::holding_the_slot(http.post(format!("{base}/v1/chat/completions"))).await;

    let route = async |prompt: &str| {
        let body = post_json(&http, &format!("{base}/route"), json!({"prompt": prompt})).await;
        body["task_id"].as_str().unwrap().to_owned()
    };
    let first = route("cancelled while waiting").await;
    let second = route("moves up").await;
    let place =
        async |id: &str| get_json(&http, &format!("{base}/tasks/{id}")).await["position"].clone();
    eventually(
        Duration::from_secs(10),
        "both wait in the stream",
        || async { place(&second).await == 2 },
    )
    .await;
    let said = post_json(&http, &format!("{base}/tasks/{first}/cancel"), json!({})).await;
    assert_eq!(said["status"], "cancelled", "{said}");
    assert_eq!(place(&second).await, 1);

    fake.update_knobs(|k| k.stall_after = None);
    post_json(
        &http,
        &format!("{base}/tasks/{holding_id}/cancel"),
        json!({}),
    )
    .await;
    drop(held);
    eventually(
        Duration::from_secs(20),
        "the second task is done",
        || async { get_json(&http, &format!("{base}/tasks/{second}")).await["status"] == "done" },
    )
    .await;
    assert_eq!(
        get_json(&http, &format!("{base}/tasks/{first}")).await["status"],
        "cancelled"
    );
    assert!(
        fake.requests_to("/api/chat").iter().all(|r| !r
            .body
            .as_ref()
            .is_some_and(|b| b.to_string().contains("cancelled while waiting"))),
        "the cancelled task never reached the machine"
    );
    cluster.stop(&env).await;
}
