-- Core tables: conversations, the durable queue, the outbox, runs, memory, schedules, audit.

CREATE TABLE threads (
    id            INTEGER PRIMARY KEY,
    channel       TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    thread_ref    TEXT NOT NULL DEFAULT '',   -- ThreadKey.thread_id, '' when none
    chat_type     TEXT NOT NULL DEFAULT 'dm',
    persona       TEXT,                       -- resolved binding; NULL = unrouted
    title         TEXT,
    context_from  INTEGER NOT NULL DEFAULT 0, -- messages.id where the current context starts (/new)
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    UNIQUE (channel, chat_id, thread_ref)
);

CREATE TABLE messages (
    id                  INTEGER PRIMARY KEY,
    thread_id           INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    role                TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    sender_id           TEXT,
    sender_name         TEXT,
    text                TEXT NOT NULL,
    persona             TEXT,
    run_id              INTEGER,
    platform_message_id TEXT,
    reply_to            TEXT,
    attachments         TEXT,                 -- JSON list, NULL when none
    event_id            TEXT,
    -- Conversation order: a reply sorts right after the last message it answered, even
    -- when messages that arrived during its turn have smaller ids. NULL = id.
    sort_key            REAL,
    created_at          REAL NOT NULL
);
CREATE INDEX messages_by_thread ON messages (thread_id, id);

-- Redelivery of the same platform event is a no-op: the first insert wins.
CREATE TABLE inbox_dedupe (
    channel     TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    message_id  INTEGER,
    status      TEXT NOT NULL,                -- accepted | stored | unrouted | command
    received_at REAL NOT NULL,
    PRIMARY KEY (channel, event_id)
) WITHOUT ROWID;

CREATE TABLE queue_items (
    id               INTEGER PRIMARY KEY,
    thread_id        INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL DEFAULT 'message',   -- message | schedule | system
    message_id       INTEGER REFERENCES messages(id) ON DELETE SET NULL,
    payload          TEXT,                              -- JSON for non-message kinds
    status           TEXT NOT NULL DEFAULT 'pending',   -- pending | leased | done | dead | canceled
    attempts         INTEGER NOT NULL DEFAULT 0,
    available_at     REAL NOT NULL,
    lease_expires_at REAL,
    run_id           INTEGER,
    last_error       TEXT,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL
);
CREATE INDEX queue_items_open ON queue_items (status, available_at, thread_id) WHERE status IN ('pending', 'leased');
CREATE INDEX queue_items_by_thread ON queue_items (thread_id, status);

CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    thread_id     INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    persona       TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'running',     -- running | completed | failed | canceled | interrupted
    model         TEXT,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    model_calls   INTEGER NOT NULL DEFAULT 0,
    error         TEXT,
    started_at    REAL NOT NULL,
    ended_at      REAL
);
CREATE INDEX runs_by_thread ON runs (thread_id, id);

CREATE TABLE outbox (
    id                  INTEGER PRIMARY KEY,
    thread_id           INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    run_id              INTEGER,
    message_id          INTEGER,                -- the assistant message this chunk belongs to
    channel             TEXT NOT NULL,
    chat_id             TEXT NOT NULL,
    thread_ref          TEXT NOT NULL DEFAULT '',
    seq                 INTEGER NOT NULL DEFAULT 0,
    format              TEXT NOT NULL,
    text                TEXT NOT NULL,
    plain               TEXT NOT NULL,
    reply_to            TEXT,
    status              TEXT NOT NULL DEFAULT 'pending', -- pending | sending | sent | failed | unknown
    attempts            INTEGER NOT NULL DEFAULT 0,
    available_at        REAL NOT NULL,
    platform_message_id TEXT,
    error               TEXT,
    created_at          REAL NOT NULL,
    sent_at             REAL
);
CREATE INDEX outbox_open ON outbox (channel, status, id) WHERE status IN ('pending', 'sending');

CREATE TABLE memory_items (
    id         INTEGER PRIMARY KEY,
    thread_id  INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    persona    TEXT NOT NULL,
    key        TEXT NOT NULL,
    type       TEXT NOT NULL DEFAULT 'note' CHECK (type IN ('fact', 'summary', 'note')),
    value      TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (thread_id, key)
);

CREATE TABLE schedules (
    id            TEXT PRIMARY KEY,
    persona       TEXT NOT NULL,
    thread_id     INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    label         TEXT,
    cron_expr     TEXT,
    run_at        REAL,                          -- one-shot time (epoch seconds)
    timezone      TEXT NOT NULL DEFAULT 'UTC',
    prompt        TEXT,
    prompt_file   TEXT,
    enabled       INTEGER NOT NULL DEFAULT 1,
    next_run_at   REAL,
    last_run_at   REAL,
    last_status   TEXT,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL
);
CREATE INDEX schedules_due ON schedules (enabled, next_run_at);

CREATE TABLE schedule_runs (
    id           INTEGER PRIMARY KEY,
    schedule_id  TEXT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    due_at       REAL NOT NULL,
    status       TEXT NOT NULL,                  -- queued | completed | failed | skipped
    run_id       INTEGER,
    error        TEXT,
    created_at   REAL NOT NULL,
    UNIQUE (schedule_id, due_at)
);

CREATE TABLE audit_log (
    id        INTEGER PRIMARY KEY,
    ts        REAL NOT NULL,
    run_id    INTEGER,
    thread_id INTEGER,
    persona   TEXT,
    tool      TEXT,
    decision  TEXT NOT NULL,                     -- allowed | refused | result
    status    TEXT,
    detail    TEXT
);
CREATE INDEX audit_by_ts ON audit_log (ts);
