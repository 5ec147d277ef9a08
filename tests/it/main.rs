//! Integration tests: the whole application on port 0 with a fresh SQLite file and the
//! in-repo fake LLM server, driven over HTTP as a client would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anthropic;
mod browsers;
mod cluster;
mod cluster_clock;
mod cluster_metrics;
mod cluster_placement;
mod cluster_stop;
mod cluster_text;
mod completions;
mod connections;
mod context;
mod dashboard;
mod dashboard_browser;
mod embeddings;
mod error_shapes;
mod foundation;
mod front_door;
mod helpers;
mod household;
mod keep_alive;
mod late;
mod leaks;
mod limits;
mod memory;
mod memory_facts;
mod ollama_api;
mod open_port;
mod openwebui_ollama;
mod people;
mod placement;
mod priorities;
mod rag;
mod responses;
mod responses_previous;
mod routing;
mod status_watch;
mod waiting;
mod web;
