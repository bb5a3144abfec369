-- Full schedules (create_schedule and its siblings, gateway/store/schedules.py): a task slug per
-- persona, an expiry, a shell executor with a working directory, notifications and retries;
-- schedule_runs keeps one row per attempt of an occurrence instead of one per occurrence.

ALTER TABLE schedules ADD COLUMN task_id TEXT;
ALTER TABLE schedules ADD COLUMN expires_at REAL;              -- disabled once this has passed
ALTER TABLE schedules ADD COLUMN executor TEXT NOT NULL DEFAULT 'agent'
    CHECK (executor IN ('agent', 'shell'));
ALTER TABLE schedules ADD COLUMN notify_on TEXT NOT NULL DEFAULT 'failure'
    CHECK (notify_on IN ('failure', 'always', 'never'));
ALTER TABLE schedules ADD COLUMN notify_chat TEXT;             -- 'channel' or 'channel:chat'; NULL: its thread
ALTER TABLE schedules ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 1
    CHECK (max_attempts BETWEEN 1 AND 5);
ALTER TABLE schedules ADD COLUMN retry_delay_ms INTEGER NOT NULL DEFAULT 30000
    CHECK (retry_delay_ms BETWEEN 1000 AND 300000);
ALTER TABLE schedules ADD COLUMN cwd TEXT;                     -- a shell task's directory, as the sandbox sees it

-- Schedules made before (by schedule_manage) are known by their id.
UPDATE schedules SET task_id = id WHERE task_id IS NULL;
CREATE UNIQUE INDEX schedules_task ON schedules (persona, task_id);

CREATE TABLE schedule_runs_attempts (
    id           INTEGER PRIMARY KEY,
    schedule_id  TEXT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    due_at       REAL NOT NULL,
    attempt      INTEGER NOT NULL DEFAULT 1,
    status       TEXT NOT NULL,                  -- queued | running | completed | failed | retrying | skipped | canceled
    run_id       INTEGER,
    error        TEXT,
    exit_code    INTEGER,                        -- a shell task's exit status
    duration_ms  INTEGER,
    output_tail  TEXT,                           -- the end of the reply or of the command's output
    started_at   REAL,
    finished_at  REAL,
    created_at   REAL NOT NULL,
    UNIQUE (schedule_id, due_at, attempt)
);
INSERT INTO schedule_runs_attempts (id, schedule_id, due_at, attempt, status, run_id, error, created_at)
    SELECT id, schedule_id, due_at, 1, status, run_id, error, created_at FROM schedule_runs;
DROP TABLE schedule_runs;
ALTER TABLE schedule_runs_attempts RENAME TO schedule_runs;
CREATE INDEX schedule_runs_by_status ON schedule_runs (status) WHERE status IN ('queued', 'running');
