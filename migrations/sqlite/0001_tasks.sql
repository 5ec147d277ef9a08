-- One row per task. `prompt` is always the user's original text: never history,
-- memory context or anything else the worker was given.
CREATE TABLE IF NOT EXISTS tasks (
    task_id           TEXT PRIMARY KEY NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
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
    web_search        INTEGER NOT NULL DEFAULT 0,
    fallback_used     INTEGER NOT NULL DEFAULT 0,
    fallback_reason   TEXT,
    reasons           TEXT NOT NULL DEFAULT '[]',
    -- The queued job (what the worker receives), kept only while the task is unfinished
    -- so that a restart can queue it again.
    job               TEXT,
    attempts          INTEGER NOT NULL DEFAULT 0,
    queue_wait_ms     INTEGER,
    first_token_ms    INTEGER,
    total_ms          INTEGER,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER
);

CREATE INDEX IF NOT EXISTS tasks_status_created ON tasks (status, created_at);
CREATE INDEX IF NOT EXISTS tasks_thread_created ON tasks (thread_id, created_at);
