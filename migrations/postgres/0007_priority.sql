-- Priorities: same column and meaning as migrations/sqlite/0007_priority.sql.

ALTER TABLE tasks ADD COLUMN IF NOT EXISTS priority TEXT NOT NULL DEFAULT 'interactive';
