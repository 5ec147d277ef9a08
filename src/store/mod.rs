//! Task store (placeholder).
