-- OpenTelemetry parents (gateway/store/span_contexts.py): the W3C traceparent of the span that
-- work continues later, so a turn joins its messages' trace, a send its run's, and a background
-- child its parent's, across restarts. Written only while spans are exported; swept by age.

CREATE TABLE span_contexts (
    kind        TEXT NOT NULL,              -- message | run | thread
    key         INTEGER NOT NULL,           -- the messages, runs or threads row id
    traceparent TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (kind, key)
);

CREATE INDEX span_contexts_by_time ON span_contexts (created_at);
