-- Images made by image_generate and image_edit: one row per image, for the per-thread and
-- per-day caps, and so that a turn retried after a crash finds the image its interrupted
-- attempt already made (same thread and request) instead of paying for and posting another.
CREATE TABLE generated_images (
    id INTEGER PRIMARY KEY,
    thread_id INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    run_id INTEGER,
    persona TEXT NOT NULL,
    kind TEXT NOT NULL,            -- generate | edit
    request_key TEXT NOT NULL,     -- sha256 of the call's arguments
    path TEXT NOT NULL,            -- where it was saved, as the model sees it (/workspace/...)
    posted INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX generated_images_by_thread ON generated_images (thread_id, request_key);
CREATE INDEX generated_images_by_time ON generated_images (created_at);
