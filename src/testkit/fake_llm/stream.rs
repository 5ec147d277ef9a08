//! Response bodies of the fake: pre-encoded frames sent with per-token delays, stalls,
//! in-stream errors, and connections dropped on purpose.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::Knobs;
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

/// Streams the frames, honouring the knobs. Every wait ends at shutdown, so a stalled
/// stream never holds the server open.
pub(crate) fn body(frames: Frames, knobs: &Knobs, shutdown: CancellationToken) -> Body {
    let n = frames.tokens.len();
    let stall_at = knobs.stall_after.map(|s| s.min(n));
    let error_at = knobs.error_after.map(|e| e.min(n));
    let delay = knobs.token_delay;
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
            if !delay.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown.cancelled() => return,
                }
            }
            yield Ok(frame);
        }
        for frame in frames.tail {
            yield Ok(frame);
        }
    })
}

/// Streams the frames of a realistic run, each token when it comes due. The caller has
/// waited for the first. Dropping the body (the client went away) ends the generation.
pub(crate) fn paced(
    frames: Frames,
    mut run: Run,
    knobs: &Knobs,
    shutdown: CancellationToken,
) -> Body {
    let n = frames.tokens.len();
    run.total = u32::try_from(n).unwrap_or(u32::MAX);
    let stall_at = knobs.stall_after.map(|s| s.min(n));
    let error_at = knobs.error_after.map(|e| e.min(n));
    Body::from_stream(async_stream::stream! {
        for frame in frames.head {
            yield Ok::<Bytes, std::io::Error>(frame);
        }
        for (i, frame) in frames.tokens.into_iter().enumerate() {
            if stall_at == Some(i) {
                shutdown.cancelled().await;
                return;
            }
            if error_at == Some(i) {
                yield Ok(frames.error);
                return;
            }
            if !run.until_due(run.sent, &shutdown).await {
                return;
            }
            run.sent += 1;
            yield Ok(frame);
        }
        if stall_at == Some(n) {
            shutdown.cancelled().await;
            return;
        }
        if error_at == Some(n) {
            yield Ok(frames.error);
            return;
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
