-- Child agents: their runs' lineage, background jobs' narrowed labels, steering and progress,
-- and the finished nodes of compose graphs.

-- A run started as a child (foreground agent, compose node, background job turn).
CREATE TABLE child_runs (
    run_id         INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    parent_run_id  INTEGER,
    root_run_id    INTEGER,
    depth          INTEGER NOT NULL,
    kind           TEXT NOT NULL                        -- foreground | node | background
);
CREATE INDEX child_runs_by_root ON child_runs (root_run_id);

-- A background child: a background task (gateway.delegation) plus what its turns run with.
CREATE TABLE child_jobs (
    id               TEXT PRIMARY KEY REFERENCES background_tasks(id) ON DELETE CASCADE,
    parent_run_id    INTEGER,
    root_run_id      INTEGER,
    depth            INTEGER NOT NULL,
    labels           TEXT NOT NULL,                     -- JSON list: the narrowed labels
    model            TEXT,                              -- '<provider>:<model>' override
    system_prompt    TEXT,                              -- the agent_type's prompt; NULL = the profile's
    max_tool_rounds  INTEGER NOT NULL DEFAULT 0,        -- 0 = the turn's own limit only
    progress_events  INTEGER NOT NULL DEFAULT 0,
    id_prefix        TEXT,
    cancel_reason    TEXT,
    last_activity_at REAL,
    last_output      TEXT
);

-- Steering messages for a background child, taken at its next tool-call boundary.
CREATE TABLE child_steering (
    id           INTEGER PRIMARY KEY,
    job_id       TEXT NOT NULL REFERENCES child_jobs(id) ON DELETE CASCADE,
    message      TEXT NOT NULL,
    created_at   REAL NOT NULL,
    delivered_at REAL
);
CREATE INDEX child_steering_pending ON child_steering (job_id, id) WHERE delivered_at IS NULL;

-- A background child's progress events: the last few per job (a ring).
CREATE TABLE child_progress (
    id         INTEGER PRIMARY KEY,
    job_id     TEXT NOT NULL REFERENCES child_jobs(id) ON DELETE CASCADE,
    message    TEXT NOT NULL,
    phase      TEXT,
    metadata   TEXT,                                    -- JSON object or NULL
    created_at REAL NOT NULL
);
CREATE INDEX child_progress_by_job ON child_progress (job_id, id);

-- The finished nodes of a compose call, by the call's key (its batch and its graph), so a
-- turn retried after a crash reuses them instead of calling the model again.
CREATE TABLE compose_nodes (
    compose_key  TEXT NOT NULL,
    node_id      TEXT NOT NULL,
    status       TEXT NOT NULL,                         -- completed
    output       TEXT NOT NULL,
    usage        TEXT NOT NULL,                         -- JSON {input_tokens, output_tokens, model_calls}
    finished_at  REAL NOT NULL,
    PRIMARY KEY (compose_key, node_id)
);
