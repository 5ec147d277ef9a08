//! The whole answer to a turn, gathered from a backend's [`Chunk`]s.
//!
//! Front doors use it for non-streamed responses (OpenAI `chat.completion`, Ollama's
//! single object) and the store can record it; streamed responses encode the chunks as
//! they come instead.

use crate::chat::{Chunk, FinishReason, ToolCall, Usage};

/// Text, reasoning, tool calls and the final accounting of one generation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    /// Set by the [`Chunk::Done`] chunk; `None` while the generation is still running.
    pub finish_reason: Option<FinishReason>,
    pub usage: Usage,
}

impl Answer {
    /// Adds one chunk.
    pub fn push(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::Content { text } => self.content.push_str(text),
            Chunk::Reasoning { text } => self.reasoning.push_str(text),
            Chunk::ToolCalls { calls } => self.tool_calls.extend(calls.iter().cloned()),
            Chunk::Done {
                finish_reason,
                usage,
            } => {
                self.finish_reason = Some(*finish_reason);
                self.usage = usage.clone();
            }
        }
    }

    /// Gathers a whole sequence of chunks.
    pub fn from_chunks<'a>(chunks: impl IntoIterator<Item = &'a Chunk>) -> Self {
        let mut answer = Self::default();
        for c in chunks {
            answer.push(c);
        }
        answer
    }

    /// The finish reason, `stop` when the generation never said.
    pub fn finish_reason_or_stop(&self) -> FinishReason {
        self.finish_reason.unwrap_or(FinishReason::Stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_accumulate() {
        let chunks = [
            Chunk::Reasoning { text: "hm".into() },
            Chunk::Content { text: "a".into() },
            Chunk::Content { text: "b".into() },
            Chunk::ToolCalls {
                calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                }],
            },
            Chunk::Done {
                finish_reason: FinishReason::ToolCalls,
                usage: Usage {
                    prompt_tokens: 3,
                    completion_tokens: 4,
                    backend_total_ms: None,
                    backend_timings: None,
                },
            },
        ];
        let a = Answer::from_chunks(&chunks);
        assert_eq!(a.content, "ab");
        assert_eq!(a.reasoning, "hm");
        assert_eq!(a.tool_calls.len(), 1);
        assert_eq!(a.finish_reason_or_stop(), FinishReason::ToolCalls);
        assert_eq!(a.usage.completion_tokens, 4);
        assert_eq!(
            Answer::default().finish_reason_or_stop(),
            FinishReason::Stop
        );
    }
}
