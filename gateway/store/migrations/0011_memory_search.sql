-- Searchable, scoped memory (gateway/store/facts.py): facts written with memory_update in a
-- thread, user or persona scope, the short "hot" block per scope that each turn's system
-- prompt carries, and one full-text index (FTS5, bm25) over the facts and the memory_access
-- items (facts, notes, summaries), kept in step with both tables by triggers. Words are
-- stemmed (porter: "thursdays" finds "Thursday").
--
-- owner says whose a row is within its scope: the thread id for 'thread', a digest of the
-- channel and sender id for 'user', '' for 'persona'. tag is the one index token that stands
-- for (persona, scope, owner) (facts.scope_tag), so a search filters its scopes inside the
-- index instead of ranking every match first. thread_id is set only for the thread scope, so
-- that those rows go with their thread.

CREATE TABLE memory_facts (
    id         INTEGER PRIMARY KEY,
    persona    TEXT NOT NULL,
    scope      TEXT NOT NULL CHECK (scope IN ('thread', 'user', 'persona')),
    owner      TEXT NOT NULL,
    tag        TEXT NOT NULL,
    thread_id  INTEGER REFERENCES threads(id) ON DELETE CASCADE,
    category   TEXT NOT NULL CHECK (category IN ('preference', 'convention', 'decision', 'learning')),
    content    TEXT NOT NULL,
    evidence   TEXT,
    supersedes INTEGER REFERENCES memory_facts(id) ON DELETE SET NULL,
    status     TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'superseded')),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX memory_facts_by_owner ON memory_facts (persona, scope, owner, status);

CREATE TABLE memory_hot (
    persona    TEXT NOT NULL,
    scope      TEXT NOT NULL CHECK (scope IN ('thread', 'user', 'persona')),
    owner      TEXT NOT NULL,
    thread_id  INTEGER REFERENCES threads(id) ON DELETE CASCADE,
    content    TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (persona, scope, owner)
) WITHOUT ROWID;

-- rowid: 2 * memory_items.id for an item, 2 * memory_facts.id + 1 for a fact.
-- tags: the scope token, 'k<kind>' and, for facts, 'c<category>'; never ranked (weight 0).
CREATE VIRTUAL TABLE memory_fts USING fts5(
    content,
    tags,
    kind UNINDEXED,
    ref UNINDEXED,
    created_at UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2',
    prefix = '2 3'
);
INSERT INTO memory_fts (memory_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');

INSERT INTO memory_fts (rowid, content, tags, kind, ref, created_at)
    SELECT 2 * id, value, 't' || thread_id || ' k' || type, type, id, created_at FROM memory_items;

CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN
    INSERT INTO memory_fts (rowid, content, tags, kind, ref, created_at)
        VALUES (2 * new.id, new.value, 't' || new.thread_id || ' k' || new.type, new.type, new.id, new.created_at);
END;

CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF value, type, thread_id ON memory_items BEGIN
    DELETE FROM memory_fts WHERE rowid = 2 * old.id;
    INSERT INTO memory_fts (rowid, content, tags, kind, ref, created_at)
        VALUES (2 * new.id, new.value, 't' || new.thread_id || ' k' || new.type, new.type, new.id, new.created_at);
END;

CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN
    DELETE FROM memory_fts WHERE rowid = 2 * old.id;
END;

CREATE TRIGGER memory_facts_fts_insert AFTER INSERT ON memory_facts WHEN new.status = 'active' BEGIN
    INSERT INTO memory_fts (rowid, content, tags, kind, ref, created_at)
        VALUES (2 * new.id + 1, new.content, new.tag || ' kfact c' || new.category, 'fact', new.id, new.created_at);
END;

CREATE TRIGGER memory_facts_fts_update AFTER UPDATE ON memory_facts BEGIN
    DELETE FROM memory_fts WHERE rowid = 2 * old.id + 1;
    INSERT INTO memory_fts (rowid, content, tags, kind, ref, created_at)
        SELECT 2 * new.id + 1, new.content, new.tag || ' kfact c' || new.category, 'fact', new.id, new.created_at
        WHERE new.status = 'active';
END;

CREATE TRIGGER memory_facts_fts_delete AFTER DELETE ON memory_facts BEGIN
    DELETE FROM memory_fts WHERE rowid = 2 * old.id + 1;
END;
