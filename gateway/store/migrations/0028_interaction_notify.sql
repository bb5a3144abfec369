-- The PostgreSQL twin adds a trigger that tells a cluster's other nodes of every interaction
-- asked or closed. A SQLite store has one node, which hears of its own at once: nothing to add.
SELECT 1;
