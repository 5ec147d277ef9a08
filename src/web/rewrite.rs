//! The optional model rewrite of a search query: the [`QueryRewriter`] seam the application
//! fills with its utility-lane model, a ready [`BackendQueryRewriter`] for that, and the
//! cleaning of whatever the model answers. [`super::query::derive_query`] falls back to
//! the rules whenever a rewrite is absent, fails, times out or answers nothing usable.

use async_trait::async_trait;

use super::clean::{clean_text, collapse};
use super::query::{MAX_QUERY_CHARS, cap_chars};
use crate::backend::{Backend, BackendRequest};
use crate::chat::{ChatMessage, SamplingParams};
use crate::domain::ModelName;

/// A rewrite the application's model could not make.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query rewrite failed: {0}")]
pub struct RewriteError(pub String);

/// Turns a prompt and its history into one standalone search query, usually with a small
/// model. Implementations need not clean or cap their answer;
/// [`super::query::derive_query`] does.
#[async_trait]
pub trait QueryRewriter: Send + Sync {
    async fn rewrite(
        &self,
        history: &[ChatMessage],
        prompt: &str,
        rules_query: Option<&str>,
    ) -> Result<String, RewriteError>;
}

/// The first usable line of a model's answer, unquoted, cleaned and capped.
pub fn sanitize_model_query(answer: &str) -> Option<String> {
    let line = answer.lines().map(clean_text).find(|l| !l.is_empty())?;
    let mut line = line.as_str();
    for prefix in [
        "Search query:",
        "Query:",
        "query:",
        "検索クエリ:",
        "検索クエリ：",
        "クエリ:",
    ] {
        line = line.strip_prefix(prefix).unwrap_or(line).trim();
    }
    let line = line.trim_matches(|c: char| matches!(c, '"' | '\'' | '「' | '」' | '“' | '”' | '`'));
    let text = cap_chars(&collapse(line), MAX_QUERY_CHARS);
    (!text.is_empty()).then_some(text)
}

/// A [`QueryRewriter`] that asks a model on a [`Backend`] (the utility lane's, usually).
#[derive(Debug, Clone)]
pub struct BackendQueryRewriter {
    pub backend: Backend,
    pub model: ModelName,
}

#[async_trait]
impl QueryRewriter for BackendQueryRewriter {
    async fn rewrite(
        &self,
        history: &[ChatMessage],
        prompt: &str,
        rules_query: Option<&str>,
    ) -> Result<String, RewriteError> {
        let request = BackendRequest {
            model: self.model.clone(),
            messages: rewrite_messages(history, prompt, rules_query),
            params: SamplingParams {
                temperature: Some(0.0),
                max_tokens: Some(64),
                ..SamplingParams::default()
            },
            tools: Vec::new(),
        };
        self.backend
            .answer_text(&request)
            .await
            .map_err(|e| RewriteError(e.to_string()))
    }
}

/// The messages that ask a model for a standalone query (history cleaned and trimmed).
pub fn rewrite_messages(
    history: &[ChatMessage],
    prompt: &str,
    rules_query: Option<&str>,
) -> Vec<ChatMessage> {
    let recent: Vec<String> = history
        .iter()
        .rev()
        .take(6)
        .rev()
        .map(|m| {
            format!(
                "{}: {}",
                m.role.as_str(),
                cap_chars(&clean_text(&m.content), 300)
            )
        })
        .collect();
    let mut user = format!(
        "Conversation so far:\n{}\n\nLatest message: {}\n",
        recent.join("\n"),
        cap_chars(&clean_text(prompt), 500)
    );
    if let Some(q) = rules_query {
        user.push_str(&format!("Keyword draft: {q}\n"));
    }
    user.push_str("Write the search query.");
    vec![
        ChatMessage::system(
            "Write one web search query for the latest message. Resolve words like \"this city\", \
             \"it\", \"there\", この市 or そこ using the conversation. Use the language of the latest \
             message, keep only content words, at most 12 words. Answer with the query only, on one line.",
        ),
        ChatMessage::user(user),
    ]
}
