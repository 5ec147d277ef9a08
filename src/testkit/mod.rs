//! Test and benchmark helpers: fake servers that speak real wire protocols, started on
//! port 0, a Redis server for tests, sample data, Open WebUI's request shapes, helpers for
//! reading backend streams, the household benchmark and the big store's seed.
//!
//! Not part of the shipped library: compiled for this crate's unit tests and, behind the
//! `testkit` feature, for the integration tests and benches (a dev-dependency turns it on)
//! and the `fake-llm` and `bench-household` binaries
//! (`cargo run --release --features testkit --bin fake-llm`).

pub mod bigstore;
pub mod chunks;
pub mod fake_llm;
pub mod fake_searxng;
pub mod household;
pub mod log_capture;
pub mod owui;
pub mod redis_server;
pub mod samples;
