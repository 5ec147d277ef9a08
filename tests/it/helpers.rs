//! `spawn_app()` and friends: start the application and its fakes on port 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use coordinator::config::{BackendConfig, BackendKind, Config, StoreConfig};
use coordinator::startup::Application;
use coordinator::testkit::fake_llm::{FakeLlm, FakeLlmServer};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const MODEL: &str = "qwen2.5:7b";

pub struct TestApp {
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    pub fake: FakeLlmServer,
    pub db_path: PathBuf,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.unwrap()
    }

    /// The JSON body of the last request the fake backend received on `path`.
    pub fn last_backend_body(&self, path: &str) -> Value {
        let last = self.fake.requests_to(path).pop();
        last.and_then(|r| r.body)
            .unwrap_or_else(|| panic!("the backend received no JSON body on {path}"))
    }

    /// `POST /route` and its JSON answer; panics unless 200.
    pub async fn route(&self, body: Value) -> Value {
        let res = self.post("/route", body).await;
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Reads the task's SSE events to their end; returns (event name, data) pairs.
    pub async fn events(&self, task_id: &str) -> Vec<(String, Value)> {
        let res = self.get(&format!("/tasks/{task_id}/events")).await;
        assert_eq!(res.status(), 200);
        read_sse(res).await
    }

    /// Waits for the task to end (through its event stream) and returns the stored task.
    /// Task `task_id`'s row, as `GET /tasks/{id}` shows it now.
    pub async fn task(&self, task_id: &str) -> Value {
        self.get(&format!("/tasks/{task_id}"))
            .await
            .json()
            .await
            .unwrap()
    }

    /// Waits (bounded) until task `task_id`'s row satisfies `check`; returns it. For what
    /// no event tells: a cancelled task's partial answer is written after its end.
    pub async fn task_until(&self, task_id: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let row = self.task(task_id).await;
            if check(&row) {
                return row;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the row never got there: {row}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The memories of `thread` once its turn has been remembered (written right after
    /// the answer, off the request path): waits until the thread has an exchange item.
    pub async fn remembered(&self, thread: &str) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let body: Value = self
                .get(&format!("/memory?thread_id={thread}"))
                .await
                .json()
                .await
                .unwrap();
            let items = body["items"].as_array().cloned().unwrap_or_default();
            if items.iter().any(|i| i["kind"] == "exchange") {
                return items;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{thread} never reached memory"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn finished_task(&self, task_id: &str) -> Value {
        let events = tokio::time::timeout(Duration::from_secs(30), self.events(task_id))
            .await
            .expect("task did not finish in 30 s");
        let last = &events.last().expect("no events").0;
        assert!(last == "done" || last == "error", "{events:?}");
        self.get(&format!("/tasks/{task_id}"))
            .await
            .json()
            .await
            .unwrap()
    }

    /// The first rows of the SQLite task store, read directly (what was recorded at all).
    pub async fn rows(&self) -> Vec<coordinator::store::TaskRecord> {
        use coordinator::store::{TaskFilter, TaskStore};
        let store = coordinator::store::sqlite::SqliteStore::open(&self.db_path)
            .await
            .unwrap();
        store
            .list(&TaskFilter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
    }

    /// Tells the server to stop (as SIGTERM would) without waiting; `stop` then waits.
    pub fn begin_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    /// Stops the server (as SIGTERM would) and waits for it to finish shutting down.
    pub async fn stop(mut self) -> (tempfile::TempDir, FakeLlmServer) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            h.await.unwrap().unwrap();
        }
        (self.dir, self.fake)
    }
}

/// Starts a streamed chat turn at `url` (`/v1/chat/completions`) in the background;
/// resolves to its task id and whole body once it has ended.
pub fn streamed_turn(
    http: &reqwest::Client,
    url: String,
    model: &str,
    content: &str,
) -> JoinHandle<(String, String)> {
    let request = http.post(url).json(&serde_json::json!({
        "model": model,
        "stream": true,
        "messages": [{"role": "user", "content": content}],
    }));
    tokio::spawn(async move {
        let res = request.send().await.unwrap();
        assert_eq!(res.status(), 200);
        let task = res.headers()["x-coordinator-task-id"]
            .to_str()
            .unwrap()
            .to_owned();
        (task, res.text().await.unwrap())
    })
}

/// Reads a whole SSE body into (event, data) pairs.
pub async fn read_sse(res: reqwest::Response) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut stream = res.bytes_stream();
    while let Some(chunk) = stream.next().await {
        buf.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut name = String::from("message");
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if !data.is_empty() {
                let value = serde_json::from_str(&data).unwrap_or(Value::String(data));
                out.push((name, value));
            }
        }
    }
    out
}

