//! HTTP ingress (placeholder).
