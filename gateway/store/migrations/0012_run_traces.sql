-- Run traces (gateway/store/traces.py): what each run did, one row per event: model calls,
-- tool calls, phases, budgets, children. Content (prompts, arguments, results) is in payload
-- only when traces.content is on. Kept traces.retention_days, then swept by age.

CREATE TABLE run_events (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    root_run_id  INTEGER,                   -- the root of the run's delegation tree; NULL: the run is a root
    thread_id    INTEGER,
    persona      TEXT NOT NULL,
    seq          INTEGER NOT NULL,          -- the event's place in its run
    kind         TEXT NOT NULL,             -- model_call | tool_call | phase | budget | child
    name         TEXT,                      -- the model, the tool, the phase, the budget, the child
    at           REAL NOT NULL,             -- unix seconds when the event began
    duration_ms  REAL,
    error_class  TEXT,                      -- NULL: no error
    payload      TEXT NOT NULL DEFAULT '{}' -- JSON object
);

-- A run's events in order; a persona's recent runs, newest first.
CREATE INDEX run_events_by_run ON run_events (run_id, seq);
CREATE INDEX run_events_by_persona ON run_events (persona, run_id);
-- The retention sweep deletes by age without a scan.
CREATE INDEX run_events_by_time ON run_events (at);
