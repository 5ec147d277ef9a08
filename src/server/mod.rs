//! The HTTP server loop: accepts client connections on the bound listener and serves each
//! with the router (`api::router`), under the limits a port on a home network needs.
//! `startup` runs it until shutdown.
//!
//! - While a connection has no request in flight it has a deadline: the rest of a request's
//!   headers within `header_timeout_s`, the next request within `idle_timeout_s`
//!   ([`connection`]). A request's body must arrive within `body_timeout_s` of its headers
//!   ([`BodyTimedOut`]). A request being answered has no deadline here, however long its
//!   answer takes or streams: those bounds are `[timeouts]`'s.
//! - At most `max_connections` are open at once; one more is answered 503 and closed, and
//!   the accept loop goes on whatever `accept` fails with. The open-file limit is raised at
//!   start and the cap kept below it ([`nofile`]), so idle sockets cannot use up the
//!   descriptors the store, the queue and the backends need.
//! - On shutdown no connection is accepted any more, idle ones close, and those with a
//!   request in flight finish it first.

mod connection;
mod nofile;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use connection::BodyTimedOut;
pub use nofile::{connection_cap, raise_nofile_limit};

use crate::api::ApiError;
use crate::config::ServerConfig;

/// The limits every connection is served under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header: Duration,
    pub body: Duration,
    pub idle: Duration,
    pub max_connections: usize,
}

impl Limits {
    /// The configured limits; `max_connections` as configured (see [`connection_cap`]).
    pub fn from_config(server: &ServerConfig) -> Self {
        Self {
            header: Duration::from_secs(server.header_timeout_s),
            body: Duration::from_secs(server.body_timeout_s),
            idle: Duration::from_secs(server.idle_timeout_s),
            max_connections: server.max_connections.max(1),
        }
    }
}

/// How long the accept loop waits after `accept` failed for a reason other than the one
/// connection (out of descriptors, out of memory) before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// At most one log line per this long about refused connections or failing accepts.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `stop` is cancelled, then waits for every open
/// connection to finish what it is answering.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, stop: CancellationToken) {
    let builder = Arc::new(connection_builder());
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusal = refusal_bytes();
    let mut connections = JoinSet::new();
    let mut refused = Tally::default();
    let mut failed = Tally::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(done) = connections.join_next() => {
                if let Err(e) = done
                    && e.is_panic()
                {
                    tracing::error!(error = %e, "a connection task panicked");
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => match slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        if let Err(e) = tcp.set_nodelay(true) {
                            tracing::debug!(error = %e, "could not set TCP_NODELAY");
                        }
                        connections.spawn(connection::run(
                            tcp,
                            peer,
                            app.clone(),
                            builder.clone(),
                            limits,
                            stop.clone(),
                            slot,
                        ));
                    }
                    Err(_) => {
                        refuse(&tcp, &refusal);
                        if let Some(n) = refused.count() {
                            tracing::warn!(
                                max_connections = limits.max_connections,
                                refused = n,
                                "connection cap reached: refusing new connections with 503"
                            );
                        }
                    }
                },
                Err(e) if is_one_connection(&e) => {}
                Err(e) => {
                    if let Some(n) = failed.count() {
                        tracing::error!(error = %e, failures = n, "cannot accept connections; retrying");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(ACCEPT_RETRY) => {}
                        () = stop.cancelled() => break,
                    }
                }
            },
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// hyper's HTTP/1 and HTTP/2 connection builder. Its own header-read timeout stays off:
/// it would also run while a keep-alive connection waits for its next request, ending it
/// after the header timeout instead of the idle one; [`connection`] keeps both deadlines.
fn connection_builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().header_read_timeout(None);
    builder
}

/// `accept` failures that concern only the connection being accepted.
fn is_one_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}

/// The answer to a connection past the cap: 503 in OpenAI's shape (no request has been
/// read, so no route's shape is known), then the connection closes.
fn refusal_bytes() -> Vec<u8> {
    let err = ApiError::TooManyConnections;
    let body = err.openai_body().to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        err.status().as_u16(),
        err.status().canonical_reason().unwrap_or_default(),
        body.len(),
    )
    .into_bytes()
}

/// Answers a connection past the cap without waiting on it: what the client already sent
/// is read first, so that closing ends the connection cleanly rather than with a reset
/// that could discard the answer.
fn refuse(tcp: &TcpStream, refusal: &[u8]) {
    let mut scratch = [0u8; 4096];
    for _ in 0..16 {
        match tcp.try_read(&mut scratch) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = tcp.try_write(refusal);
}

/// Counts events and says when to log them: at most once per [`LOG_EVERY`], with how many
/// there were since the last line.
#[derive(Debug, Default)]
struct Tally {
    since_log: u64,
    last_log: Option<Instant>,
}

impl Tally {
    fn count(&mut self) -> Option<u64> {
        self.since_log += 1;
        let now = Instant::now();
        if self
            .last_log
            .is_some_and(|t| now.duration_since(t) < LOG_EVERY)
        {
            return None;
        }
        self.last_log = Some(now);
        Some(std::mem::take(&mut self.since_log))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_json_503() {
        let text = String::from_utf8(refusal_bytes()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "too_many_connections");
    }

    #[test]
    fn a_tally_logs_the_first_event_then_at_most_once_per_period() {
        let mut t = Tally::default();
        assert_eq!(t.count(), Some(1));
        assert_eq!(t.count(), None);
        assert_eq!(t.count(), None);
        t.last_log = t.last_log.and_then(|l| l.checked_sub(LOG_EVERY));
        assert_eq!(t.count(), Some(3));
    }
}
