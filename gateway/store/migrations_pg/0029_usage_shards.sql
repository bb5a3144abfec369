-- The usage rollups get a shard: the cluster node that added to the row, from the node's
-- connection setting (talon.node, as runs.node_id), '' on a single node. Every reply adds to the
-- rows of its persona, user and channel for the day and the month; with one row per key, every
-- node's reply commits updated the same rows and conflicted. Readers add the shards up.
ALTER TABLE usage_rollups ADD COLUMN shard TEXT NOT NULL DEFAULT COALESCE(current_setting('talon.node', true), '');
ALTER TABLE usage_rollups DROP CONSTRAINT usage_rollups_pkey;
ALTER TABLE usage_rollups ADD PRIMARY KEY (scope, subject, period, shard);
