//! The dashboard in a real browser: Debian's headless `chromium` driven through its
//! `chromedriver` (WebDriver). The page asks for the admin key once, shows both machines
//! and their models, a task submitted after it loaded within 2 s without a reload, a
//! queued task with its place, and a task's full record on a click; it saves a screenshot
//! (`$CARGO_TARGET_TMPDIR/dashboard.png`, and `$DASHBOARD_SCREENSHOT` when set).
//!
//! Needs `chromedriver` on PATH (or `$CHROMEDRIVER`) and `chromium`: `.ci/run` installs
//! both; elsewhere `apt-get install -y chromium chromium-driver`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::dashboard::{ADMIN_KEY, SMALL, household, queue_one};
use crate::helpers::MODEL;

const CHROMIUM_FLAGS: [&str; 10] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
];

/// A chromedriver on a port of its choosing, stopped when dropped.
struct Driver {
    _child: tokio::process::Child,
    url: String,
}

/// Starts chromedriver, trying again twice when it ends before it says its port: on a
/// loaded machine it has been seen to exit at start once in many runs.
async fn start_driver() -> Driver {
    let mut failures = Vec::new();
    for _ in 0..3 {
        match try_start_driver().await {
            Ok(driver) => return driver,
            Err(why) => failures.push(why),
        }
    }
    panic!("chromedriver did not start: {failures:#?}");
}

async fn try_start_driver() -> Result<Driver, String> {
    let program = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".to_owned());
    let mut child = tokio::process::Command::new(&program)
        .arg("--port=0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {program} ({e}): the dashboard's browser test needs Debian's \
                 chromium and its driver (apt-get install -y chromium chromium-driver; \
                 .ci/run installs them), or CHROMEDRIVER=/path/to/chromedriver"
            )
        });
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    // What it says on stderr, kept for the failure's message; read on so it never blocks.
    let said = tokio::spawn(async move {
        let mut said = Vec::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if said.len() < 20 {
                said.push(line);
            }
        }
        said
    });
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split(" on port ").nth(1)
                && line.contains("started successfully")
            {
                return Some(rest.trim_end_matches('.').trim().to_owned());
            }
        }
        None
    })
    .await;
    let Ok(Some(port)) = port else {
        let how = if port.is_err() {
            "did not say its port within 20 s"
        } else {
            "ended before saying its port"
        };
        // Its stdout closed, so it has ended or is ending; one that hangs is killed.
        let ended = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        drop(child);
        let said = said.await.unwrap_or_default();
        return Err(format!(
            "{program} {how} (exit: {ended:?}); its stderr: {said:?}"
        ));
    };
    // Whatever else it prints must not fill the pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Driver {
        _child: child,
        url: format!("http://127.0.0.1:{port}"),
    })
}

async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
    let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| (*s).to_owned()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    let mut options = json!({ "args": args });
    let binary = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    if std::path::Path::new(&binary).exists() {
        options["binary"] = json!(binary);
    }
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), json!("chrome"));
    caps.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("chromedriver did not open a browser session")
}

/// Waits until `script` (the body of a function) returns true in the page; false when
/// `limit` passed first.
async fn until(client: &Client, script: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let v = client.execute(script, vec![]).await.unwrap();
        if v == Value::Bool(true) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The page redraws its rows with every snapshot, so an element found may be gone by the
/// time it is used: these find it again until the action lands (or 5 s passed).
async fn on_element<T, F>(client: &Client, css: &str, act: F) -> T
where
    F: AsyncFn(fantoccini::elements::Element) -> Result<T, fantoccini::error::CmdError>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tried = match client.find(Locator::Css(css)).await {
            Ok(element) => act(element).await,
            Err(e) => Err(e),
        };
        match tried {
            Ok(v) => return v,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{css}: {e}"),
        }
    }
}

async fn text_of(client: &Client, css: &str) -> String {
    on_element(client, css, async |e| e.text().await).await
}

async fn click(client: &Client, css: &str) {
    on_element(client, css, async |e| e.click().await).await;
}

