-- What a console thread's chat windows have shown: the last outbox row a window confirmed
-- it printed. Rows after it (a reply that arrived while no window was open) are shown when
-- the thread is opened again. Existing threads start with everything seen, so opening an
-- old thread does not replay its history.

CREATE TABLE console_seen (
    thread_id INTEGER PRIMARY KEY REFERENCES threads(id) ON DELETE CASCADE,
    outbox_id INTEGER NOT NULL
);

-- Opening a thread reads its rows after that point.
CREATE INDEX outbox_by_thread ON outbox (thread_id, id);

INSERT INTO console_seen (thread_id, outbox_id) SELECT thread_id, MAX(id) FROM outbox GROUP BY thread_id;
