-- The conversation a turn had: same column and meaning as migrations/sqlite/0009_conversation.sql.

ALTER TABLE tasks ADD COLUMN IF NOT EXISTS conversation TEXT;
