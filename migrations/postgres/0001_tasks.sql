-- One row per task. `prompt` is always the user's original text: never history,
-- memory context or anything else the worker was given. Same columns and meaning as
-- migrations/sqlite/0001_tasks.sql, with native PostgreSQL types.
CREATE TABLE IF NOT EXISTS tasks (
    task_id           UUID PRIMARY KEY,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    thread_id         TEXT NOT NULL,
    prompt            TEXT NOT NULL,
    domain            TEXT NOT NULL,
    model             TEXT NOT NULL,
    worker_id         TEXT,
    queue             TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
    response          TEXT,
    error             TEXT,
    internal_task     TEXT,
    web_search        BOOLEAN NOT NULL DEFAULT FALSE,
    fallback_used     BOOLEAN NOT NULL DEFAULT FALSE,
    fallback_reason   TEXT,
    reasons           JSONB NOT NULL DEFAULT '[]'::jsonb,
    -- The queued job (what the worker receives), kept only while the task is unfinished
    -- so that a restart can queue it again.
    job               TEXT,
    attempts          BIGINT NOT NULL DEFAULT 0,
    queue_wait_ms     BIGINT,
    first_token_ms    BIGINT,
    total_ms          BIGINT,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT
);

CREATE INDEX IF NOT EXISTS tasks_status_created ON tasks (status, created_at);
CREATE INDEX IF NOT EXISTS tasks_thread_created ON tasks (thread_id, created_at);
