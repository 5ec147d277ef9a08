-- The conversation a turn had, for front doors whose clients continue it by reference
-- (the Responses API's previous_response_id): a JSON array of chat messages (the earlier
-- turns as the turn kept them, its prompt, and what followed it), without system messages
-- and without the answer (that is `response`). NULL for every other turn.

ALTER TABLE tasks ADD COLUMN conversation TEXT;
