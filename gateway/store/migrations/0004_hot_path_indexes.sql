-- Indexes for the queries every reply runs, so their cost does not grow with history.

-- The outbox sender asks for a thread's next pending row after every send.
CREATE INDEX outbox_pending_by_thread ON outbox (thread_id, id) WHERE status = 'pending';

-- A turn reads its thread's newest messages in conversation order.
CREATE INDEX messages_by_thread_order ON messages (thread_id, COALESCE(sort_key, id));

-- A turn reads its thread's latest summary.
CREATE INDEX memory_items_by_thread_type ON memory_items (thread_id, type, updated_at);
