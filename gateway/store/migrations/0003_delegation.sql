-- Persona-to-persona tasks (A2A) and background agent tasks.

CREATE TABLE a2a_tasks (
    id                TEXT PRIMARY KEY,
    caller_persona    TEXT NOT NULL,
    caller_thread_id  INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    target_persona    TEXT NOT NULL,
    target_thread_id  INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    message           TEXT NOT NULL,
    state             TEXT NOT NULL DEFAULT 'submitted', -- submitted | working | completed | failed | canceled
    result            TEXT,
    error             TEXT,
    chain             TEXT NOT NULL,                     -- JSON list of personas from the first caller
    deliver           INTEGER NOT NULL DEFAULT 1,        -- post the result back into the caller's thread
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL
);
CREATE INDEX a2a_by_target ON a2a_tasks (target_persona, state);
CREATE UNIQUE INDEX a2a_by_thread ON a2a_tasks (target_thread_id);

CREATE TABLE background_tasks (
    id                 TEXT PRIMARY KEY,
    persona            TEXT NOT NULL,                    -- who spawned it
    profile            TEXT NOT NULL,                    -- whose prompt, model and tools it runs with
    origin_thread_id   INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    thread_id          INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    prompt             TEXT NOT NULL,
    provider           TEXT,
    working_directory  TEXT,
    timeout_seconds    REAL NOT NULL,
    state              TEXT NOT NULL DEFAULT 'queued',   -- queued | running | completed | failed | canceled
    result             TEXT,
    error              TEXT,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL
);
CREATE UNIQUE INDEX background_by_thread ON background_tasks (thread_id);
CREATE INDEX background_by_origin ON background_tasks (origin_thread_id);
