-- The usage rollups get a shard: the node that added to the row (docs/scaling.md). A cluster's
-- nodes each add to their own row of a (scope, subject, period), instead of all of them to the
-- one row every reply updates, where their transactions conflicted; readers add the shards up.
-- A SQLite store has one node: its rows have the shard ''.
CREATE TABLE usage_rollups_sharded (
    scope     TEXT NOT NULL,               -- user | persona | channel
    subject   TEXT NOT NULL,               -- the user id, persona or channel
    period    TEXT NOT NULL,               -- 2026-12-01 (a day) or 2026-12 (a month)
    shard     TEXT NOT NULL DEFAULT '',    -- the cluster node that added to it; '' on one node
    tokens    INTEGER NOT NULL DEFAULT 0,
    cost      REAL NOT NULL DEFAULT 0,
    runs      INTEGER NOT NULL DEFAULT 0,
    unpriced  INTEGER NOT NULL DEFAULT 0,  -- runs with tokens whose model had no price
    PRIMARY KEY (scope, subject, period, shard)
);
INSERT INTO usage_rollups_sharded (scope, subject, period, tokens, cost, runs, unpriced)
    SELECT scope, subject, period, tokens, cost, runs, unpriced FROM usage_rollups;
DROP TABLE usage_rollups;
ALTER TABLE usage_rollups_sharded RENAME TO usage_rollups;
