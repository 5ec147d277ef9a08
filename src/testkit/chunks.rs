//! Helpers for tests that drive a backend client directly: collect a chunk stream, read
//! its text, and find an address where nothing listens.

use std::net::SocketAddr;

use futures::StreamExt;

use crate::backend::{BackendError, ChunkStream};
use crate::chat::{Chunk, FinishReason};

/// Every item of a chunk stream, errors included.
pub async fn collect_chunks(stream: ChunkStream) -> Vec<Result<Chunk, BackendError>> {
    stream.collect().await
}

/// The concatenated `Content` text of collected chunks.
pub fn content_text(chunks: &[Result<Chunk, BackendError>]) -> String {
    chunks
        .iter()
        .filter_map(|c| match c {
            Ok(Chunk::Content { text }) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The final `Done` chunk's finish reason and token counts (prompt, completion).
pub fn done_of(chunks: &[Result<Chunk, BackendError>]) -> Option<(FinishReason, u32, u32)> {
    chunks.iter().find_map(|c| match c {
        Ok(Chunk::Done {
            finish_reason,
            usage,
        }) => Some((*finish_reason, usage.prompt_tokens, usage.completion_tokens)),
        _ => None,
    })
}

/// A loopback address that refuses connections: a port bound for a moment, then freed.
pub fn closed_port() -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.local_addr()
}
