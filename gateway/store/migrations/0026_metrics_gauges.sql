-- /metrics counts the unfinished queue items and unsettled outbox rows on every scrape; these
-- partial indexes hold only those rows, so a scrape does not scan the done and sent ones.
-- Each WHERE matches its query's exactly (gateway/store/queue.py, outbox.py, gauges.py), as
-- SQLite needs to use a partial index.
CREATE INDEX queue_items_unfinished ON queue_items (status) WHERE status IN ('pending', 'leased', 'dead');
CREATE INDEX queue_items_pending_age ON queue_items (created_at) WHERE status = 'pending';
CREATE INDEX outbox_unsettled ON outbox (status) WHERE status IN ('pending', 'sending', 'failed', 'unknown');
