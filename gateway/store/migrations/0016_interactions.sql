-- Questions and approvals waiting for a human (gateway/interactions), the approvals a thread
-- keeps ("always in this thread"), and the transcript of a run suspended on one of them.

CREATE TABLE interactions (
    id                  TEXT PRIMARY KEY,               -- short random id the buttons carry
    thread_id           INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    run_id              INTEGER,
    call_id             TEXT,                           -- the tool call that asked: a resumed run finds it again
    kind                TEXT NOT NULL,                  -- question | approval
    spec                TEXT NOT NULL,                  -- JSON: what was asked and its options
    answerers           TEXT,                           -- JSON list of user ids; NULL = anyone in the chat
    expires_at          REAL NOT NULL,
    state               TEXT NOT NULL DEFAULT 'pending', -- pending | answered | expired
    answer              TEXT,                           -- JSON
    answered_by         TEXT,
    platform_message_id TEXT,
    created_at          REAL NOT NULL,
    answered_at         REAL
);
CREATE UNIQUE INDEX interactions_by_call ON interactions (run_id, call_id);
CREATE INDEX interactions_pending ON interactions (state, thread_id);

CREATE TABLE approval_rules (
    thread_id   INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    tool        TEXT NOT NULL,
    arguments   TEXT NOT NULL,                          -- canonical JSON of the exact arguments
    approved_by TEXT,
    created_at  REAL NOT NULL,
    PRIMARY KEY (thread_id, tool, arguments)
);

CREATE TABLE run_checkpoints (
    run_id     INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    thread_id  INTEGER NOT NULL,
    state      TEXT NOT NULL,                           -- JSON: transcript, the calls still to run, usage so far
    created_at REAL NOT NULL
);
CREATE INDEX run_checkpoints_by_thread ON run_checkpoints (thread_id);
