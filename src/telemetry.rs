//! Logging set-up (placeholder).
