-- Context summarization: messages up to this id are covered by the thread's 'summary' memory item.

ALTER TABLE threads ADD COLUMN summarized_upto INTEGER NOT NULL DEFAULT 0;
