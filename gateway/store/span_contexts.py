"""The ``span_contexts`` table: which OpenTelemetry span later work continues.

``kind`` says what ``key`` is: ``message`` (its intake span; the turn that answers it
continues it), ``run`` (its turn span; the run's sends continue it) and ``thread`` (a
background child's thread: the span that started it, which each of its turns continues).
Rows are written only while spans are exported (:mod:`gateway.otel`), and each write also
deletes up to :data:`PURGE_PER_WRITE` rows older than the retention, as run traces are swept.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = ["PURGE_PER_WRITE", "outbox_parent", "parents", "save"]

PURGE_PER_WRITE = 100


def save(
    conn: sqlite3.Connection, kind: str, key: int, traceparent: str, *, now: float, keep_seconds: float
) -> None:
    """Remember ``traceparent`` for ``(kind, key)`` (replacing an older one)."""
    conn.execute(
        "INSERT INTO span_contexts (kind, key, traceparent, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (kind, key) DO UPDATE SET traceparent = excluded.traceparent, "
        "created_at = excluded.created_at",
        (kind, key, traceparent, now),
    )
    conn.execute(
        "DELETE FROM span_contexts WHERE rowid IN ("
        "SELECT rowid FROM span_contexts WHERE created_at < ? ORDER BY created_at LIMIT ?)",
        (now - keep_seconds, PURGE_PER_WRITE),
    )


def parents(conn: sqlite3.Connection, kind: str, keys: Sequence[int]) -> list[str]:
    """The traceparents kept for ``keys`` of ``kind``, in the order of ``keys``."""
    if not keys:
        return []
    marks = ",".join("?" * len(keys))
    found = dict(
        conn.execute(
            f"SELECT key, traceparent FROM span_contexts WHERE kind = ? AND key IN ({marks})",
            (kind, *keys),
        ).fetchall()
    )
    return [found[k] for k in keys if k in found]


def outbox_parent(conn: sqlite3.Connection, outbox_id: int) -> str | None:
    """The traceparent of the run whose reply outbox row ``outbox_id`` is, if one was kept."""
    row = conn.execute(
        "SELECT s.traceparent FROM outbox o JOIN span_contexts s ON s.kind = 'run' AND s.key = o.run_id "
        "WHERE o.id = ?",
        (outbox_id,),
    ).fetchone()
    return None if row is None else row[0]
