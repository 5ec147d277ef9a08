//! Service layer (placeholder).
