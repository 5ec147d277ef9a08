-- What placement learned of each machine (issue 16), kept across restarts: its rates per
-- model and how many models it keeps resident, as JSON. One row per worker.
CREATE TABLE IF NOT EXISTS machine_learned (
    worker     TEXT PRIMARY KEY,
    learned    TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
