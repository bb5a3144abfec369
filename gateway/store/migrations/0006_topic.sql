-- The platform's sub-thread (forum topic, Slack thread_ts, Discord thread) is ThreadKey.topic;
-- its column says so. '' when the chat itself is the thread. The UNIQUE key of threads
-- follows the rename.

ALTER TABLE threads RENAME COLUMN thread_ref TO topic;
ALTER TABLE outbox RENAME COLUMN thread_ref TO topic;
