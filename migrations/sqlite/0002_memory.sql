-- Conversation memory (src/memory/). Vectors live here, the source of truth; each
-- process keeps an in-memory index loaded from this table.

-- The per-request opt-out: a task with remember = 0 is never written to memory, and
-- forgetting a memory sets it to 0 so that a backfill does not bring it back.
ALTER TABLE tasks ADD COLUMN remember INTEGER NOT NULL DEFAULT 1;

CREATE TABLE IF NOT EXISTS memory_items (
    id         TEXT PRIMARY KEY NOT NULL,
    thread_id  TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    -- The position of the item among those condensed from one task.
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    text       TEXT NOT NULL,
    -- Which embedder made the vector; only vectors of one embedder are compared.
    embedder   TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    -- `dim` little-endian f32 values.
    vector     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (task_id, embedder, seq)
);

CREATE INDEX IF NOT EXISTS memory_items_thread_created ON memory_items (thread_id, created_at);
