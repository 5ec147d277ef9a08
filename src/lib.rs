//! Coordinator: one endpoint that routes LLM chat requests across a home cluster.
//!
//! Request flow: `api` (ingress) → `turn` → `routing` → `store` → compose → `queue` →
//! `worker` → `backend`, with tokens streaming back through `events`.

pub mod api;
pub mod backend;
pub mod chat;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod context;
pub mod dashboard;
pub mod dispatch;
pub mod docs;
pub mod domain;
pub mod events;
pub mod lang;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod people;
pub mod placement;
pub mod queue;
pub mod routing;
pub mod server;
pub mod service;
pub mod startup;
pub mod store;
pub mod telemetry;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod turn;
pub mod web;
pub mod worker;
