//! Leases of the entries this process holds: renewed (`XCLAIM` to the holder with
//! `JUSTID`, which resets the idle time without counting a delivery) every third of the
//! lease while the process lives, so only the jobs of dead processes are taken over.

use std::sync::Weak;
use std::time::Duration;

use super::connection::lock;
use super::take::Taken;
use super::{GROUP, Inner};

impl Inner {
    pub(super) fn lease(&self, taken: &[Taken], consumer: &str) {
        let mut leases = lock(&self.leases);
        for t in taken {
            leases.insert((t.key.clone(), t.id.clone()), consumer.to_owned());
        }
    }

    pub(super) fn release(&self, key: &str, id: &str) {
        lock(&self.leases).remove(&(key.to_owned(), id.to_owned()));
    }

    /// Resets the idle time of every entry this instance holds, so no other consumer
    /// takes them over while this process is alive.
    pub(super) async fn renew(&self) {
        let leases: Vec<((String, String), String)> = lock(&self.leases)
            .iter()
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        if leases.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        for ((key, id), consumer) in &leases {
            pipe.cmd("XCLAIM")
                .arg(key)
                .arg(GROUP)
                .arg(consumer)
                .arg(0)
                .arg(id)
                .arg("JUSTID")
                .ignore();
        }
        if let Err(e) = pipe.query_async::<()>(&mut self.redis.commands()).await {
            tracing::warn!(jobs = leases.len(), error = %e, "could not renew the leases of running jobs");
        }
    }
}

/// Releases the lease of an entry unless it became a delivery: on error, on a dropped
/// `dequeue` future, or when the entry was put back or dropped.
pub(super) struct Unleased<'a> {
    pub(super) inner: &'a Inner,
    pub(super) key: String,
    pub(super) id: String,
    pub(super) armed: bool,
}

impl Drop for Unleased<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inner.release(&self.key, &self.id);
        }
    }
}

pub(super) async fn keep_leases(inner: Weak<Inner>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.renew().await;
    }
}
