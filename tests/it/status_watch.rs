//! `coordinator status --watch`, frame by frame: its loop driven by ticks and a stop of
//! the test's own, against a running household.

use std::time::Duration;

use coordinator::dashboard::terminal::{Screen, StatusError};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;

use crate::dashboard::{SMALL, household};

const PATIENCE: Duration = Duration::from_secs(5);

/// The next frame the loop drew.
async fn next_frame(frames: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, frames.recv())
        .await
        .expect("a frame in time")
        .expect("the loop is still drawing")
}

/// A frame at the start and one per tick; a task that ran between two frames is in the
/// second; the loop ends when told to and draws nothing more.
#[tokio::test]
async fn status_watch_redraws_when_the_household_changes_and_stops_when_told() {
    let app = household(false).await;
    let base = format!("http://{}", app.addr);
    let (tick, ticks) = mpsc::channel::<()>(1);
    let (stop, stopped) = oneshot::channel::<()>();
    let (frame, mut frames) = mpsc::unbounded_channel::<String>();
    let watching = tokio::spawn(async move {
        let screen = Screen {
            http: reqwest::Client::new(),
            base: &base,
            key: None,
        };
        let stop = async {
            let _ = stopped.await;
        };
        screen
            .watch(ReceiverStream::new(ticks), stop, |picture| {
                let _ = frame.send(picture.to_owned());
            })
            .await
    });
    let prompt = "a question between two frames";
    let first = next_frame(&mut frames).await;
    assert!(first.starts_with("MACHINES\n  moon "), "{first}");
    assert!(first.contains("\n  sun "), "{first}");
    assert!(!first.contains(prompt), "{first}");

    let res = app
        .post(
            "/v1/chat/completions",
            json!({"model": SMALL, "messages": [{"role": "user", "content": prompt}]}),
        )
        .await;
    assert_eq!(res.status(), 200);
    res.text().await.unwrap();
    // The service's picture is rebuilt at most four times a second: the tick comes once
    // it shows the task done, so the second frame must show that too.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let s: Value = app.get("/dashboard/snapshot").await.json().await.unwrap();
        let recent = s["recent"].as_array().unwrap();
        if recent
            .iter()
            .any(|t| t["prompt"] == prompt && t["status"] == "done")
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tick.send(()).await.unwrap();
    let second = next_frame(&mut frames).await;
    assert!(second.starts_with("MACHINES\n  moon "), "{second}");
    let line = second.lines().find(|l| l.contains(prompt));
    assert!(line.is_some_and(|l| l.contains(" done ")), "{second}");

    stop.send(()).unwrap();
    let ended = tokio::time::timeout(PATIENCE, watching)
        .await
        .expect("the loop stops when told")
        .unwrap();
    assert!(ended.is_ok(), "{ended:?}");
    // No tick came after the second frame, and the loop has let go of its drawing.
    assert_eq!(frames.recv().await, None);
}

/// A key the service refuses ends the watch with the error, before any frame.
#[tokio::test]
async fn status_watch_without_the_admin_key_ends_with_what_is_missing() {
    let app = household(true).await;
    let base = format!("http://{}", app.addr);
    let screen = Screen {
        http: reqwest::Client::new(),
        base: &base,
        key: None,
    };
    let mut frames = 0;
    let ended = tokio::time::timeout(
        PATIENCE,
        screen.watch(futures::stream::pending(), std::future::pending(), |_| {
            frames += 1;
        }),
    )
    .await
    .expect("the watch ends by itself");
    assert!(
        matches!(ended, Err(StatusError::NeedsKey { .. })),
        "{ended:?}"
    );
    assert_eq!(frames, 0);
}
