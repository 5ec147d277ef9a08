-- People: same columns and meaning as migrations/sqlite/0003_people.sql.

ALTER TABLE tasks ADD COLUMN IF NOT EXISTS person TEXT NOT NULL DEFAULT 'default';
ALTER TABLE memory_items ADD COLUMN IF NOT EXISTS person TEXT NOT NULL DEFAULT 'default';

CREATE INDEX IF NOT EXISTS tasks_person_created ON tasks (person, created_at);
CREATE INDEX IF NOT EXISTS memory_items_person_created ON memory_items (person, created_at);
