"""Read-only queries the web console pages need beyond the other modules' (audit with filters,
a thread's runs and memory at a glance). Every one is bounded by a LIMIT and walks an index."""

from __future__ import annotations

import sqlite3
from typing import Any

from gateway.store.audit import AuditRow

__all__ = ["AUDIT_PAGE", "audit_page", "message_count", "thread_count"]

AUDIT_PAGE = 100


def audit_page(
    conn: sqlite3.Connection,
    *,
    tool: str | None = None,
    decision: str | None = None,
    persona: str | None = None,
    since: float | None = None,
    before_id: int | None = None,
    limit: int = AUDIT_PAGE,
) -> list[AuditRow]:
    """Audit rows matching every filter given, newest first; ``tool`` matches a prefix
    (``console.`` finds every console change), ``before_id`` pages back."""
    sql = "SELECT ts, run_id, thread_id, persona, tool, decision, status, detail, id FROM audit_log WHERE 1=1"
    params: list[Any] = []
    if tool:
        sql += " AND tool >= ? AND tool < ?"  # a range, so the prefix match can use an index
        params += [tool, tool + "\U0010ffff"]
    if decision:
        sql += " AND decision = ?"
        params.append(decision)
    if persona:
        sql += " AND persona = ?"
        params.append(persona)
    if since is not None:
        sql += " AND ts >= ?"
        params.append(since)
    if before_id is not None:
        sql += " AND id < ?"
        params.append(before_id)
    sql += " ORDER BY id DESC LIMIT ?"
    params.append(max(1, min(limit, 500)))
    return [AuditRow(*row) for row in conn.execute(sql, params)]


def thread_count(conn: sqlite3.Connection) -> int:
    (n,) = conn.execute("SELECT COUNT(*) FROM threads").fetchone()
    return int(n)


def message_count(conn: sqlite3.Connection, thread_id: int) -> int:
    (n,) = conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (thread_id,)).fetchone()
    return int(n)
