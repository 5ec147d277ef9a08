//! What the Redis lanes hold: their keys, and the tasks in them (waiting or handed out and
//! not yet acknowledged), so the router can find tasks the queue lost in a Redis restart.

use std::collections::HashSet;

use redis::streams::StreamRangeReply;

use super::connection::glob_escape;
use super::{FIELD_JOB, Inner, Job, backend};
use crate::domain::TaskId;
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
