-- Versioned state (gateway/store/state.py): JSON documents by owner, namespace and key, each
-- with a version that starts at 1 and grows by one on every write, for compare-and-swap.
-- The owner is 'team' (shared by every persona) or 'persona/<name>'.

CREATE TABLE state_documents (
    owner       TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,              -- JSON text
    metadata    TEXT,                       -- JSON text, for audit; never returned by reads
    version     INTEGER NOT NULL CHECK (version >= 1),
    size        INTEGER NOT NULL,           -- bytes of value and metadata, counted in state_usage
    written_by  TEXT NOT NULL,              -- the persona of the last write
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    expires_at  REAL,                       -- NULL: never; an expired row is invisible until purged
    PRIMARY KEY (owner, namespace, key)
);

-- The bounded purge of expired documents finds them without a scan.
CREATE INDEX state_documents_expiry ON state_documents (expires_at) WHERE expires_at IS NOT NULL;

-- Each owner's document count and bytes, kept in the writes' own transactions, so the caps
-- are checked without counting rows.
CREATE TABLE state_usage (
    owner       TEXT PRIMARY KEY,
    documents   INTEGER NOT NULL,
    bytes       INTEGER NOT NULL
);