/// The task id Coordinator names in a response's `x-coordinator-task-id` header.
pub fn task_id(res: &reqwest::Response) -> String {
    res.headers()["x-coordinator-task-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// A config for tests: port 0, SQLite in `dir`, one Ollama backend `moon` at `backend_url`.
pub fn test_config(dir: &tempfile::TempDir, backend_url: &str) -> Config {
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".to_owned();
    config.server.shutdown_grace_s = 5;
    config.store = StoreConfig::Sqlite {
        path: dir.path().join("coordinator.db"),
        synchronous: Default::default(),
    };
    config.backends = vec![BackendConfig {
        name: "moon".to_owned(),
        kind: BackendKind::Ollama,
        url: backend_url.to_owned(),
        models: None,
        api_key_env: None,
        parallel: 4,
        max_loaded: None,
        keep_alive: Default::default(),
        context_length: None,
        model_context_length: Default::default(),
        max_num_ctx: None,
    }];
    config
}

pub async fn spawn_fake() -> FakeLlmServer {
    FakeLlm::builder().model(MODEL).spawn().await.unwrap()
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(spawn_fake().await, |_| {}).await
}

/// Starts the app against `fake`, with `tweak` applied to the test config.
pub async fn spawn_app_with(fake: FakeLlmServer, tweak: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir, &fake.base_url());
    tweak(&mut config);
    start(config, dir, fake).await
}

/// Starts the app with a ready config, keeping `dir` alive for it.
pub async fn start(config: Config, dir: tempfile::TempDir, fake: FakeLlmServer) -> TestApp {
    let db_path = match &config.store {
        StoreConfig::Sqlite { path, .. } => path.clone(),
        StoreConfig::Postgres { .. } => PathBuf::new(),
    };
    let app = Application::build(config).await.unwrap();
    let addr = app.local_addr();
    let (tx, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(app.run_until_stopped(async move {
        let _ = rx.await;
    }));
    TestApp {
        addr,
        http: reqwest::Client::new(),
        fake,
        db_path,
        dir,
        stop: Some(tx),
        handle: Some(handle),
    }
}

/// Reads a `coordinator serve` child's log until it says where it listens; returns the
/// address (`127.0.0.1:PORT`). The lines after it are left to the caller.
pub async fn listen_addr<R>(lines: &mut tokio::io::Lines<R>) -> String
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    start_log(lines).await.0
}

/// Like [`listen_addr`], with the lines logged before it.
pub async fn start_log<R>(lines: &mut tokio::io::Lines<R>) -> (String, Vec<String>)
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    let mut before = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("serve did not start")
            .unwrap()
            .unwrap_or_else(|| panic!("serve exited before listening: {before:#?}"));
        if line.contains("coordinator listening")
            && let Some(i) = line.find("addr=")
        {
            let addr = line[i + 5..].split_whitespace().next().unwrap().to_owned();
            return (addr, before);
        }
        before.push(line);
    }
}

/// HTTP/1.1 by hand over one TCP connection, for what an HTTP client hides: half-sent
/// requests, keep-alive connections, and when the server closes one.
pub mod raw {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use serde_json::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// One response as read off the wire.
    #[derive(Debug)]
    pub struct Response {
        pub status: u16,
        /// The head's header lines, lower-cased.
        pub head: String,
        pub body: Vec<u8>,
    }

    impl Response {
        pub fn json(&self) -> Value {
            serde_json::from_slice(&self.body)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
        }
    }

    pub async fn connect(addr: SocketAddr) -> TcpStream {
        TcpStream::connect(addr).await.unwrap()
    }

    /// A connection to `addr` (on loopback) from the loopback address `from`, as another
    /// device of the house would come (every 127.x.y.z is this machine's).
    pub async fn connect_from(addr: SocketAddr, from: [u8; 4]) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((from, 0))).unwrap();
        socket.connect(addr).await.unwrap()
    }

    /// A keep-alive `GET path` on `stream`, and its response.
    pub async fn get(stream: &mut TcpStream, path: &str) -> Response {
        let req = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
        stream.write_all(req.as_bytes()).await.unwrap();
        read_response(stream).await
    }

    /// Reads one response with a `content-length` body (what every JSON answer has).
    pub async fn read_response(stream: &mut TcpStream) -> Response {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "closed before a response: {:?}",
                String::from_utf8_lossy(&buf)
            );
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = buf.split_off(head_end);
        while body.len() < len {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed inside the body");
            body.extend_from_slice(&chunk[..n]);
        }
        Response { status, head, body }
    }

    /// How long until the server closes `stream`, reading (and dropping) anything it
    /// sends; `None` if it is still open after `limit`.
    pub async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        let mut chunk = [0u8; 1024];
        tokio::time::timeout(limit, async {
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return start.elapsed(),
                    Ok(_) => {}
                }
            }
        })
        .await
        .ok()
    }
}

/// `(name, labels, value)` of every sample; panics on a line that is not Prometheus text.
pub fn parse_prometheus(text: &str) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            assert!(
                comment.starts_with("HELP ") || comment.starts_with("TYPE "),
                "{line}"
            );
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (
                n,
                rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}")),
            ),
            None => (series, ""),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}"
        );
        out.push((name.to_owned(), labels.to_owned(), value));
    }
    out
}

/// Asserts that a `keep_alive` Coordinator sent Ollama is `seconds` long, stamped (see
/// `coordinator::backend::keep_alive`): a duration string of that many whole seconds
/// and less than one more.
#[track_caller]
pub fn assert_keep_alive(sent: &Value, seconds: u64) {
    use coordinator::backend::keep_alive::KeepAlive;
    assert!(
        sent.is_string(),
        "a stamped keep-alive is a duration string: {sent}"
    );
    match KeepAlive::parse(sent) {
        Some(KeepAlive::For(d)) => assert!(
            d.as_secs() == seconds && d.subsec_nanos() > 0,
            "{sent}: not {seconds} s stamped"
        ),
        other => panic!("{sent}: {other:?}, not {seconds} s"),
    }
}

/// Sends, with `req` (a POST to `/v1/chat/completions` as its sender), a streamed chat that
/// holds a machine's one slot while the fake stalls after its first token
/// (`stall_after = Some(1)`): its task id, and the answer's stream, which lets go of the
/// slot once the task is cancelled.
pub async fn holding_the_slot(
    req: reqwest::RequestBuilder,
) -> (
    String,
    impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
) {
    let res = req
        .json(&serde_json::json!({"model": "auto", "stream": true, "messages": [{"role": "user", "content": "holding the slot"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let id = task_id(&res);
    let mut body = res.bytes_stream();
    assert!(
        !body.next().await.unwrap().unwrap().is_empty(),
        "the answer started: the one slot is taken"
    );
    (id, body)
}
