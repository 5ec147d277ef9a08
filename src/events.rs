//! Task events (placeholder).
