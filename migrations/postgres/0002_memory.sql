-- Conversation memory (src/memory/). Same columns and meaning as
-- migrations/sqlite/0002_memory.sql, with native PostgreSQL types.

-- The per-request opt-out: a task with remember = false is never written to memory, and
-- forgetting a memory sets it to false so that a backfill does not bring it back.
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS remember BOOLEAN NOT NULL DEFAULT TRUE;

CREATE TABLE IF NOT EXISTS memory_items (
    id         UUID PRIMARY KEY,
    thread_id  TEXT NOT NULL,
    task_id    UUID NOT NULL,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    text       TEXT NOT NULL,
    embedder   TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    -- `dim` little-endian f32 values.
    vector     BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (task_id, embedder, seq)
);

CREATE INDEX IF NOT EXISTS memory_items_thread_created ON memory_items (thread_id, created_at);
