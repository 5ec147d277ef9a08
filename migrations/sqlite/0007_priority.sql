-- Priorities (issue 16): who waits for a task. 'interactive' (a person waits),
-- 'background' (an Open WebUI task sent to a model), 'batch' (bulk work). Rows from before
-- were all interactive.

ALTER TABLE tasks ADD COLUMN priority TEXT NOT NULL DEFAULT 'interactive';
