-- The web console's pages: the audit log filtered by tool (newest first) and the threads
-- most recently active, without scanning either table.
CREATE INDEX audit_by_tool ON audit_log (tool, id);
CREATE INDEX threads_by_updated ON threads (updated_at);
