-- Facts: same column and meaning as migrations/sqlite/0004_memory_facts.sql.

ALTER TABLE memory_items ADD COLUMN IF NOT EXISTS subject TEXT;
