-- Procedures and shared findings.
--
-- procedures (gateway/store/procedures.py): what procedure_write saved for a persona, a draft
-- until an operator approves it with `talon skills approve`; an approved procedure is one of
-- the persona's skills. The SKILL.md files live in <data_dir>/skills/ (gateway/skills.py);
-- this table is what search reads and what decides whether a procedure is approved. Every
-- procedure is in memory_fts (migration 0011) under rowid -id, so memory_search finds it;
-- tags: its persona's procedure token (procedure_tag) and 'kprocedure'.
--
-- workspace_findings (gateway/store/findings.py): entries published within one delegation
-- tree, keyed by the tree's root run; workspace_subscriptions: a child run's standing
-- query, with the newest entry id it has been shown.

CREATE TABLE procedures (
    id          INTEGER PRIMARY KEY,
    persona     TEXT NOT NULL,
    name        TEXT NOT NULL,
    tag         TEXT NOT NULL,
    description TEXT NOT NULL,
    content     TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('draft', 'approved')),
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    approved_at REAL,
    UNIQUE (persona, name)
);

CREATE TRIGGER procedures_fts_insert AFTER INSERT ON procedures BEGIN
    INSERT INTO memory_fts (rowid, content, tags, kind, ref, created_at)
        VALUES (-new.id, new.name || ' ' || new.description || ' ' || new.content,
                new.tag || ' kprocedure', 'procedure', new.id, new.created_at);
END;

CREATE TRIGGER procedures_fts_update AFTER UPDATE OF name, description, content, tag ON procedures BEGIN
    DELETE FROM memory_fts WHERE rowid = -old.id;
    INSERT INTO memory_fts (rowid, content, tags, kind, ref, created_at)
        VALUES (-new.id, new.name || ' ' || new.description || ' ' || new.content,
                new.tag || ' kprocedure', 'procedure', new.id, new.created_at);
END;

CREATE TRIGGER procedures_fts_delete AFTER DELETE ON procedures BEGIN
    DELETE FROM memory_fts WHERE rowid = -old.id;
END;

CREATE TABLE workspace_findings (
    id            INTEGER PRIMARY KEY,
    root_run_id   INTEGER NOT NULL,
    run_id        INTEGER,                 -- the run that published it
    persona       TEXT NOT NULL,
    type          TEXT NOT NULL CHECK (type IN ('finding', 'evidence', 'hypothesis', 'decision', 'artifact', 'status')),
    subject       TEXT NOT NULL,
    content       TEXT NOT NULL,
    evidence      TEXT NOT NULL,           -- JSON array of strings
    confidence    REAL NOT NULL,
    relates_to    TEXT NOT NULL,           -- JSON array of entry ids
    relation_type TEXT,
    created_at    REAL NOT NULL
);
CREATE INDEX workspace_findings_by_root ON workspace_findings (root_run_id, id);
CREATE INDEX workspace_findings_by_age ON workspace_findings (created_at);

CREATE TABLE workspace_subscriptions (
    id          INTEGER PRIMARY KEY,
    root_run_id INTEGER NOT NULL,
    run_id      INTEGER NOT NULL,          -- the child run it delivers to
    subject     TEXT,                      -- lower-cased substring of subjects; NULL: any
    type        TEXT,                      -- NULL: any
    seen_id     INTEGER NOT NULL,          -- the newest entry id already shown
    created_at  REAL NOT NULL
);
CREATE INDEX workspace_subscriptions_by_run ON workspace_subscriptions (run_id);
CREATE INDEX workspace_subscriptions_by_age ON workspace_subscriptions (created_at);
