-- Stop means stop (issue 16): a task whose client went away, or that was cancelled with
-- `POST /tasks/{id}/cancel`, ends `cancelled`; `error` holds the reason and `response`
-- what its worker had sent the client by then.
--
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt with the same
-- columns in the same order, every row copied, and its indexes made again (it has no
-- triggers, and no other table refers to it).

CREATE TABLE tasks_new (
    task_id           TEXT PRIMARY KEY NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    thread_id         TEXT NOT NULL,
    prompt            TEXT NOT NULL,
    domain            TEXT NOT NULL,
    model             TEXT NOT NULL,
    worker_id         TEXT,
    queue             TEXT NOT NULL,
    status            TEXT NOT NULL
                      CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    response          TEXT,
    error             TEXT,
    internal_task     TEXT,
    web_search        INTEGER NOT NULL DEFAULT 0,
    fallback_used     INTEGER NOT NULL DEFAULT 0,
    fallback_reason   TEXT,
    reasons           TEXT NOT NULL DEFAULT '[]',
    job               TEXT,
    attempts          INTEGER NOT NULL DEFAULT 0,
    queue_wait_ms     INTEGER,
    first_token_ms    INTEGER,
    total_ms          INTEGER,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    remember          INTEGER NOT NULL DEFAULT 1,
    person            TEXT NOT NULL DEFAULT 'default'
);

INSERT INTO tasks_new (task_id, created_at, updated_at, thread_id, prompt, domain, model,
    worker_id, queue, status, response, error, internal_task, web_search, fallback_used,
    fallback_reason, reasons, job, attempts, queue_wait_ms, first_token_ms, total_ms,
    prompt_tokens, completion_tokens, remember, person)
SELECT task_id, created_at, updated_at, thread_id, prompt, domain, model,
    worker_id, queue, status, response, error, internal_task, web_search, fallback_used,
    fallback_reason, reasons, job, attempts, queue_wait_ms, first_token_ms, total_ms,
    prompt_tokens, completion_tokens, remember, person
FROM tasks;

DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;

CREATE INDEX IF NOT EXISTS tasks_status_created ON tasks (status, created_at);
CREATE INDEX IF NOT EXISTS tasks_thread_created ON tasks (thread_id, created_at);
CREATE INDEX IF NOT EXISTS tasks_person_created ON tasks (person, created_at);
