//! What the Redis lanes hold: their keys, the tasks in them (waiting or handed out and
//! not yet acknowledged), so the router can find tasks the queue lost in a Redis restart,
//! and where a waiting task stands in its lane.

use std::collections::HashSet;

use redis::streams::{StreamInfoGroupsReply, StreamRangeReply};

use super::connection::{glob_escape, is_no_group};
use super::{FIELD_JOB, GROUP, Inner, Job, backend};
use crate::domain::{Lane, TaskId};
use crate::queue::QueueError;

/// Every lane stream under this queue's prefix.
pub(super) async fn lane_keys(inner: &Inner) -> Result<Vec<String>, QueueError> {
    let pattern = format!("{}tasks:*", glob_escape(&inner.prefix));
    let mut commands = inner.redis.commands();
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
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
            break;
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
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

/// Only the task of a job: a queue entry read for its place needs no more.
#[derive(serde::Deserialize)]
struct JobTask {
    task_id: TaskId,
}

/// Where `task_id` waits in `lane`: its place among the entries the group has not handed
/// out yet (those after its last-delivered id), oldest first. `None` when it is not among
/// them (handed out, or not in the lane) or the lane's stream or group does not exist.
pub(super) async fn position(
    inner: &Inner,
    lane: &Lane,
    task_id: TaskId,
) -> Result<Option<usize>, QueueError> {
    let key = inner.key(lane);
    let mut commands = inner.redis.commands();
    let groups: redis::RedisResult<StreamInfoGroupsReply> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(&key)
        .query_async(&mut commands)
        .await;
    let groups = match groups {
        Ok(g) => g,
        // No stream yet (`ERR no such key`) or no group: nothing waits there.
        Err(e) if is_no_group(&e) || e.code() == Some("ERR") => return Ok(None),
        Err(e) => return Err(backend(e)),
    };
    let Some(group) = groups.groups.iter().find(|g| g.name == GROUP) else {
        return Ok(None);
    };
    let waiting: StreamRangeReply = redis::cmd("XRANGE")
        .arg(&key)
        .arg(format!("({}", group.last_delivered_id))
        .arg("+")
        .query_async(&mut commands)
        .await
        .map_err(backend)?;
    Ok(waiting
        .ids
        .iter()
        .position(|entry| {
            let text: Option<String> = entry.get(FIELD_JOB);
            text.and_then(|t| serde_json::from_str::<JobTask>(&t).ok())
                .is_some_and(|j| j.task_id == task_id)
        })
        .map(|i| i + 1))
}
