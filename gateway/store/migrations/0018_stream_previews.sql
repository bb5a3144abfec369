-- Streamed replies. A preview is the in-progress message a turn edits while the model writes;
-- its platform id is kept here as soon as it exists, so that after a crash the retried turn
-- (or the daemon's start) can delete it or mark it as interrupted. state: open (the turn is
-- still writing), final (the reply's first chunk replaces it), closed (deleted or marked).
CREATE TABLE stream_previews (
    id INTEGER PRIMARY KEY,
    run_id INTEGER,
    thread_id INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    topic TEXT NOT NULL DEFAULT '',
    platform_message_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    created_at REAL NOT NULL,
    closed_at REAL
);
CREATE INDEX stream_previews_open ON stream_previews (thread_id) WHERE state = 'open';

-- An outbox row with edit_of replaces that platform message (a preview) by editing it: an
-- edit is idempotent, so such a row is retried after a crash instead of being marked unknown.
ALTER TABLE outbox ADD COLUMN edit_of TEXT;
