//! Turns in cluster mode: the household's people take turns in the Redis lanes as they
//! do in the in-process queue ([`crate::queue::turns`]).
//!
//! A stream hands out its entries in order, and one person's twenty waiting chats would
//! otherwise all run before anyone else's one. So each stream has an index of whose its
//! entries are (`who:<stream>`, [`super::WHO`]): for each entry of a person other than
//! the default one, a tiny entry of the same id that names them, added and deleted with
//! it in the same script or transaction (a household without keys writes none). When a
//! worker takes, it looks, in one script ([`LOOK_SCRIPT`]), at the indexes of the streams
//! it reads: each waiting person's first entry, and whose entries are handed out and not
//! yet acknowledged (pending: running, or held by a worker); and at when each person was
//! last served (one hash, `turns:served`, written when a worker takes a job; it expires
//! after a day without takes). The looks never read the entries' jobs, so their cost
//! does not grow with the prompts. Among waiting entries of one effective class
//! ([`Aging::rank`]), the worker takes the first entry of the person with the fewest
//! running jobs, then of the one served longest ago (never first), then the oldest. So a
//! person whose job runs waits behind those with none running, people take a machine in
//! rounds when it frees one slot at a time, and one person's own jobs keep their order.
//! An index entry older than its stream's oldest entry (left by a write that failed
//! half-way) is dropped by the next look.
//!
//! An entry that heads its stream is read as before (`XREADGROUP`). One behind others is
//! taken out of turn by one script ([`TAKE_OUT_SCRIPT`]), atomically: unless a worker has
//! taken it or it is gone, it moves to its lane and class's stream of jobs taken out of
//! turn (`taken:<lane>`, `taken:background:<lane>`, …) and is delivered from there to
//! the worker at once. Every worker reads those streams too, so the entry is leased,
//! taken over when its worker dies, acknowledged and counted like any other, and it
//! carries its first id (field [`super::FIELD_QUEUED`]), whose time is when it was
//! queued.
//!
//! Streams whose first job waits for another worker ([`Job::avoid_until`]) are left as
//! they are: none of their entries is taken out of turn. A task's place
//! ([`super::inventory::position`]) counts the same turns.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use redis::RedisResult;
use redis::streams::StreamReadReply;

use super::take::{Order, Taken, id_order, lua_last_delivered, read_reply};
use super::{Aging, FIELD_QUEUED, GROUP, Inner, WHO};
use crate::domain::Person;

/// Lua functions for the scripts that read the people's index ([`super::FIELD_PERSON`]):
/// `after(a, b)` gives whether stream id `a` comes after `b`; `named(key, who, last)`
/// first drops the index entries of `who` older than stream `key`'s oldest entry (one a
/// lost write left behind), then gives its entries as `{id, person, waiting}`, waiting
/// when the id comes after `last`, the id the group last delivered (the others are
/// pending: acknowledged entries are deleted from both).
macro_rules! lua_named {
    () => {
        r"
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function after(a, b)
  local am, as = parts(a)
  local bm, bs = parts(b)
  return am > bm or (am == bm and as > bs)
end
local function named(key, who, last)
  local oldest = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)[1]
  if oldest then
    redis.call('XTRIM', who, 'MINID', oldest[1])
  else
    redis.call('DEL', who)
  end
  local out = {}
  for _, e in ipairs(redis.call('XRANGE', who, '-', '+')) do
    out[#out + 1] = {e[1], e[2][2], after(e[1], last)}
  end
  return out
end
"
    };
}

/// Adds an entry of fields `ARGV[2..]` to stream `KEYS[1]`, and when `ARGV[1]` names a
/// person, an entry of the same id naming them to its index `KEYS[2]`; the new id. An
/// index that already went past that id (its stream was deleted and made again on a
/// clock that went back) is started again: its people count as the default one's until
/// their entries are gone.
pub(super) const ADD_SCRIPT: &str = r"
local add = {'XADD', KEYS[1], '*'}
for i = 2, #ARGV do add[#add + 1] = ARGV[i] end
local id = redis.call(unpack(add))
if ARGV[1] ~= '' and not pcall(redis.call, 'XADD', KEYS[2], id, 'p', ARGV[1]) then
  redis.call('DEL', KEYS[2])
  redis.call('XADD', KEYS[2], id, 'p', ARGV[1])
end
return id
";

