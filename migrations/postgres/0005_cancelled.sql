-- Stop means stop: same meaning as migrations/sqlite/0005_cancelled.sql. A task whose
-- client went away, or that was cancelled with `POST /tasks/{id}/cancel`, ends
-- `cancelled`; `error` holds the reason and `response` what its worker had sent by then.
-- `tasks_status_check` is the name PostgreSQL gave the column's CHECK in 0001.

ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled'));