#[tokio::test]
async fn the_page_shows_the_household_live_in_a_real_browser() {
    let app = household(true).await;
    let driver = start_driver().await;
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&driver, profile.path()).await;
    client.goto(&app.url("/")).await.unwrap();

    // Keys are set: the page asks for the admin key once and keeps it for the tab.
    assert!(
        until(
            &client,
            "return !document.getElementById('key-form').hidden;",
            Duration::from_secs(10)
        )
        .await,
        "the page did not ask for a key"
    );
    client
        .find(Locator::Id("key"))
        .await
        .unwrap()
        .send_keys(ADMIN_KEY)
        .await
        .unwrap();
    click(&client, "#key-form button").await;

    // Both machines and their models.
    let machines = "return !!document.querySelector('[data-machine=\"moon\"]') && !!document.querySelector('[data-machine=\"sun\"]') && document.getElementById('key-form').offsetParent === null;";
    assert!(
        until(&client, machines, Duration::from_secs(10)).await,
        "no machines shown"
    );
    assert!(
        text_of(&client, "[data-machine=\"moon\"]")
            .await
            .contains(MODEL)
    );
    let sun = text_of(&client, "[data-machine=\"sun\"]").await;
    assert!(sun.contains(SMALL), "{sun}");
    assert!(sun.contains(" s behind Coordinator's"), "{sun}");
    let stored = client
        .execute(
            "return sessionStorage.getItem('coordinator-admin-key');",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(stored, json!(ADMIN_KEY));
    let href = client.current_url().await.unwrap().to_string();
    assert!(!href.contains(ADMIN_KEY), "{href}");

    // This device's clock is set an hour ahead of Coordinator's from here on.
    client
        .execute(
            "const real = Date.now; Date.now = () => real.call(Date) + 3600000; return true;",
            vec![],
        )
        .await
        .unwrap();

    // A task queued behind a long answer shows with its place, and how long it has
    // waited on Coordinator's clock: seconds, not the hour this device's clock adds.
    let (_running, queued, _bodies) = queue_one(&app, Some(ADMIN_KEY)).await;
    let place = format!(
        "const c = document.querySelector('#queue tr[data-task=\"{queued}\"] td.position'); return !!c && c.textContent === '1';"
    );
    assert!(
        until(&client, &place, Duration::from_secs(2)).await,
        "the queued task's place was not shown within 2 s"
    );
    let waited = text_of(
        &client,
        &format!("#queue tr[data-task=\"{queued}\"] td.waiting"),
    )
    .await;
    assert!(
        waited
            .strip_suffix(" s")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n < 60),
        "{waited}"
    );

    // A task submitted now appears within 2 s, without a reload.
    let res = app
        .http
        .post(app.url("/route"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({"prompt": "what is a good name for a cat", "model": SMALL}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let submitted = Instant::now();
    let id = res.json::<Value>().await.unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let row = format!("#recent tr[data-task=\"{id}\"]");
    let shown = until(
        &client,
        &format!("return !!document.querySelector('{row}');"),
        Duration::from_secs(2),
    )
    .await;
    assert!(shown, "the new task was not shown within 2 s");
    assert!(submitted.elapsed() < Duration::from_secs(2));
    assert!(
        text_of(&client, &row)
            .await
            .contains("what is a good name for a cat")
    );

    // The picture for the README, with the queue and the recent tasks in it.
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::write(dir.join("dashboard.png"), &png).unwrap();
    if let Ok(path) = std::env::var("DASHBOARD_SCREENSHOT") {
        std::fs::write(path, &png).unwrap();
    }

    // A click opens the task's full record.
    let done = format!(
        "const r = document.querySelector('{row} td.status'); return !!r && r.textContent === 'done';"
    );
    assert!(
        until(&client, &done, Duration::from_secs(10)).await,
        "the task did not end"
    );
    click(&client, &row).await;
    let opened = format!(
        "return document.getElementById('detail').open && document.getElementById('detail-id').textContent === '{id}' && document.getElementById('detail-fields').textContent.includes('attempts');"
    );
    assert!(
        until(&client, &opened, Duration::from_secs(5)).await,
        "the task's detail did not open"
    );
    let detail = text_of(&client, "#detail-fields").await;
    assert!(
        detail.contains("reasons") && detail.contains("composed prompt"),
        "{detail}"
    );

    client.close().await.unwrap();
}
