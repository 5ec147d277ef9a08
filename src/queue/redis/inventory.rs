//! What the Redis lanes hold: their keys, and the tasks in them (waiting or handed out and
//! not yet acknowledged), so the router can find tasks the queue lost in a Redis restart,
//! and where a waiting task stands in its lane.

use std::collections::{HashMap, HashSet};

use redis::streams::{StreamInfoGroupsReply, StreamRangeReply};

use super::connection::glob_escape;
use super::take::{lua_last_delivered, now_ms};
use super::{FIELD_JOB, GROUP, Inner, Job, Priority, backend};
use crate::domain::{Lane, TaskId};
use crate::queue::QueueError;

/// Every lane stream under this queue's prefix, of every priority class: fresh jobs, jobs
/// queued again and jobs taken out of turn.
pub(super) async fn lane_keys(inner: &Inner) -> Result<Vec<String>, QueueError> {
    let mut keys = Vec::new();
    for class in ["", "background:", "batch:"] {
        for again in ["", super::REQUEUED, super::TAKEN] {
            let pattern = format!("{}{again}{class}tasks:*", glob_escape(&inner.prefix));
            scan(inner, &pattern, &mut keys).await?;
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

async fn scan(inner: &Inner, pattern: &str, keys: &mut Vec<String>) -> Result<(), QueueError> {
    let mut commands = inner.redis.commands();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(200)
            .arg("TYPE")
            .arg("stream")
            .query_async(&mut commands)
            .await
            .map_err(backend)?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            return Ok(());
        }
    }
}

/// The lanes among `lanes` whose interactive stream has a job waiting (see
/// [`crate::queue::Queue::awaited`]). Entries put there before priorities existed count
/// too: they were all a person's.
pub(super) async fn awaited(inner: &Inner, lanes: &[Lane]) -> Result<Vec<Lane>, QueueError> {
    if lanes.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<[String; 2]> = lanes
        .iter()
        .map(|l| inner.class_keys(l, Priority::Interactive))
        .collect();
    let waiting = inner
        .waiting(keys.as_flattened(), 1)
        .await
        .map_err(backend)?;
    Ok(lanes
        .iter()
        .zip(&keys)
        .filter(|(_, keys)| waiting.iter().any(|t| keys.contains(&t.key)))
        .map(|(lane, _)| lane.clone())
        .collect())
}

/// Where the job of `task_id` stands among the jobs waiting in `lane` (1 = next), by
/// [`super::Aging::rank`], the people's turns in the lane ([`super::turns`]) and age
/// now; `None` when it does not wait there.
pub(super) async fn position(
    inner: &Inner,
    lane: &Lane,
    task_id: TaskId,
) -> Result<Option<usize>, QueueError> {
    let keys: Vec<String> = Priority::ALL
        .iter()
        .flat_map(|p| inner.all_class_keys(lane, *p))
        .collect();
    let waiting = inner.waiting(&keys, 0).await.map_err(backend)?;
    let Some(at) = waiting
        .iter()
        .position(|t| t.job.as_ref().is_some_and(|j| j.task_id == task_id))
    else {
        return Ok(None);
    };
    let people = inner.people(&keys, false).await.map_err(backend)?;
    let (aging, now) = (inner.options.aging, now_ms(inner.clock.ahead()));
    let orders = people.orders(&waiting, aging, now);
    Ok(Some(1 + orders.iter().filter(|o| **o < orders[at]).count()))
}

/// The task of every entry in every lane (entries stay until acknowledged).
pub(super) async fn task_ids(inner: &Inner) -> Result<HashSet<TaskId>, QueueError> {
    let mut commands = inner.redis.commands();
    let mut out = HashSet::new();
    for key in lane_keys(inner).await? {
        let reply: StreamRangeReply = redis::cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .query_async(&mut commands)
            .await
            .map_err(backend)?;
        for entry in reply.ids {
            let text: Option<String> = entry.get(FIELD_JOB);
            if let Some(job) = text.and_then(|t| serde_json::from_str::<Job>(&t).ok()) {
                out.insert(job.task_id);
            }
        }
    }
    Ok(out)
}

/// Jobs waiting (not yet handed out) per lane and class, fresh and queued again together,
/// from `XLEN` less the group's pending count of each stream; those with none are left out.
pub(super) async fn class_depths(
    inner: &Inner,
) -> Result<Vec<(Lane, Priority, usize)>, QueueError> {
    let mut out: HashMap<(Lane, Priority), usize> = HashMap::new();
    for key in lane_keys(inner).await? {
        let Some(lane_class) = inner.lane_of(&key) else {
            continue;
        };
        let waiting = waiting_in(inner, &key).await?;
        if waiting > 0 {
            *out.entry(lane_class).or_default() += waiting;
        }
    }
    let mut out: Vec<(Lane, Priority, usize)> =
        out.into_iter().map(|((l, p), n)| (l, p, n)).collect();
    out.sort();
    Ok(out)
}

/// The jobs waiting in `lane`'s streams of `priority` and the better classes, fresh and
/// queued again (see [`crate::queue::Queue::ahead`]); their prompts are not read.
pub(super) async fn ahead(
    inner: &Inner,
    lane: &Lane,
    priority: Priority,
) -> Result<crate::placement::Ahead, QueueError> {
    let mut jobs = 0;
    for class in crate::queue::priority::classes_ahead_of(priority) {
        for key in inner.class_keys(lane, class) {
            jobs += waiting_in(inner, &key).await?;
        }
    }
    Ok(crate::placement::Ahead::jobs(jobs))
}

/// The entries of stream `key` not yet handed out: `XLEN` less the group's pending count
/// (0 for a stream that does not exist).
async fn waiting_in(inner: &Inner, key: &str) -> Result<usize, QueueError> {
    let mut commands = inner.redis.commands();
    let len: usize = redis::cmd("XLEN")
        .arg(key)
        .query_async(&mut commands)
        .await
        .map_err(backend)?;
    if len == 0 {
        return Ok(0);
    }
    let groups: StreamInfoGroupsReply = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(key)
        .query_async(&mut commands)
        .await
        .map_err(backend)?;
    let pending = groups
        .groups
        .iter()
        .find(|g| g.name == GROUP)
        .map_or(0, |g| g.pending);
    Ok(len.saturating_sub(pending))
}

/// Deletes the waiting entry of task `ARGV[3]` (its job in field `ARGV[2]` names it as
/// `"task_id":"<id>"`) from the streams in `KEYS`, unless group `ARGV[1]` has delivered
/// it: a worker that holds it skips it as it would have. Atomic: no consumer reads
/// between the look and the delete. Returns 1 when an entry was deleted.
const WITHDRAW_SCRIPT: &str = concat!(
    lua_last_delivered!(),
    r#"
local needle = '"task_id":"' .. ARGV[3] .. '"'
for _, key in ipairs(KEYS) do
  local ok, last = last_delivered(key, ARGV[1])
  if ok then
    local from = last and ('(' .. last) or '-'
    for _, e in ipairs(redis.call('XRANGE', key, from, '+')) do
      for j = 1, #e[2], 2 do
        if e[2][j] == ARGV[2] and string.find(e[2][j + 1], needle, 1, true) then
          redis.call('XDEL', key, e[1])
          return 1
        end
      end
    end
  end
end
return 0
"#
);

/// Takes task `task_id`'s job, of `priority`, out of `lane`'s streams while it waits
/// there (see [`crate::queue::Queue::withdraw`]); whether it did.
pub(super) async fn withdraw(
    inner: &Inner,
    lane: &Lane,
    priority: Priority,
    task_id: TaskId,
) -> Result<bool, QueueError> {
    let keys = inner.class_keys(lane, priority);
    let deleted: i64 = redis::cmd("EVAL")
        .arg(WITHDRAW_SCRIPT)
        .arg(keys.len())
        .arg(&keys)
        .arg(GROUP)
        .arg(FIELD_JOB)
        .arg(task_id.to_string())
        .query_async(&mut inner.redis.commands())
        .await
        .map_err(backend)?;
    Ok(deleted == 1)
}
