-- How far posting an interaction's prompt got, under the outbox's in-flight rules: NULL (not yet
-- posted), 'sending' (committed before the platform call), 'sent' (platform_message_id holds the
-- message) or 'unknown' (a crash or a timeout left it unclear whether the platform has it: it is
-- never posted again, and a tap on it tells which message to close).
ALTER TABLE interactions ADD COLUMN post_state TEXT;
UPDATE interactions SET post_state = 'sent' WHERE platform_message_id IS NOT NULL;

-- The options toggled on so far on a multi-choice prompt shown as toggle buttons (JSON list of
-- option ids), kept here so that a restart shows and submits the same selection.
ALTER TABLE interactions ADD COLUMN selection TEXT;
