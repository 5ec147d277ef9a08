//! Which turns read and write conversation memory: the one place that decides it.
//!
//! Routing shows it in its decision, the service reads memory and notes what the worker may
//! remember by it, the producer checks it again for every finished task (live or read back
//! by a backfill), and the front doors record what the request asked for. The seed's
//! rules: Open WebUI's background tasks, web-search and RAG turns are never memory, and
//! neither is what the user asked not to keep.

use super::producer::Skip;
use crate::domain::{Lane, ThreadId};

/// What decides whether a turn reads or becomes memory: known when it is routed, and
/// recorded in its task row.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub lane: &'a Lane,
    /// An Open WebUI background task (title, tags, follow-ups, …).
    pub internal_task: bool,
    pub web_search: bool,
    /// The turn carries documents Open WebUI retrieved (its RAG template). Not recorded
    /// apart: a row's `remember` is false for such a turn.
    pub retrieved_context: bool,
    /// What the request allowed (see [`thread_allows_memory`]); a row's `remember`.
    pub remember: bool,
}

/// Whether the turn may recall memories: a model's own lane, not an internal task, not
/// searched on the web, not already carrying retrieved documents. (A user who asked not
/// to be remembered still recalls what was kept before.)
pub fn may_recall(f: &Facts<'_>) -> bool {
    !f.internal_task && f.lane.is_llm() && !f.web_search && !f.retrieved_context
}

/// Whether the turn may become memory once it is answered.
pub fn may_remember(f: &Facts<'_>) -> Result<(), Skip> {
    if f.internal_task {
        return Err(Skip::Internal);
    }
    if !f.lane.is_llm() {
        return Err(Skip::Lane);
    }
    if f.web_search {
        return Err(Skip::WebSearch);
    }
    if f.retrieved_context {
        return Err(Skip::RetrievedContext);
    }
    if !f.remember {
        return Err(Skip::OptedOut);
    }
    Ok(())
}

/// Whether a turn in `thread` may be remembered at all: not in Open WebUI's temporary
/// chats (`temporary:…`, the older `local:…`), which it never saves either. The front doors
/// ask it for every turn they build, beside what the client asked
/// (`X-Coordinator-Remember: false`, `/route`'s `"remember": false`).
pub fn thread_allows_memory(thread: &ThreadId) -> bool {
    let thread = thread.as_str();
    !(thread.starts_with("temporary:") || thread.starts_with("local:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_and_local_chats_are_not_remembered() {
        let allows = |t: &str| thread_allows_memory(&ThreadId::parse(t).unwrap());
        assert!(!allows("temporary:abc"));
        assert!(!allows("local:abc"));
        assert!(allows("chat-1"));
        assert!(allows("h-0123"));
    }
}
