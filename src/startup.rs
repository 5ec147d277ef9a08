//! Application start-up (placeholder).
