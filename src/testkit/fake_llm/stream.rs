//! Response bodies of the fake: pre-encoded frames sent with per-token delays, stalls,
//! in-stream errors, and connections dropped on purpose.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::Call;
use super::sim::Run;

/// JSON bytes of a plain struct (serialising those cannot fail).
pub(crate) fn to_vec(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// An encoded stream: `head` and `tail` frames around the token frames that the
/// per-token knobs (`token_delay`, `stall_after`, `error_after`) count.
pub(crate) struct Frames {
    pub head: Vec<Bytes>,
    pub tokens: Vec<Bytes>,
    pub tail: Vec<Bytes>,
    /// Sent instead of the rest when `error_after` triggers.
    pub error: Bytes,
}

/// How token frames are spaced out.
pub(crate) enum Pace {
    /// A fixed wait before each token (the instant mode's `token_delay`).
    Every(Duration),
    /// Each token when the realistic run says it is due; the caller has waited for the
    /// first. The run records itself when the body is dropped (the client went away).
    Simulated(Box<Run>),
}

impl Pace {
    /// Waits for the next token; `false` when the server shuts down first.
    async fn next(&mut self, shutdown: &CancellationToken) -> bool {
        match self {
            Self::Every(delay) if delay.is_zero() => true,
            Self::Every(delay) => tokio::select! {
                () = tokio::time::sleep(*delay) => true,
                () = shutdown.cancelled() => false,
            },
            Self::Simulated(run) => {
                let due = run.until_due(run.sent, shutdown).await;
                run.sent += u32::from(due);
                due
            }
        }
    }
}

/// Streams the frames, honouring the call's knobs, the server's hold and the pace. Every
/// wait ends at shutdown, so a stalled or held stream never holds the server open.
pub(crate) fn body(
    frames: Frames,
    mut pace: Pace,
    call: &Call,
    shutdown: CancellationToken,
) -> Body {
    let knobs = &call.knobs;
    let mut held = call.held.clone();
    let n = frames.tokens.len();
    if let Pace::Simulated(run) = &mut pace {
        run.total = u32::try_from(n).unwrap_or(u32::MAX);
    }
    let stall_at = knobs.stall_after.map(|s| s.min(n));
    let error_at = knobs.error_after.map(|e| e.min(n));
    Body::from_stream(async_stream::stream! {
        for frame in frames.head {
            yield Ok::<Bytes, std::io::Error>(frame);
        }
        let mut tokens = frames.tokens.into_iter();
        for i in 0..=n {
            if stall_at == Some(i) {
                shutdown.cancelled().await;
                return;
            }
            if error_at == Some(i) {
                yield Ok(frames.error);
                return;
            }
            let Some(frame) = tokens.next() else { break };
            if i > 0 {
                tokio::select! {
                    released = held.wait_for(|held| !held) => if released.is_err() { return },
                    () = shutdown.cancelled() => return,
                }
            }
            if !pace.next(&shutdown).await {
                return;
            }
            yield Ok(frame);
        }
        for frame in frames.tail {
            yield Ok(frame);
        }
    })
}

/// A response whose body fails at once, so the server aborts the connection instead of
/// completing an answer.
pub(crate) fn dropped() -> Response {
    let failing = futures::stream::once(async {
        Err::<Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "fake-llm dropped the connection on purpose",
        ))
    });
    Response::new(Body::from_stream(failing))
}
