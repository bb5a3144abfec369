-- The web chat channel's messages, as its pages show them. A page keeps up through an event
-- stream: every change of a message (posted, edited, deleted) gives the message the next seq
-- of its chat, so a page that resumes after the last seq it saw gets the current state of
-- each message changed since, and nothing twice. delivery_id makes a repeated outbox delivery
-- the same message; event_id makes a repeated browser post the same message.
CREATE TABLE web_messages (
    id INTEGER PRIMARY KEY,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    format TEXT NOT NULL,
    body TEXT NOT NULL,
    file_path TEXT,
    file_name TEXT,
    file_size INTEGER,
    delivery_id INTEGER,
    event_id TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE UNIQUE INDEX web_messages_seq ON web_messages (channel, chat_id, seq);
CREATE UNIQUE INDEX web_messages_delivery ON web_messages (channel, delivery_id) WHERE delivery_id IS NOT NULL;
CREATE UNIQUE INDEX web_messages_event ON web_messages (channel, chat_id, event_id) WHERE event_id IS NOT NULL;
