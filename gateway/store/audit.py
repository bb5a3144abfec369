"""The ``audit_log`` table: one row per host-tool decision (``allowed``, ``refused``) or result.

Rows are written as they come and never changed. Every function runs on the database thread,
inside ``Database.run_transaction`` or ``Database.read``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["AuditRow", "add_entries", "recent_entries"]


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One audit row.

    Attributes:
        ts (:obj:`float`): When the decision or result was recorded (Unix time).
        decision (:obj:`str`): ``allowed``, ``refused`` or ``result``.
        status (:obj:`str` | :obj:`None`): For results: ``ok``, ``error`` or ``timeout``.
        detail (:obj:`str` | :obj:`None`): A short explanation, already redacted.
        id (:obj:`int` | :obj:`None`): The row id; ``None`` until the row is stored.
    """

    ts: float
    run_id: int | None
    thread_id: int | None
    persona: str | None
    tool: str | None
    decision: str
    status: str | None
    detail: str | None
    id: int | None = None


def add_entries(conn: sqlite3.Connection, rows: Iterable[AuditRow]) -> None:
    """Store ``rows`` in order (their ``id`` is assigned here)."""
    conn.executemany(
        "INSERT INTO audit_log (ts, run_id, thread_id, persona, tool, decision, status, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ((r.ts, r.run_id, r.thread_id, r.persona, r.tool, r.decision, r.status, r.detail) for r in rows),
    )


def recent_entries(conn: sqlite3.Connection, limit: int = 50) -> list[AuditRow]:
    """The newest ``limit`` rows (at least one), newest first."""
    rows = conn.execute(
        "SELECT ts, run_id, thread_id, persona, tool, decision, status, detail, id FROM audit_log "
        "ORDER BY id DESC LIMIT ?",
        (max(1, limit),),
    ).fetchall()
    return [AuditRow(*row) for row in rows]
