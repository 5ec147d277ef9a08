//! A port other machines can reach needs keys: `serve` refuses to start on one without,
//! unless `[server] allow_open = true` (warned about at every start), and `config check`
//! says the same.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::helpers::start_log;

fn coordinator(dir: &std::path::Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_coordinator"));
    cmd.current_dir(dir)
        .env("RUST_LOG", "info")
        .env("COORDINATOR_BACKENDS__0__NAME", "moon")
        .env("COORDINATOR_BACKENDS__0__KIND", "ollama")
        // Nothing listens there; the check comes before any backend is asked anyway.
        .env("COORDINATOR_BACKENDS__0__URL", "http://127.0.0.1:9")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn serve_on_an_open_port_without_keys_refuses_to_start_and_says_how_to_add_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        coordinator(dir.path())
            .args(["serve", "--listen", "0.0.0.0:0"])
            .output(),
    )
    .await
    .expect("serve neither started nor refused")
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "api_keys",
        "[[server.keys]]",
        "COORDINATOR_SERVER__API_KEYS",
        "allow_open",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert!(!stderr.contains("coordinator listening"), "{stderr}");
}

#[tokio::test]
async fn allow_open_starts_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = coordinator(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env("COORDINATOR_SERVER__ALLOW_OPEN", "true")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (_, log) = start_log(&mut lines).await;
    let warned = log
        .iter()
        .any(|l| l.contains("WARN") && l.contains("without API keys"));
    child.kill().await.unwrap();
    assert!(warned, "no warning about serving without keys: {log:#?}");
}

#[tokio::test]
async fn config_check_reports_an_open_port_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("coordinator.toml");
    let check = |text: &'static str| {
        let file = file.clone();
        let dir = dir.path().to_owned();
        async move {
            std::fs::write(&file, text).unwrap();
            let out = coordinator(&dir)
                .args(["config", "check"])
                .arg(&file)
                .output()
                .await
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        }
    };
    let (code, out) = check("[server]\nlisten = \"0.0.0.0:8000\"\n").await;
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("api_keys") && out.contains("allow_open"),
        "{out}"
    );
    let (code, out) =
        check("[server]\nlisten = \"0.0.0.0:8000\"\napi_keys = [\"sk-home-0123456789\"]\n").await;
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = check("[server]\nlisten = \"0.0.0.0:8000\"\nallow_open = true\n").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("warning:"), "{out}");
    let (code, out) =
        check("[server]\nallowed_origins = [\"owui.lan\"]\nidle_timeout_s = 0\n").await;
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("server.allowed_origins[0]") && out.contains("server.idle_timeout_s"),
        "{out}"
    );
}
