//! The HTTP server loop: accepts client connections on the bound listener and serves each
//! with the router (`api::router`), under the limits a port on a home network needs.
//! `startup` runs it until shutdown.
//!
//! - While a connection has no request in flight it has a deadline: the rest of a request's
//!   headers within `header_timeout_s`, the next request within `idle_timeout_s`
//!   ([`connection`]). A request's body must arrive within `body_timeout_s` of its headers
//!   ([`BodyTimedOut`]). A request being answered has no deadline here, however long its
//!   answer takes or streams: those bounds are `[timeouts]`'s.
//! - At most `max_connections` are open at once, and at most `max_connections_per_address`
//!   from one client address, so that one device cannot take them all; one more is
//!   answered 503 and closed, and the accept loop goes on whatever `accept` fails with. The
//!   open-file limit is raised at start and the cap kept below it ([`nofile`]), so idle
//!   sockets cannot use up the descriptors the store, the queue and the backends need.
//! - On shutdown no connection is accepted any more, idle ones close, and those with a
//!   request in flight finish it first.

mod connection;
mod nofile;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::IpAddr;
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
    /// Connections one client address may hold open at once; 0: no such cap.
    pub per_address: usize,
}

impl Limits {
    /// The configured limits; `max_connections` as configured (see [`connection_cap`]).
    pub fn from_config(server: &ServerConfig) -> Self {
        Self {
            header: Duration::from_secs(server.header_timeout_s),
            body: Duration::from_secs(server.body_timeout_s),
            idle: Duration::from_secs(server.idle_timeout_s),
            max_connections: server.max_connections.max(1),
            per_address: server.max_connections_per_address,
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
    let mut addresses = PerAddress::new(limits.per_address);
    let mut refused = Tally::default();
    let mut refused_address = Tally::default();
    let mut failed = Tally::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(done) = connections.join_next_with_id() => {
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => {
                        if e.is_panic() {
                            tracing::error!(error = %e, "a connection task panicked");
                        }
                        e.id()
                    }
                };
                addresses.closed(id);
            }
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) if !addresses.has_room(peer.ip()) => {
                    refuse(&tcp, &refusal);
                    if let Some(n) = refused_address.count() {
                        tracing::warn!(
                            address = %peer.ip(),
                            max_connections_per_address = limits.per_address,
                            refused = n,
                            "one address holds as many connections as it may: refusing its new ones with 503"
                        );
                    }
                }
                Ok((tcp, peer)) => match slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        if let Err(e) = tcp.set_nodelay(true) {
                            tracing::debug!(error = %e, "could not set TCP_NODELAY");
                        }
                        let handle = connections.spawn(connection::run(
                            tcp,
                            peer,
                            app.clone(),
                            builder.clone(),
                            limits,
                            stop.clone(),
                            slot,
                        ));
                        addresses.opened(handle.id(), peer.ip());
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

/// The connections each client address holds open, against `max_connections_per_address`
/// (none counted when it is 0). Kept by the accept loop alone: a connection counts from
/// its accept until its task ends, however it ends.
#[derive(Debug, Default)]
struct PerAddress {
    cap: usize,
    open: HashMap<IpAddr, usize>,
    of_task: HashMap<tokio::task::Id, IpAddr>,
}

impl PerAddress {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            ..Self::default()
        }
    }

    /// Whether `ip` may open one more connection. IPv4 clients reaching an IPv6 socket
    /// count as their IPv4 address. Each IPv6 address counts on its own: on a home network
    /// every device has its own in the one prefix the house is given.
    fn has_room(&self, ip: IpAddr) -> bool {
        self.cap == 0 || self.open.get(&ip.to_canonical()).copied().unwrap_or(0) < self.cap
    }

    /// Counts the connection served by task `id` against `ip`.
    fn opened(&mut self, id: tokio::task::Id, ip: IpAddr) {
        if self.cap == 0 {
            return;
        }
        let ip = ip.to_canonical();
        *self.open.entry(ip).or_default() += 1;
        self.of_task.insert(id, ip);
    }

    /// The connection of task `id` has ended.
    fn closed(&mut self, id: tokio::task::Id) {
        let Some(ip) = self.of_task.remove(&id) else {
            return;
        };
        if let Entry::Occupied(mut open) = self.open.entry(ip) {
            *open.get_mut() -= 1;
            if *open.get() == 0 {
                open.remove();
            }
        }
    }
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

    #[tokio::test]
    async fn an_address_has_room_up_to_its_cap_and_again_once_one_closes() {
        let ids: Vec<tokio::task::Id> = (0..4).map(|_| tokio::spawn(async {}).id()).collect();
        let (a, b): (IpAddr, IpAddr) = (
            "192.168.1.20".parse().unwrap(),
            "192.168.1.21".parse().unwrap(),
        );
        let a_over_v6: IpAddr = "::ffff:192.168.1.20".parse().unwrap();
        let mut open = PerAddress::new(2);
        assert!(open.has_room(a));
        open.opened(ids[0], a);
        open.opened(ids[1], a_over_v6);
        assert!(
            !open.has_room(a),
            "the same client over an IPv6 socket counts alike"
        );
        assert!(!open.has_room(a_over_v6));
        assert!(open.has_room(b));
        open.opened(ids[2], b);
        open.closed(ids[0]);
        assert!(open.has_room(a));
        // A task that was never counted (or counted once) changes nothing more.
        open.closed(ids[0]);
        open.closed(ids[3]);
        open.closed(ids[1]);
        open.closed(ids[2]);
        assert!(open.open.is_empty() && open.of_task.is_empty(), "{open:?}");

        let mut uncapped = PerAddress::new(0);
        for id in &ids {
            uncapped.opened(*id, a);
        }
        assert!(uncapped.has_room(a));
        assert!(uncapped.open.is_empty(), "nothing is counted without a cap");
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
