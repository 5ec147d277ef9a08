//! Workers (placeholder).
