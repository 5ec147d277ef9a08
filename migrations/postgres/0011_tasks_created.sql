-- A store after years holds a million tasks (issue 22). Listing the newest tasks of
-- everyone (`coordinator tasks list`, the dashboard's recent tasks, four times a second
-- while a page is open) read and sorted the whole table without an index on the order it
-- asks for; with this one it reads the index backwards and stops at the limit.

CREATE INDEX IF NOT EXISTS tasks_created ON tasks (created_at, task_id);
