//! A private `redis-server` process for tests that must stop and restart Redis (the
//! cluster-mode queue and event bus surviving a Redis restart). Not part of the request
//! flow. Runs without persistence (`--save "" --appendonly no`), on a free port, and is
//! killed when dropped.

use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// How long a started server may take to answer `PING`.
const READY_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// The `redis-server` binary: `$REDIS_SERVER_BIN`, else the first on `PATH`, else
    /// `/usr/bin/redis-server`; `None` when none exists.
    pub fn binary() -> Option<PathBuf> {
        if let Some(bin) = std::env::var_os("REDIS_SERVER_BIN") {
            return Some(PathBuf::from(bin)).filter(|p| p.is_file());
        }
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
            .chain([PathBuf::from("/usr/bin")])
            .map(|dir| dir.join("redis-server"))
            .find(|p| p.is_file())
    }

    /// Starts a server on a free port and waits until it answers.
    pub async fn start() -> io::Result<Self> {
        let binary = Self::binary()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "redis-server was not found"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut server = Self {
            binary,
            port,
            child: None,
        };
        server.spawn().await?;
        Ok(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server and waits for it to exit. Its data is gone.
    pub async fn stop(&mut self) -> io::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }

    /// Stops the server and starts a new, empty one on the same port.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.stop().await?;
        self.spawn().await
    }

    async fn spawn(&mut self) -> io::Result<()> {
        let child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--loglevel", "warning"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            if ping(self.port).await.is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                return Err(io::Error::other(format!(
                    "redis-server on port {} exited at start: {status}",
                    self.port
                )));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("redis-server on port {} did not answer", self.port),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// `$REDIS_URL`, or `None` after printing a note that the calling test is skipped.
/// Tests against the shared Redis run only when it is set (CI sets it).
pub fn redis_url_or_skip() -> Option<String> {
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            eprintln!("note: REDIS_URL is not set; Redis test skipped");
            None
        }
    }
}

/// A key prefix no other test uses: `test:<uuid>:`.
pub fn unique_prefix() -> String {
    format!("test:{}:", uuid::Uuid::now_v7().simple())
}

/// Deletes every key that starts with `prefix` (a test's leftovers).
pub async fn delete_keys(url: &str, prefix: &str) -> redis::RedisResult<usize> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let pattern = format!("{}*", crate::queue::redis::connection::glob_escape(prefix));
    let mut cursor: u64 = 0;
    let mut deleted = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(500)
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            deleted += redis::cmd("DEL")
                .arg(&keys)
                .query_async::<usize>(&mut conn)
                .await?;
        }
        cursor = next;
        if cursor == 0 {
            return Ok(deleted);
        }
    }
}

/// Sends an inline `PING` and expects `+PONG`.
async fn ping(port: u16) -> io::Result<()> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.write_all(b"PING\r\n").await?;
    let mut buf = [0u8; 7];
    tcp.read_exact(&mut buf).await?;
    if &buf == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(io::Error::other("unexpected answer to PING"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn starts_restarts_and_stops() {
        if RedisServer::binary().is_none() {
            eprintln!("note: redis-server not found; private Redis test skipped");
            return;
        }
        let mut server = RedisServer::start().await.unwrap();
        assert!(ping(server.port()).await.is_ok());
        server.restart().await.unwrap();
        assert!(ping(server.port()).await.is_ok());
        server.stop().await.unwrap();
        assert!(ping(server.port()).await.is_err());
    }
}
