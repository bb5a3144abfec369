"""What /metrics reads from the database at scrape time: a handful of indexed counts."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from gateway.store.outbox import count_by_status as outbox_counts
from gateway.store.queue import count_by_status as queue_counts

__all__ = ["StoredGauges", "stored_gauges"]


@dataclass(frozen=True, slots=True)
class StoredGauges:
    """``usage`` maps (scope, subject, period) -> (tokens, cost) for personas and channels in
    the current day and month."""

    queue: dict[str, int]
    oldest_pending_at: float | None
    outbox: dict[str, int]
    usage: dict[tuple[str, str, str], tuple[int, float]] = field(default_factory=dict)


def stored_gauges(conn: sqlite3.Connection, periods: tuple[str, str]) -> StoredGauges:
    # Partial indexes of migration 0026 keep these counts off the done and sent rows.
    oldest = conn.execute("SELECT MIN(created_at) FROM queue_items WHERE status = 'pending'").fetchone()[0]
    usage = {
        (row[0], row[1], "day" if row[2] == periods[0] else "month"): (int(row[3]), float(row[4]))
        for row in conn.execute(
            "SELECT scope, subject, period, SUM(tokens), SUM(cost) FROM usage_rollups "
            "WHERE scope IN ('persona', 'channel') AND period IN (?, ?) GROUP BY scope, subject, period",
            periods,
        )
    }
    return StoredGauges(queue_counts(conn), oldest, outbox_counts(conn), usage)
