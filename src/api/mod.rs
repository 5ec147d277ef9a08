//! HTTP ingress (placeholder).

pub mod ollama;
pub mod openai;
