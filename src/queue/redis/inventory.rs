//! What the Redis lanes hold: their keys, and the tasks in them (waiting or handed out and
//! not yet acknowledged), so the router can find tasks the queue lost in a Redis restart,
//! and where a waiting task stands in its lane.

use std::collections::{HashMap, HashSet};

use redis::streams::StreamRangeReply;

use super::connection::glob_escape;
use super::take::{lua_last_delivered, now_ms};
use super::{FIELD_JOB, GROUP, Inner, Job, Priority, backend};
use crate::domain::{Lane, Person, TaskId};
use crate::queue::{Depth, QueueError};

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

/// Jobs waiting (not yet handed out) per lane and class, fresh, queued again and taken out
/// of turn together; those with none are left out.
pub(super) async fn class_depths(
    inner: &Inner,
) -> Result<Vec<(Lane, Priority, usize)>, QueueError> {
    let mut out: Vec<(Lane, Priority, usize)> = Vec::new();
    for d in people_depths(inner, None).await? {
        match out.last_mut() {
            Some((lane, class, n)) if *lane == d.lane && *class == d.priority => *n += d.waiting,
            _ if d.waiting > 0 => out.push((d.lane, d.priority, d.waiting)),
            _ => {}
        }
    }
    Ok(out)
}

/// Each person's jobs per lane and class (see [`crate::queue::Queue::people_depths`]), of
/// every lane, or of `lane` alone; sorted, those with none waiting or running left out.
pub(super) async fn people_depths(
    inner: &Inner,
    lane: Option<&Lane>,
) -> Result<Vec<Depth>, QueueError> {
    let keys = match lane {
        Some(lane) => Priority::ALL
            .iter()
            .flat_map(|p| inner.all_class_keys(lane, *p))
            .collect(),
        None => lane_keys(inner).await?,
    };
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let counted = inner.counted(&keys).await.map_err(backend)?;
    let mut out: HashMap<(Lane, Priority, String), (usize, usize)> = HashMap::new();
    for (key, people) in keys.iter().zip(counted) {
        let Some((lane, class)) = inner.lane_of(key) else {
            continue;
        };
        for (person, waiting, running) in people {
            let n = out.entry((lane.clone(), class, person)).or_default();
            n.0 += waiting;
            n.1 += running;
        }
    }
    let mut out: Vec<Depth> = out
        .into_iter()
        .filter_map(|((lane, priority, person), (waiting, running))| {
            Some(Depth {
                lane,
                priority,
                person: Person::parse(&person).ok()?,
                waiting,
                running,
            })
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The jobs waiting in `lane`'s streams that a fresh job of `priority` from `person` is
/// taken after (see [`crate::queue::Queue::ahead`]): the better classes', and the
/// people's turns in its own ([`crate::queue::turns::ahead_in_turn`], counted in this lane
/// alone); their prompts are not read.
///
/// With `taken`, the job is one of the person's that a worker holds (it asks whether to
/// keep it): it is not counted among their running jobs.
pub(super) async fn ahead(
    inner: &Inner,
    lane: &Lane,
    priority: Priority,
    person: &Person,
    taken: bool,
) -> Result<crate::placement::Ahead, QueueError> {
    let mut depths = people_depths(inner, Some(lane)).await?;
    if taken
        && let Some(d) = depths
            .iter_mut()
            .find(|d| &d.person == person && d.running > 0)
    {
        d.running -= 1;
    }
    let jobs = crate::queue::turns::ahead_in_turn(&depths, priority, person)
        .into_iter()
        .map(|(_, n)| n)
        .sum();
    Ok(crate::placement::Ahead::jobs(jobs))
}

/// Deletes the waiting entry of task `ARGV[3]` (its job in field `ARGV[2]` names it as
/// `"task_id":"<id>"`) from the streams in `KEYS` (stream, index, stream, index), and
/// from the stream's index, unless group `ARGV[1]` has delivered it: a worker that holds
/// it skips it as it would have. Atomic: no consumer reads between the look and the
/// delete. Returns 1 when an entry was deleted.
const WITHDRAW_SCRIPT: &str = concat!(
    lua_last_delivered!(),
    r#"
local needle = '"task_id":"' .. ARGV[3] .. '"'
for i = 1, #KEYS, 2 do
  local key = KEYS[i]
  local ok, last = last_delivered(key, ARGV[1])
  if ok then
    local from = last and ('(' .. last) or '-'
    for _, e in ipairs(redis.call('XRANGE', key, from, '+')) do
      for j = 1, #e[2], 2 do
        if e[2][j] == ARGV[2] and string.find(e[2][j + 1], needle, 1, true) then
          redis.call('XDEL', key, e[1])
          redis.call('XDEL', KEYS[i + 1], e[1])
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
    let keys = inner.with_indexes(&inner.class_keys(lane, priority));
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
