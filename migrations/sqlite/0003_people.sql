-- People (issue 17): every task and memory item belongs to a person of the household,
-- and is read back, recalled, listed and forgotten only by them (or an admin). Rows from
-- before there were people belong to the default person, the one person of a
-- Coordinator without API keys.

ALTER TABLE tasks ADD COLUMN person TEXT NOT NULL DEFAULT 'default';
ALTER TABLE memory_items ADD COLUMN person TEXT NOT NULL DEFAULT 'default';

CREATE INDEX IF NOT EXISTS tasks_person_created ON tasks (person, created_at);
CREATE INDEX IF NOT EXISTS memory_items_person_created ON memory_items (person, created_at);
