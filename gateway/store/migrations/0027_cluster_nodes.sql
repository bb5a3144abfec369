-- Several active nodes on one PostgreSQL database (docs/scaling.md). The tables exist on SQLite
-- too, so both engines have one schema and `talon migrate --to` copies every table; a SQLite
-- store has one node and never fills them.
-- nodes: the live nodes of the cluster, each beating its heartbeat; lock_key is the advisory
-- lock its writer connection holds for as long as it runs.
CREATE TABLE nodes (
    node_id      TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    version      TEXT NOT NULL,
    lock_key     INTEGER NOT NULL,
    started_at   REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
-- The node whose worker holds a leased item (NULL on one node).
ALTER TABLE queue_items ADD COLUMN lease_node TEXT;
-- outbox_claims: the node sending a thread's rows, so a thread's rows go out in order from one
-- node at a time; held until the thread has nothing left to send, renewed by the heartbeat.
-- The node a run runs on (NULL on one node): a node's start or death ends only its own runs.
ALTER TABLE runs ADD COLUMN node_id TEXT;
CREATE TABLE outbox_claims (
    thread_id  INTEGER PRIMARY KEY,
    node_id    TEXT NOT NULL,
    expires_at REAL NOT NULL
);
