//! The web lane's entry point for workers: [`web_stream`] derives the query, searches,
//! asks the backend for a summary (or a fallback answer) and returns the chunks to
//! forward, already decorated with the disclaimer or the sources list.
//!
//! The worker uses it in place of `backend.chat(&job.request)`; the returned
//! [`ChunkStream`] has the same contract (chunks, then one final `Chunk::Done`), and the
//! [`WebOutcome`] is known before the first chunk, so `fallback_used`/`fallback_reason`
//! can be recorded with the task. Search failures never surface as errors: they become
//! the fallback. Only backend errors are returned, as [`BackendError`], for the worker's
//! usual handling; the fallback itself never re-routes and keeps the task id.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;

use super::clean::clean_text;
use super::config::WebConfig;
use super::prompts::{self, Source};
use super::query::{QuerySource, derive_query};
use super::rewrite::QueryRewriter;
use super::searxng::{SearchError, SearxngClient};
use crate::backend::{Backend, BackendError, BackendRequest, ChunkStream};
use crate::chat::Chunk;
use crate::lang::{Lang, detect_language};

/// What the web lane needs, built once per worker.
#[derive(Clone)]
pub struct WebContext {
    pub config: WebConfig,
    pub searxng: SearxngClient,
    /// The application's model rewrite of follow-ups; rules alone when `None`.
    pub rewriter: Option<Arc<dyn QueryRewriter>>,
}

impl WebContext {
    pub fn new(config: WebConfig) -> Result<Self, SearchError> {
        let searxng = SearxngClient::new(&config)?;
        Ok(Self {
            config,
            searxng,
            rewriter: None,
        })
    }

    pub fn with_rewriter(mut self, rewriter: Arc<dyn QueryRewriter>) -> Self {
        self.rewriter = Some(rewriter);
        self
    }
}

/// How a web job was answered; recorded with the task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WebOutcome {
    /// True when the answer came from the local model alone (with the disclaimer).
    pub fallback_used: bool,
    /// Why: `searxng: 0 results for query "柏市 特産物"`, `searxng: HTTP 403: ...`, ...
    pub fallback_reason: Option<String>,
    /// The query sent to SearXNG, if one was derived.
    pub query: Option<String>,
    pub query_source: Option<QuerySource>,
    /// The language of the user's prompt, which the disclaimer and sources heading use.
    pub language: Lang,
    /// The numbered sources appended to the answer; empty on fallback.
    pub sources: Vec<Source>,
}

/// Everything decided before the backend is called.
#[derive(Debug, Clone, PartialEq)]
pub struct WebPlan {
    pub outcome: WebOutcome,
    /// The summary or fallback request for the backend.
    pub request: BackendRequest,
    /// Content sent before the model's first chunk (the disclaimer, on fallback).
    pub prefix: Option<String>,
    /// Content sent just before the final `Done` (the sources list, on success).
    pub suffix: Option<String>,
}

/// The decorated answer stream and how the job was answered.
pub struct WebReply {
    pub outcome: WebOutcome,
    pub chunks: ChunkStream,
}

/// Query, search and the request to send. `request.messages` holds the history and the
/// user's original prompt as the last user message. Never fails: every search problem
/// becomes a fallback plan with its reason.
pub async fn plan_web_reply(ctx: &WebContext, request: &BackendRequest) -> WebPlan {
    let (prompt, history) = request.prompt_and_history();
    let cleaned = clean_text(prompt);
    let lang = detect_language(if cleaned.is_empty() { prompt } else { &cleaned });
    let mut outcome = WebOutcome {
        fallback_used: false,
        fallback_reason: None,
        query: None,
        query_source: None,
        language: lang,
        sources: Vec::new(),
    };
    let searched = if ctx.config.enabled {
        let timeout = Duration::from_millis(ctx.config.rewrite_timeout_ms);
        match derive_query(&history, prompt, ctx.rewriter.as_deref(), timeout).await {
            Some(q) => {
                outcome.query = Some(q.text.clone());
                outcome.query_source = Some(q.source);
                ctx.searxng
                    .search(&q.text)
                    .await
                    .map_err(|e| (e.public_reason(), e.to_string()))
            }
            None => Err(both("no search query could be derived from the prompt")),
        }
    } else {
        Err(both("web search is disabled ([web] enabled = false)"))
    };
    match searched {
        Ok(results) => {
            let model = ctx
                .config
                .model_name()
                .unwrap_or_else(|| request.model.clone());
            let query = outcome.query.clone().unwrap_or_default();
            tracing::info!(query = %query, results = results.len(), model = %model, "web search answered; summarising");
            outcome.sources = prompts::sources(&results);
            WebPlan {
                request: prompts::summary_request(request, model, &query, &results, lang),
                prefix: None,
                suffix: Some(prompts::sources_block(lang, &outcome.sources)),
                outcome,
            }
        }
        // The row (which clients read) gets the reason; the log the whole story.
        Err((reason, detail)) => {
            tracing::warn!(query = ?outcome.query, reason = %detail, "web search unavailable; answering from the local model");
            outcome.fallback_used = true;
            outcome.fallback_reason = Some(reason);
            WebPlan {
                request: prompts::fallback_request(request, lang),
                prefix: Some(format!("{}\n\n", prompts::disclaimer(lang))),
                suffix: None,
                outcome,
            }
        }
    }
}

/// A fallback reason that is the same for the task's row and the log.
fn both(reason: &str) -> (String, String) {
    (reason.to_owned(), reason.to_owned())
}

/// Runs a web job up to the backend's first chunk and returns the rest as a stream.
///
/// Errors before the first chunk (connect, HTTP, a first-chunk stall) are returned, so the
/// worker can treat them like any backend failure before the first token; later ones come
/// in the stream. Nothing is emitted before the backend has answered, so a failed backend
/// never leaves a lone disclaimer behind. It runs within the worker's task span
/// ([`task_span`](crate::worker::task_span)), so its log lines name no task themselves.
pub async fn web_stream(
    ctx: &WebContext,
    backend: &Backend,
    request: &BackendRequest,
) -> Result<WebReply, BackendError> {
    let plan = plan_web_reply(ctx, request).await;
    let (first, chunks) = backend.chat_first(&plan.request).await?;
    Ok(WebReply {
        outcome: plan.outcome,
        chunks: decorate(first, chunks, plan.prefix, plan.suffix),
    })
}

/// `prefix`, then `first` and the rest as they come, with `suffix` inserted just before
/// the final `Done`. An error ends the stream (and no suffix follows it).
pub fn decorate(
    first: Chunk,
    rest: ChunkStream,
    prefix: Option<String>,
    suffix: Option<String>,
) -> ChunkStream {
    let stream = async_stream::stream! {
        if let Some(text) = prefix {
            yield Ok(Chunk::Content { text });
        }
        let mut suffix = suffix;
        let mut all = futures::stream::iter([Ok(first)]).chain(rest);
        while let Some(item) = all.next().await {
            match item {
                Ok(done @ Chunk::Done { .. }) => {
                    if let Some(text) = suffix.take() {
                        yield Ok(Chunk::Content { text });
                    }
                    yield Ok(done);
                    break;
                }
                Ok(chunk) => yield Ok(chunk),
                Err(e) => {
                    yield Err(e);
                    break;
                }
            }
        }
    };
    Box::pin(stream)
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "run_e2e_tests.rs"]
mod e2e_tests;
