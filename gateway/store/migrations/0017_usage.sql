-- Usage and budgets: each run keeps its prompt-cache tokens, its cost at the prices of the day
-- it ran (NULL when its model has no price), the sender and channel it answered (usage per
-- user and channel) and how many of its model calls a fallback model answered. A budget's
-- 80% notice is sent once per budget, subject and period.

ALTER TABLE runs ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost REAL;
ALTER TABLE runs ADD COLUMN currency TEXT;
ALTER TABLE runs ADD COLUMN sender_id TEXT;
ALTER TABLE runs ADD COLUMN channel TEXT;
ALTER TABLE runs ADD COLUMN fallbacks INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_by_started ON runs (started_at);
CREATE INDEX runs_by_sender ON runs (sender_id, started_at) WHERE sender_id IS NOT NULL;
CREATE INDEX runs_by_persona ON runs (persona, started_at);
CREATE INDEX runs_by_channel ON runs (channel, started_at) WHERE channel IS NOT NULL;

CREATE TABLE budget_notices (
    budget   TEXT NOT NULL,   -- per_user_day | per_persona_month | per_channel_day
    subject  TEXT NOT NULL,   -- the user id, persona or channel
    period   TEXT NOT NULL,   -- 2026-12-01 or 2026-12
    sent_at  REAL NOT NULL,
    PRIMARY KEY (budget, subject, period)
);

-- What each user, persona and channel used per day and month (in the configured timezone),
-- added to in the transaction that completes a run, so a turn's budget check is a few key
-- lookups however many runs the month holds.
CREATE TABLE usage_rollups (
    scope     TEXT NOT NULL,               -- user | persona | channel
    subject   TEXT NOT NULL,               -- the user id, persona or channel
    period    TEXT NOT NULL,               -- 2026-12-01 (a day) or 2026-12 (a month)
    tokens    INTEGER NOT NULL DEFAULT 0,
    cost      REAL NOT NULL DEFAULT 0,
    runs      INTEGER NOT NULL DEFAULT 0,
    unpriced  INTEGER NOT NULL DEFAULT 0,  -- runs with tokens whose model had no price
    PRIMARY KEY (scope, subject, period)
);
