-- Whom a background child's model calls are charged to: the root turn's persona, channel and
-- sender (JSON), so that its runs count towards their budgets and usage rollups.
ALTER TABLE child_jobs ADD COLUMN payer TEXT;
