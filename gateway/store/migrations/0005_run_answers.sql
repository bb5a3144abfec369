-- The model's answer, kept on its run when the reply could not be committed: the retry of
-- the same batch (its queue items point at the run) commits it without calling the model
-- again. JSON: {"text": ..., "tool_calls": [...]}; the usage stays in the run's own columns.
-- Written only on that failure path, never for a reply that commits.
ALTER TABLE runs ADD COLUMN answer TEXT;
