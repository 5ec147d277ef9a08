-- Facts (issue 18): memory items of kind 'fact' hold one statement the person made; a fact
-- about a single-valued subject ("home", "router", "猫の名前") carries it, and the newest
-- fact of a person on a subject supersedes the older ones in recall (derived, not stored).

ALTER TABLE memory_items ADD COLUMN subject TEXT;
