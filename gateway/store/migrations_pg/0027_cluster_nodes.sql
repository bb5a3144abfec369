-- Several active nodes on one database (docs/scaling.md); the twin of the SQLite migration.
CREATE TABLE nodes (
    node_id      TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    version      TEXT NOT NULL,
    lock_key     BIGINT NOT NULL,
    started_at   DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
);
ALTER TABLE queue_items ADD COLUMN lease_node TEXT;
-- Filled from the node's connection setting (talon.node), so every statement that starts a run
-- records its node without naming it; NULL on a single node, which sets none.
ALTER TABLE runs ADD COLUMN node_id TEXT DEFAULT current_setting('talon.node', true);
CREATE TABLE outbox_claims (
    thread_id  BIGINT PRIMARY KEY,
    node_id    TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
-- New work wakes idle nodes: the payload is the thread id, delivered when the insert commits.
CREATE FUNCTION talon_queue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('talon_queue', NEW.thread_id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER queue_items_notify AFTER INSERT ON queue_items
    FOR EACH ROW EXECUTE FUNCTION talon_queue_notify();
