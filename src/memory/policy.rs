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
    /// What the request allowed (see [`requested`]); a row's `remember`.
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

/// What a request allows memory to keep: not when the client said no (`X-Coordinator-Remember:
/// false`, `/route`'s `"remember": false`), nor for Open WebUI's temporary chats, which it
/// never saves either.
pub fn requested(thread: &ThreadId, client_allows: bool) -> bool {
    let temporary =
        thread.as_str().starts_with("temporary:") || thread.as_str().starts_with("local:");
    client_allows && !temporary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ModelName;

    fn facts(lane: &Lane) -> Facts<'_> {
        Facts {
            lane,
            internal_task: false,
            web_search: false,
            retrieved_context: false,
            remember: true,
        }
    }

    #[test]
    fn only_a_plain_turn_on_a_model_lane_is_remembered() {
        let llm = Lane::llm(&ModelName::parse("m").unwrap());
        assert_eq!(may_remember(&facts(&llm)), Ok(()));
        assert!(may_recall(&facts(&llm)));
        for lane in [Lane::Web, Lane::Rag, Lane::Utility] {
            assert_eq!(may_remember(&facts(&lane)), Err(Skip::Lane), "{lane}");
            assert!(!may_recall(&facts(&lane)), "{lane}");
        }
        let cases = [
            (
                Facts {
                    internal_task: true,
                    ..facts(&llm)
                },
                Skip::Internal,
            ),
            (
                Facts {
                    web_search: true,
                    ..facts(&llm)
                },
                Skip::WebSearch,
            ),
            (
                Facts {
                    retrieved_context: true,
                    ..facts(&llm)
                },
                Skip::RetrievedContext,
            ),
        ];
        for (f, why) in cases {
            assert_eq!(may_remember(&f), Err(why));
            assert!(!may_recall(&f), "{why}");
        }
        let opted_out = Facts {
            remember: false,
            ..facts(&llm)
        };
        assert_eq!(may_remember(&opted_out), Err(Skip::OptedOut));
        assert!(
            may_recall(&opted_out),
            "opting out of memory does not stop recall"
        );
    }

    #[test]
    fn temporary_chats_and_refusals_are_not_kept() {
        let t = |s: &str| ThreadId::parse(s).unwrap();
        assert!(requested(&t("chat-1"), true));
        assert!(!requested(&t("chat-1"), false));
        assert!(!requested(&t("temporary:abc"), true));
        assert!(!requested(&t("local:abc"), true));
    }
}
