-- A file to deliver is one outbox row of its own. The bytes sent are a copy in the outbox's
-- spool (file_path, made when the row was committed), so a later change to the workspace
-- file does not change what is sent; the copy is removed once the row's delivery ended.
-- NULL file_path: a text chunk.

ALTER TABLE outbox ADD COLUMN file_path TEXT;
ALTER TABLE outbox ADD COLUMN file_name TEXT;
ALTER TABLE outbox ADD COLUMN file_size INTEGER;
ALTER TABLE outbox ADD COLUMN file_sha256 TEXT;
ALTER TABLE outbox ADD COLUMN file_mime TEXT;
