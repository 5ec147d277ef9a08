-- Context windows (issue 16): what fitting a request into its model's window did. Earlier
-- messages and memory items left out, the estimated prompt tokens as sent, and the window
-- (Ollama's num_ctx) sent to the backend. NULL for tasks that went to no model and for
-- rows written before this migration.

ALTER TABLE tasks ADD COLUMN history_dropped INTEGER;
ALTER TABLE tasks ADD COLUMN memory_dropped INTEGER;
ALTER TABLE tasks ADD COLUMN estimated_prompt_tokens INTEGER;
ALTER TABLE tasks ADD COLUMN num_ctx INTEGER;
