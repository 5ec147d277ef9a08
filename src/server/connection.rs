//! One client connection, served by hyper and watched. The watch knows the connection's
//! [`Phase`] from two sides: the socket (bytes read) and the service (a request received, its
//! answer's body finished or dropped). While no request is in flight the phase has a
//! deadline, and a connection past it is dropped (nothing is being answered, so nothing is
//! lost). A request's body gets its own deadline ([`DeadlineBody`]).

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::Limits;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a connection is doing, for its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Receiving a request's headers: since the connection opened, or since the first
    /// byte after the previous answer.
    Head { since: Instant },
    /// Requests received and not yet wholly answered.
    Busy { requests: usize },
    /// Answered everything, and nothing received since.
    Idle { since: Instant },
}

impl Phase {
    /// When the connection is to be closed, if nothing changes before then.
    fn deadline(self, limits: &Limits) -> Option<Instant> {
        match self {
            Self::Head { since } => Some(since + limits.header),
            Self::Idle { since } => Some(since + limits.idle),
            Self::Busy { .. } => None,
        }
    }

    /// Bytes arrived: after an answer, the next request has begun.
    fn read(self, now: Instant) -> Self {
        match self {
            Self::Idle { .. } => Self::Head { since: now },
            other => other,
        }
    }

    fn request(self) -> Self {
        match self {
            Self::Busy { requests } => Self::Busy {
                requests: requests + 1,
            },
            Self::Head { .. } | Self::Idle { .. } => Self::Busy { requests: 1 },
        }
    }

    fn answered(self, now: Instant) -> Self {
        match self {
            Self::Busy { requests } if requests > 1 => Self::Busy {
                requests: requests - 1,
            },
            _ => Self::Idle { since: now },
        }
    }
}

/// A connection's phase, shared by its socket, its service and its watch.
#[derive(Debug)]
struct Activity {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            phase: Mutex::new(Phase::Head {
                since: Instant::now(),
            }),
            changed: Notify::new(),
        })
    }

    fn update(&self, step: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        let next = step(*phase);
        if next != *phase {
            *phase = next;
            self.changed.notify_one();
        }
    }

    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        self.phase
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .deadline(limits)
    }

    /// A request arrived; it counts as in flight until the guard is dropped.
    fn request(self: &Arc<Self>) -> InFlight {
        self.update(Phase::request);
        InFlight(self.clone())
    }
}

/// One request in flight; dropped when its answer's body ends or is dropped (or the
/// request's future is, if the client goes away first).
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|p| p.answered(Instant::now()));
    }
}

/// Serves one accepted connection until it closes, times out, or (after `stop`) has
/// finished what it was answering. `slot` is its place under the connection cap.
pub(super) async fn run(
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    app: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    limits: Limits,
    stop: CancellationToken,
    slot: OwnedSemaphorePermit,
) {
    let activity = Activity::new();
    let io = TokioIo::new(Watched {
        tcp,
        activity: activity.clone(),
    });
    let answering = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let in_flight = answering.request();
        let mut req = req.map(|body| DeadlineBody::new(body, limits.body));
        // Who is on the other end, for the routes that ask (`ConnectInfo`).
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let app = app.clone();
        async move {
            let res = app.oneshot(req).await?;
            Ok::<_, Infallible>(res.map(|body| Answering {
                body,
                _in_flight: in_flight,
            }))
        }
    });
    let mut conn = Box::pin(builder.serve_connection_with_upgrades(io, service));
    let mut stopping = false;
    loop {
        let deadline = activity.deadline(&limits);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "client connection ended with an error");
                }
                break;
            }
            () = sleep_until(deadline) => {
                if activity.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!("closing a client connection that sent no request in time");
                    // The slot is free before the socket closes, so a client that sees
                    // the close can connect again at once.
                    drop(slot);
                    drop(conn);
                    return;
                }
            }
            () = activity.changed.notified() => {}
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The client's socket, telling the connection's [`Activity`] when bytes arrive.
struct Watched {
    tcp: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.update(|p| p.read(Instant::now()));
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// An answer's body, holding its request's place in flight until it ends.
struct Answering {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body did not arrive within `[server] body_timeout_s` of its headers; the
/// request is answered 408.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body did not arrive within {} s of its headers ([server] body_timeout_s)",
    limit.as_secs()
)]
pub struct BodyTimedOut {
    limit: Duration,
}

/// A request's body with a deadline for the whole of it, set when its headers arrived.
/// The timer starts only if the body is read, and only while it is waited for.
struct DeadlineBody {
    body: Incoming,
    deadline: Instant,
    limit: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl DeadlineBody {
    fn new(body: Incoming, limit: Duration) -> Self {
        Self {
            body,
            deadline: Instant::now() + limit,
            limit,
            timer: None,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(BoxError::from)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut { limit: this.limit })))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            header: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            max_connections: 10,
            per_address: 0,
        }
    }

    #[test]
    fn a_new_connection_has_the_header_deadline_and_a_request_has_none() {
        let t0 = Instant::now();
        let l = limits();
        let fresh = Phase::Head { since: t0 };
        assert_eq!(fresh.deadline(&l), Some(t0 + l.header));
        let more_bytes = fresh.read(t0 + Duration::from_secs(5));
        assert_eq!(more_bytes, fresh, "bytes of the same head do not extend it");
        let busy = fresh.request();
        assert_eq!(busy.deadline(&l), None);
    }

    #[test]
    fn an_answered_connection_waits_idle_then_the_next_head_has_the_header_deadline() {
        let t0 = Instant::now();
        let l = limits();
        let t1 = t0 + Duration::from_secs(100);
        let idle = Phase::Head { since: t0 }.request().answered(t1);
        assert_eq!(idle.deadline(&l), Some(t1 + l.idle));
        let t2 = t1 + Duration::from_secs(20);
        let next = idle.read(t2);
        assert_eq!(next.deadline(&l), Some(t2 + l.header));
    }

    #[test]
    fn the_connection_is_idle_only_when_every_request_is_answered() {
        let t0 = Instant::now();
        let l = limits();
        let two = Phase::Head { since: t0 }.request().request();
        let one = two.answered(t0);
        assert_eq!(one, Phase::Busy { requests: 1 });
        assert_eq!(one.read(t0).deadline(&l), None, "reading while busy");
        assert_eq!(one.answered(t0), Phase::Idle { since: t0 });
    }
}
