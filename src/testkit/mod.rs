//! Test and benchmark helpers shipped in the library: fake servers that speak real wire
//! protocols, started on port 0, and helpers for reading backend streams.

pub mod chunks;
pub mod fake_llm;
pub mod fake_searxng;
pub mod redis_server;
pub mod samples;
