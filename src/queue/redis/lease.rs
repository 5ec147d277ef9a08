//! Leases of the entries this process holds: renewed (`XCLAIM` to the holder with
//! `JUSTID`, which resets the idle time without counting a delivery) every third of the
//! lease while the process lives, so only the jobs of dead processes are taken over.
//!
//! The same loop sweeps the consumers of gone processes out of the groups: every
//! process names its consumers afresh, so without a sweep each restart of a worker would
//! leave names behind for ever. A consumer is removed only when it holds no entry and has
//! been idle for [`SWEEP_IDLE_LEASES`] leases, checked and removed in one script, so no
//! entry can be taken between the check and the removal (Redis would drop a removed
//! consumer's pending entries). A live consumer that is swept loses nothing: Redis makes
//! it again on its next read.

use std::sync::Weak;
use std::time::Duration;

use super::connection::lock;
use super::take::Taken;
use super::{GROUP, Inner, millis};

/// How many leases a consumer with no entries stays idle before it is swept.
pub(super) const SWEEP_IDLE_LEASES: u32 = 10;

/// Removes, in one step, the consumers of group `ARGV[1]` of stream `KEYS[1]` that hold no
/// entry and have been idle for at least `ARGV[2]` ms; returns how many it removed.
const SWEEP_SCRIPT: &str = r"
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then return 0 end
local removed = 0
for _, consumer in ipairs(consumers) do
  local name, pending, idle
  for i = 1, #consumer, 2 do
    local field = consumer[i]
    if field == 'name' then name = consumer[i + 1]
    elseif field == 'pending' then pending = consumer[i + 1]
    elseif field == 'idle' then idle = consumer[i + 1] end
  end
  if name and pending == 0 and idle and idle >= tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    removed = removed + 1
  end
end
return removed
";

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

    /// Sweeps idle consumers with no entries out of the group of every stream this
    /// instance uses; returns how many it removed.
    pub(super) async fn sweep_consumers(&self) -> usize {
        let keys: Vec<String> = lock(&self.groups).iter().cloned().collect();
        let idle_ms = millis(self.options.lease * SWEEP_IDLE_LEASES);
        let mut removed = 0;
        for key in keys {
            let swept: redis::RedisResult<usize> = redis::cmd("EVAL")
                .arg(SWEEP_SCRIPT)
                .arg(1)
                .arg(&key)
                .arg(GROUP)
                .arg(idle_ms)
                .query_async(&mut self.redis.commands())
                .await;
            match swept {
                Ok(n) => removed += n,
                Err(e) => {
                    tracing::debug!(stream = %key, error = %e, "could not sweep idle consumers");
                }
            }
        }
        if removed > 0 {
            tracing::info!(
                consumers = removed,
                "swept idle consumers of gone processes out of the queue's groups"
            );
        }
        removed
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

/// Renews this instance's leases every `every` (a third of the lease) and sweeps idle
/// consumers every [`SWEEP_IDLE_LEASES`] leases, while the queue lives.
pub(super) async fn keep_leases(inner: Weak<Inner>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let sweep_ticks = 3 * u64::from(SWEEP_IDLE_LEASES);
    let mut ticks: u64 = 0;
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.renew().await;
        ticks += 1;
        if ticks % sweep_ticks == 0 {
            inner.sweep_consumers().await;
        }
    }
}
