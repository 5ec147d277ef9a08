//! Queues (placeholder).
