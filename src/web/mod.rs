//! The web lane: answers a question from the web with numbered sources when SearXNG
//! works, and from the local model with an honest disclaimer when it does not, so a web
//! question always gets an answer.
//!
//! Position in the request flow: a worker takes a job from the `tasks:web` lane and calls
//! [`web_stream`] instead of [`Backend::chat`](crate::backend::Backend::chat). The steps:
//!
//! 1. [`query`]: a short standalone query from the user's prompt (templates, code, logs and
//!    decorations stripped by [`clean`]; follow-ups resolved from the history by
//!    [`followup`]; optionally rewritten by a [`QueryRewriter`]).
//! 2. [`searxng`]: `GET /search?format=json`, results ranked by score.
//! 3. [`answer`]: the summary request (results fenced as untrusted data) or, on any search
//!    failure, the fallback request; both on the same backend, under the same task id.
//! 4. [`run`]: the model's chunks are forwarded as they arrive. A fallback answer starts
//!    with the disclaimer (so it is seen first and survives a broken stream); a web answer
//!    ends with the sources list, written by Coordinator, just before the final
//!    [`Chunk::Done`](crate::chat::Chunk::Done).
//!
//! Web jobs are never written to conversation memory (`crate::memory::policy`): a search
//! summary is not something the user said, and re-feeding it would loop.

pub mod clean;
pub mod config;
pub mod followup;
pub mod prompts;
pub mod query;
pub mod rewrite;
pub mod run;
pub mod searxng;

pub use config::WebConfig;
pub use prompts::{Source, disclaimer};
pub use query::{DerivedQuery, QuerySource};
pub use rewrite::{BackendQueryRewriter, QueryRewriter, RewriteError};
pub use run::{WebContext, WebOutcome, WebPlan, WebReply, plan_web_reply, web_stream};
pub use searxng::{SearchError, SearchResult, SearxngClient};
