//! The embedded dispatcher's held events: the answer waits for the row.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::channel::{mpsc, oneshot};
use futures::{FutureExt, StreamExt};

use super::*;
use crate::chat::Chunk;
use crate::domain::WorkerName;
use crate::store::StoreError;

fn started() -> TaskEvent {
    TaskEvent::Started {
        worker: WorkerName::parse("w").unwrap(),
        loading: false,
    }
}

fn text(t: &str) -> TaskEvent {
    TaskEvent::Chunk {
        chunk: Chunk::Content { text: t.into() },
    }
}

/// Events fed by hand, and a recording resolved by hand.
fn held() -> (
    HeldUntilRecorded,
    mpsc::UnboundedSender<TaskEvent>,
    oneshot::Sender<Result<(), StoreError>>,
) {
    let (events, rx) = mpsc::unbounded();
    let (done, recorded) = oneshot::channel();
    let recording =
        Durable::new(async move { recorded.await.unwrap_or(Err(StoreError::WriterStopped)) });
    let stream = HeldUntilRecorded::new(TaskId::new(), rx.boxed(), recording);
    (stream, events, done)
}

#[tokio::test]
async fn the_answer_waits_for_the_recording_and_news_of_the_queue_does_not() {
    let (mut s, events, done) = held();
    events.unbounded_send(started()).unwrap();
    events.unbounded_send(text("a")).unwrap();
    events.unbounded_send(text("b")).unwrap();
    assert_eq!(s.next().now_or_never(), Some(Some(started())));
    assert_eq!(
        s.next().now_or_never(),
        None,
        "the answer waits for the row"
    );
    assert_eq!(s.next().now_or_never(), None);
    done.send(Ok(())).unwrap();
    assert_eq!(s.next().await, Some(text("a")));
    assert_eq!(s.next().await, Some(text("b")));
    drop(events);
    assert_eq!(s.next().await, None);
}

#[tokio::test]
async fn a_row_that_could_not_be_written_ends_the_events_with_why() {
    let (mut s, events, done) = held();
    events.unbounded_send(text("never shown")).unwrap();
    events.unbounded_send(text("nor this")).unwrap();
    done.send(Err(StoreError::WriterStopped)).unwrap();
    assert_eq!(s.next().await, Some(TaskEvent::Unrecorded));
    assert_eq!(s.next().await, None);
}

#[tokio::test]
async fn events_that_end_before_the_row_is_durable_end_once_it_is() {
    let (mut s, events, done) = held();
    drop(events);
    assert_eq!(
        s.next().now_or_never(),
        None,
        "the end waits for the row too"
    );
    done.send(Ok(())).unwrap();
    assert_eq!(s.next().await, None);
}

/// A reader waiting for the answer is not woken by the row's commit: the recording
/// is looked at only once an event of the answer is there.
#[tokio::test]
async fn the_recording_is_not_polled_while_no_answer_is_ready() {
    let polls = Arc::new(AtomicUsize::new(0));
    let counted = polls.clone();
    let recording = Durable::new(futures::future::poll_fn(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        std::task::Poll::Ready(Ok(()))
    }));
    let (events, rx) = mpsc::unbounded();
    let mut s = HeldUntilRecorded::new(TaskId::new(), rx.boxed(), recording);
    events.unbounded_send(started()).unwrap();
    assert_eq!(s.next().await, Some(started()));
    assert_eq!(s.next().now_or_never(), None);
    assert_eq!(polls.load(Ordering::SeqCst), 0);
    events.unbounded_send(text("a")).unwrap();
    assert_eq!(s.next().await, Some(text("a")));
    assert_eq!(polls.load(Ordering::SeqCst), 1);
    events.unbounded_send(text("b")).unwrap();
    assert_eq!(s.next().await, Some(text("b")));
    assert_eq!(polls.load(Ordering::SeqCst), 1, "looked at once only");
}