/// For the streams and their indexes in `KEYS` (stream, index, stream, index, …), with
/// group `ARGV[1]`, where entries the index does not name are person `ARGV[2]`'s: per
/// stream, a flat list of each person, their waiting entries and their pending ones.
pub(super) const COUNT_SCRIPT: &str = concat!(
    lua_last_delivered!(),
    lua_named!(),
    r"
local out = {}
for i = 1, #KEYS, 2 do
  local key, who = KEYS[i], KEYS[i + 1]
  local counts, order = {}, {}
  local function count(person, at, n)
    if not counts[person] then
      counts[person] = {0, 0}
      order[#order + 1] = person
    end
    counts[person][at] = counts[person][at] + n
  end
  local _, last = last_delivered(key, ARGV[1])
  if last then
    local pending = redis.call('XPENDING', key, ARGV[1])[1]
    local waiting = redis.call('XLEN', key) - pending
    for _, e in ipairs(named(key, who, last)) do
      if e[3] then
        count(e[2], 1, 1)
        waiting = waiting - 1
      else
        count(e[2], 2, 1)
        pending = pending - 1
      end
    end
    if waiting > 0 then count(ARGV[2], 1, waiting) end
    if pending > 0 then count(ARGV[2], 2, pending) end
  end
  local flat = {}
  for _, person in ipairs(order) do
    flat[#flat + 1] = person
    flat[#flat + 1] = tostring(counts[person][1])
    flat[#flat + 1] = tostring(counts[person][2])
  end
  out[(i + 1) / 2] = flat
end
return out
"
);

/// How long the hash of when people were last served lives after the last take.
const SERVED_KEPT_MS: u64 = 24 * 60 * 60 * 1000;

/// For the streams and their indexes in `KEYS` but the last (stream, index, …), with group
/// `ARGV[1]`, where entries the index does not name are person `ARGV[2]`'s: each named
/// waiting person's first entry per stream (a flat list of id and person per stream; none
/// when `ARGV[3]` is `0`), the person of every pending entry, and the hash `KEYS[#KEYS]`
/// of when people were last served.
pub(super) const LOOK_SCRIPT: &str = concat!(
    lua_last_delivered!(),
    lua_named!(),
    r"
local firsts, running = {}, {}
for i = 1, #KEYS - 1, 2 do
  local key, who = KEYS[i], KEYS[i + 1]
  local found = {}
  local _, last = last_delivered(key, ARGV[1])
  if last then
    local pending = redis.call('XPENDING', key, ARGV[1])[1]
    local seen = {}
    for _, e in ipairs(named(key, who, last)) do
      if not e[3] then
        running[#running + 1] = e[2]
        pending = pending - 1
      elseif ARGV[3] ~= '0' and not seen[e[2]] then
        seen[e[2]] = true
        found[#found + 1] = e[1]
        found[#found + 1] = e[2]
      end
    end
    for _ = 1, pending do running[#running + 1] = ARGV[2] end
  end
  firsts[(i + 1) / 2] = found
end
return {firsts, running, redis.call('HGETALL', KEYS[#KEYS])}
"
);

/// Takes entry `ARGV[3]` of stream `KEYS[1]` (index `KEYS[3]`) out of turn for consumer
/// `ARGV[2]` of group `ARGV[1]`, unless the group delivered it or it is gone (then
/// `nil`; an index entry naming an entry that is gone goes too, so no look picks it
/// again): deletes it there, adds its fields and its id (field `ARGV[4]`) to stream
/// `KEYS[2]` (index `KEYS[4]`), and reads it from there for the consumer (an
/// `XREADGROUP` reply). Nothing else waits in `KEYS[2]`, but for an entry a failed
/// script left there, which is as good to take.
pub(super) const TAKE_OUT_SCRIPT: &str = concat!(
    lua_last_delivered!(),
    lua_named!(),
    r"
local _, last = last_delivered(KEYS[1], ARGV[1])
if not last or not after(ARGV[3], last) then return false end
local found = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
if not found[1] then
  redis.call('XDEL', KEYS[3], ARGV[3])
  return false
end
local person = redis.call('XRANGE', KEYS[3], ARGV[3], ARGV[3])[1]
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('XDEL', KEYS[3], ARGV[3])
local add = {'XADD', KEYS[2], '*'}
for _, v in ipairs(found[1][2]) do add[#add + 1] = v end
add[#add + 1] = ARGV[4]
add[#add + 1] = ARGV[3]
local id = redis.call(unpack(add))
if person then redis.call('XADD', KEYS[4], id, 'p', person[2][2]) end
return redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[2], '>')
"
);

/// Where a waiting entry stands once people take turns, smaller first: its effective
/// class, how many of its person's jobs run now or wait before it, when its person was
/// last served in ms on Redis's clock (never first), then its order without turns.
pub(super) type TurnOrder = (u8, u32, Option<u64>, Order);

/// Where an entry a worker already holds stands among waiting ones: first in its class.
pub(super) fn held(order: Order) -> TurnOrder {
    (order.0, 0, None, order)
}

/// The command that adds an entry to stream `key` ([`ADD_SCRIPT`]), naming `person` in
/// its index unless it is the default one; the entry's fields and values follow as
/// arguments. Its reply is the new id.
pub(super) fn add(inner: &Inner, key: &str, person: &Person) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(ADD_SCRIPT)
        .arg(2)
        .arg(key)
        .arg(inner.who_key(key))
        .arg(if person.is_default() {
            ""
        } else {
            person.as_str()
        });
    cmd
}

/// The waiting entry a worker takes next.
#[derive(Debug, Clone)]
pub(super) struct Choice {
    pub(super) key: String,
    pub(super) id: String,
    pub(super) order: TurnOrder,
    /// Whether it was the first waiting entry of its stream when looked at.
    pub(super) heads: bool,
}

/// What one look saw of the people's work in some streams (see [`LOOK_SCRIPT`]).
#[derive(Debug, Default)]
pub(super) struct People {
    /// Per stream: each waiting person's first entry, (id, person).
    firsts: Vec<(String, Vec<(String, String)>)>,
    /// How many entries of each person are handed out and not yet acknowledged.
    running: HashMap<String, u32>,
    /// When each person was last served, in ms on Redis's clock.
    served: HashMap<String, u64>,
}

impl People {
    /// The turn of a job of `person` with `before` of theirs waiting ahead of it.
    fn turn(&self, person: &str, before: u32) -> (u32, Option<u64>) {
        let running = self.running.get(person).copied().unwrap_or(0);
        (
            running.saturating_add(before),
            self.served.get(person).copied(),
        )
    }

    /// The entry to take next of the streams looked at: among `heads` (their first waiting
    /// entries, read with their jobs) and the first entries of the other people waiting in
    /// fresh streams, skipping streams `aside` holds; `now` in ms on Redis's clock.
    pub(super) fn best(
        &self,
        inner: &Inner,
        heads: &[Taken],
        aside: impl Fn(&str) -> bool,
        aging: Aging,
        now: u64,
    ) -> Option<Choice> {
        // Each person's best entry, by its order without turns: its turn counts no job of
        // theirs waiting before it.
        let mut best: HashMap<&str, (Order, &str, &str, bool)> = HashMap::new();
        for h in heads.iter().filter(|h| !aside(&h.key)) {
            let person = h
                .job
                .as_ref()
                .map_or(Person::DEFAULT, |j| j.person.as_str());
            consider(&mut best, person, h.order(aging, now), &h.key, &h.id, true);
        }
        for (key, firsts) in &self.firsts {
            if aside(key) || !inner.is_fresh(key) {
                continue;
            }
            let Some((_, priority)) = inner.lane_of(key) else {
                continue;
            };
            let head = heads.iter().find(|h| &h.key == key).map(|h| h.id.as_str());
            for (id, person) in firsts.iter().filter(|(id, _)| Some(id.as_str()) != head) {
                let (ms, seq) = id_order(id);
                let waited = std::time::Duration::from_millis(now.saturating_sub(ms));
                // Looked at without its job: among entries queued in one millisecond it
                // goes after the heads, which were queued before it in its stream.
                let order = (
                    aging.rank(priority, waited),
                    ms,
                    Some(DateTime::<Utc>::MAX_UTC),
                    seq,
                );
                consider(&mut best, person, order, key, id, false);
            }
        }
        best.into_iter()
            .map(|(person, (order, key, id, heads))| {
                let (turn, served) = self.turn(person, 0);
                Choice {
                    key: key.to_owned(),
                    id: id.to_owned(),
                    order: (order.0, turn, served, order),
                    heads,
                }
            })
            .min_by(|a, b| a.order.cmp(&b.order))
    }

    /// The turn order of each of `waiting` (entries read with their jobs), in their order.
    pub(super) fn orders(&self, waiting: &[Taken], aging: Aging, now: u64) -> Vec<TurnOrder> {
        let orders: Vec<Order> = waiting.iter().map(|t| t.order(aging, now)).collect();
        let mut by_order: Vec<usize> = (0..waiting.len()).collect();
        by_order.sort_by(|a, b| orders[*a].cmp(&orders[*b]));
        let mut before: HashMap<&str, u32> = HashMap::new();
        let mut out = vec![(0, 0, None, (0, 0, None, 0)); waiting.len()];
        for i in by_order {
            let person = waiting[i]
                .job
                .as_ref()
                .map_or(Person::DEFAULT, |j| j.person.as_str());
            let n = before.entry(person).or_default();
            let (turn, served) = self.turn(person, *n);
            *n += 1;
            out[i] = (orders[i].0, turn, served, orders[i]);
        }
        out
    }
}

/// Keeps `order` as `person`'s best entry when it goes before the one kept.
fn consider<'a>(
    best: &mut HashMap<&'a str, (Order, &'a str, &'a str, bool)>,
    person: &'a str,
    order: Order,
    key: &'a str,
    id: &'a str,
    heads: bool,
) {
    match best.get(person) {
        Some((kept, ..)) if *kept <= order => {}
        _ => {
            best.insert(person, (order, key, id, heads));
        }
    }
}

impl Inner {
    /// The index of stream `key`: whose its entries are ([`super::FIELD_PERSON`]).
    pub(super) fn who_key(&self, key: &str) -> String {
        let rest = key.strip_prefix(&self.prefix).unwrap_or(key);
        format!("{}{WHO}{rest}", self.prefix)
    }

    /// `keys`, each followed by its index.
    pub(super) fn with_indexes(&self, keys: &[String]) -> Vec<String> {
        keys.iter()
            .flat_map(|k| [k.clone(), self.who_key(k)])
            .collect()
    }

    /// The hash of when each person was last served.
    fn served_key(&self) -> String {
        format!("{}turns:served", self.prefix)
    }

    /// Whether `key` is a stream of fresh jobs (not queued again, not taken out of turn).
    fn is_fresh(&self, key: &str) -> bool {
        self.lane_of(key)
            .is_some_and(|(lane, priority)| self.key(&lane, priority) == key)
    }

    /// Looks at the people's work in `keys` ([`LOOK_SCRIPT`]); with `firsts` off, only at
    /// who runs and who was served when.
    pub(super) async fn people(&self, keys: &[String], firsts: bool) -> RedisResult<People> {
        let mut all = self.with_indexes(keys);
        all.push(self.served_key());
        let (found, running, served): (Vec<Vec<String>>, Vec<String>, Vec<String>) =
            redis::cmd("EVAL")
                .arg(LOOK_SCRIPT)
                .arg(all.len())
                .arg(&all)
                .arg(GROUP)
                .arg(Person::DEFAULT)
                .arg(u8::from(firsts))
                .query_async(&mut self.redis.commands())
                .await?;
        let mut people = People::default();
        for (key, flat) in keys.iter().zip(found) {
            let pairs = flat
                .chunks_exact(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            people.firsts.push((key.clone(), pairs));
        }
        for person in running {
            *people.running.entry(person).or_default() += 1;
        }
        for pair in served.chunks_exact(2) {
            if let Ok(ms) = pair[1].parse() {
                people.served.insert(pair[0].clone(), ms);
            }
        }
        Ok(people)
    }

    /// Each person's waiting and pending entries in each of `keys` ([`COUNT_SCRIPT`]).
    pub(super) async fn counted(
        &self,
        keys: &[String],
    ) -> RedisResult<Vec<Vec<(String, usize, usize)>>> {
        let all = self.with_indexes(keys);
        let found: Vec<Vec<String>> = redis::cmd("EVAL")
            .arg(COUNT_SCRIPT)
            .arg(all.len())
            .arg(&all)
            .arg(GROUP)
            .arg(Person::DEFAULT)
            .query_async(&mut self.redis.commands())
            .await?;
        Ok(found
            .into_iter()
            .map(|flat| {
                flat.chunks_exact(3)
                    .map(|c| {
                        (
                            c[0].clone(),
                            c[1].parse().unwrap_or(0),
                            c[2].parse().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .collect())
    }

    /// Takes `choice`, an entry behind others in its stream, out of turn for `consumer`
    /// ([`TAKE_OUT_SCRIPT`]); nothing when a worker took it first or it is gone.
    pub(super) async fn take_out_of_turn(
        &self,
        choice: &Choice,
        consumer: &str,
    ) -> RedisResult<Vec<Taken>> {
        let Some((lane, priority)) = self.lane_of(&choice.key) else {
            return Ok(Vec::new());
        };
        let taken = self.taken_key(&lane, priority);
        let reply: Option<StreamReadReply> = redis::cmd("EVAL")
            .arg(TAKE_OUT_SCRIPT)
            .arg(4)
            .arg(&choice.key)
            .arg(&taken)
            .arg(self.who_key(&choice.key))
            .arg(self.who_key(&taken))
            .arg(GROUP)
            .arg(consumer)
            .arg(&choice.id)
            .arg(FIELD_QUEUED)
            .query_async(&mut self.redis.commands())
            .await?;
        Ok(read_reply(reply))
    }

    /// Records that `person` was served at `now` (ms on Redis's clock).
    pub(super) async fn mark_served(&self, person: &Person, now: u64) -> RedisResult<()> {
        let key = self.served_key();
        let mut pipe = redis::pipe();
        pipe.cmd("HSET")
            .arg(&key)
            .arg(person.as_str())
            .arg(now)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(SERVED_KEPT_MS)
            .ignore();
        pipe.query_async::<()>(&mut self.redis.commands()).await
    }
}
