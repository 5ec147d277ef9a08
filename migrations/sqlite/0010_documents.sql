-- The RAG lane's documents (src/docs/). A document is one ingested file of a collection;
-- its chunks carry the heading path, the text, the vector, and their full-text terms
-- (src/docs/terms.rs) in an FTS5 table whose rowid is the chunk's id.

CREATE TABLE IF NOT EXISTS doc_documents (
    collection  TEXT NOT NULL,
    -- The key: the file's canonical path, or `upload:<name>` for an HTTP upload.
    path        TEXT NOT NULL,
    -- What citations show: the path under the ingested directory, or the upload's name.
    display     TEXT NOT NULL,
    title       TEXT NOT NULL,
    -- The front matter, a JSON object of strings.
    metadata    TEXT NOT NULL,
    -- sha256 of the content and the chunking settings: unchanged files are skipped.
    hash        TEXT NOT NULL,
    chunks      INTEGER NOT NULL,
    ingested_at TEXT NOT NULL,
    PRIMARY KEY (collection, path)
);

CREATE TABLE IF NOT EXISTS doc_chunks (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    collection TEXT NOT NULL,
    path       TEXT NOT NULL,
    ordinal    INTEGER NOT NULL,
    -- The heading path, "Backup › NAS › Schedule".
    heading    TEXT NOT NULL,
    text       TEXT NOT NULL,
    embedder   TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    -- `dim` little-endian f32 values.
    vector     BLOB NOT NULL
);

CREATE INDEX IF NOT EXISTS doc_chunks_document ON doc_chunks (collection, path);

CREATE VIRTUAL TABLE IF NOT EXISTS doc_chunks_fts USING fts5(terms, collection UNINDEXED);

-- Bumped by every change to the documents, so that each process knows when to reload
-- its in-memory vectors.
CREATE TABLE IF NOT EXISTS doc_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT OR IGNORE INTO doc_generation (id, n) VALUES (1, 0);
