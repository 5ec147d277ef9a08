-- The RAG lane's documents (src/docs/); see migrations/sqlite/0010_documents.sql. The
-- full-text terms (src/docs/terms.rs, already split and normalised) are indexed as a
-- `simple` tsvector with a GIN index.

CREATE TABLE IF NOT EXISTS doc_documents (
    collection  TEXT NOT NULL,
    path        TEXT NOT NULL,
    display     TEXT NOT NULL,
    title       TEXT NOT NULL,
    metadata    TEXT NOT NULL,
    hash        TEXT NOT NULL,
    chunks      INTEGER NOT NULL,
    ingested_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (collection, path)
);

CREATE TABLE IF NOT EXISTS doc_chunks (
    id         BIGSERIAL PRIMARY KEY,
    collection TEXT NOT NULL,
    path       TEXT NOT NULL,
    ordinal    INTEGER NOT NULL,
    heading    TEXT NOT NULL,
    text       TEXT NOT NULL,
    embedder   TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    vector     BYTEA NOT NULL,
    terms      TSVECTOR NOT NULL
);

CREATE INDEX IF NOT EXISTS doc_chunks_document ON doc_chunks (collection, path);
CREATE INDEX IF NOT EXISTS doc_chunks_terms ON doc_chunks USING GIN (terms);

CREATE TABLE IF NOT EXISTS doc_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  BIGINT NOT NULL
);
INSERT INTO doc_generation (id, n) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
