//! Redis connections for cluster mode, shared by the queue ([`super::RedisQueue`]) and the
//! event bus ([`crate::events::redis::RedisEvents`]).
//!
//! Two kinds: one [`ConnectionManager`] for ordinary commands (multiplexed, reconnects by
//! itself after a drop), and dedicated connections for blocking reads (`XREADGROUP BLOCK`,
//! `XREAD BLOCK`), because a blocked command holds up everything behind it on a
//! multiplexed connection. A dedicated connection is lent for one read and given back only
//! when the read completed. Dropped mid-read (a cancelled `dequeue`, a client that went
//! away), the connection is dropped: its last handle aborts the client library's driver
//! task, the socket closes, and Redis ends the blocked command without delivering to it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, ErrorKind, RedisError, RedisResult, ServerErrorKind};

/// The longest a blocking read may block; callers clamp to this.
pub(crate) const MAX_BLOCK: Duration = Duration::from_secs(10);
/// Blocking connections kept idle for reuse.
const MAX_IDLE: usize = 16;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// A Redis server: the command connection and a pool of blocking connections.
#[derive(Clone)]
pub(crate) struct Redis {
    client: Client,
    commands: ConnectionManager,
    idle: Arc<Mutex<Vec<MultiplexedConnection>>>,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's connection info may hold a password: never print it.
        f.debug_struct("Redis").finish_non_exhaustive()
    }
}

impl Redis {
    /// Opens the command connection; fails when `url` is invalid or nothing answers.
    pub(crate) async fn connect(url: &str) -> RedisResult<Self> {
        let client = Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(2))
            .set_number_of_retries(4);
        let commands = client.get_connection_manager_with_config(config).await?;
        Ok(Self {
            client,
            commands,
            idle: Arc::default(),
        })
    }

    /// A handle for ordinary (non-blocking) commands.
    pub(crate) fn commands(&self) -> ConnectionManager {
        self.commands.clone()
    }

    /// A dedicated connection for one blocking read (reused or newly opened).
    pub(crate) async fn lend(&self) -> RedisResult<Lent> {
        let reused = lock(&self.idle).pop();
        let conn = match reused {
            Some(conn) => conn,
            None => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(MAX_BLOCK + COMMAND_TIMEOUT));
                self.client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?
            }
        };
        Ok(Lent {
            conn: Some(conn),
            idle: self.idle.clone(),
        })
    }
}

/// A blocking connection on loan. [`give_back`](Self::give_back) after a completed read;
/// dropping it instead closes the connection, which ends a read still blocked on it.
pub(crate) struct Lent {
    conn: Option<MultiplexedConnection>,
    idle: Arc<Mutex<Vec<MultiplexedConnection>>>,
}

impl Lent {
    /// The connection; `None` only after `give_back`, which consumes the loan.
    pub(crate) fn conn(&mut self) -> Option<&mut MultiplexedConnection> {
        self.conn.as_mut()
    }

    pub(crate) fn give_back(mut self) {
        if let Some(conn) = self.conn.take() {
            let mut idle = lock(&self.idle);
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether trying again later may help: the connection dropped, the server is down,
/// restarting or still loading.
pub(crate) fn is_transient(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::MasterDown
            )
        )
}

/// Whether Redis answered that the consumer group (or its stream) does not exist, as after
/// a restart without persistence.
pub(crate) fn is_no_group(e: &RedisError) -> bool {
    e.code() == Some("NOGROUP")
        || e.clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, err)| err.code() == "NOGROUP"))
}

/// Exponential backoff between reconnection attempts: 50 ms doubling up to 5 s.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(5);

    pub(crate) fn new() -> Self {
        Self { next: Self::FIRST }
    }

    pub(crate) fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    /// Sleeps for the current delay, then doubles it.
    pub(crate) async fn wait(&mut self) {
        tokio::time::sleep(self.step()).await;
    }

    /// The current delay; the next one is twice as long, up to the cap.
    fn step(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        now
    }
}

/// Waits up to `block` for at most `count` entries of stream `key` after id `last`, on a
/// lent connection, each with its value read as JSON from `field`. An unreadable entry
/// comes back as `None` (logged), so the reader moves past it.
pub(crate) async fn read_json_after<T: serde::de::DeserializeOwned>(
    redis: &Redis,
    key: &str,
    last: &str,
    field: &str,
    count: usize,
    block: Duration,
) -> RedisResult<Vec<(String, Option<T>)>> {
    let mut lent = redis.lend().await?;
    let Some(conn) = lent.conn() else {
        return Ok(Vec::new());
    };
    let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREAD")
        .arg("COUNT")
        .arg(count)
        .arg("BLOCK")
        .arg(u64::try_from(block.as_millis()).unwrap_or(u64::MAX))
        .arg("STREAMS")
        .arg(key)
        .arg(last)
        .query_async(conn)
        .await?;
    lent.give_back();
    Ok(reply
        .into_iter()
        .flat_map(|r| r.keys)
        .flat_map(|k| k.ids)
        .map(|e| {
            let value = e
                .get::<String>(field)
                .and_then(|t| serde_json::from_str::<T>(&t).ok());
            if value.is_none() {
                tracing::warn!(stream = %key, entry = %e.id, "unreadable stream entry skipped");
            }
            (e.id, value)
        })
        .collect())
}

/// Attempts of a command while the connection is briefly gone.
const COMMAND_ATTEMPTS: u32 = 3;

/// Runs `op` up to three times while the connection is briefly gone (the command
/// connection reconnects in the background after the first failure).
pub(crate) async fn with_retries<T, F, Fut>(mut op: F) -> RedisResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let mut backoff = Backoff::new();
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e) if is_transient(&e) && attempt < COMMAND_ATTEMPTS => {
                attempt += 1;
                backoff.wait().await;
            }
            other => return other,
        }
    }
}

/// Escapes glob characters so `prefix` matches itself in `SCAN MATCH`.
pub(crate) fn glob_escape(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut b = Backoff::new();
        let steps: Vec<u128> = (0..9).map(|_| b.step().as_millis()).collect();
        assert_eq!(steps, [50, 100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        b.reset();
        assert_eq!(b.step(), Backoff::FIRST);
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("t1:"), "t1:");
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
