"""The ``procedures`` table (migration 0014): procedures a persona saved with
``procedure_write``, each a draft until an operator approves it.

A procedure is searchable from the moment it is written (the table's triggers keep it in the
``memory_fts`` index of :mod:`gateway.store.facts`, under its persona's :func:`procedure_tag`);
it is one of the persona's skills only once approved. Every function runs on the database
thread, inside ``Database.run_transaction`` or ``Database.read``.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ProcedureRow",
    "approve_procedure",
    "count_procedures",
    "get_procedure",
    "list_procedures",
    "procedure_tag",
    "write_procedure",
]

Status = Literal["draft", "approved"]


def procedure_tag(persona: str) -> str:
    """The index token of ``persona``'s procedures (never a word a query can match)."""
    return "r" + hashlib.sha256(f"procedure\0{persona}".encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class ProcedureRow:
    id: int
    persona: str
    name: str
    description: str
    content: str
    status: Status
    created_at: float
    updated_at: float
    approved_at: float | None


_COLUMNS = "id, persona, name, description, content, status, created_at, updated_at, approved_at"


def write_procedure(
    conn: sqlite3.Connection, persona: str, name: str, *, description: str, content: str, now: float
) -> ProcedureRow:
    """Save ``name`` as a draft of ``persona`` (a rewrite of an approved one is a draft again:
    the operator approves what will run)."""
    conn.execute(
        "INSERT INTO procedures (persona, name, tag, description, content, status, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, 'draft', ?, ?) ON CONFLICT (persona, name) DO UPDATE SET "
        "description = excluded.description, content = excluded.content, status = 'draft', "
        "updated_at = excluded.updated_at, approved_at = NULL",
        (persona, name, procedure_tag(persona), description, content, now, now),
    )
    row = get_procedure(conn, persona, name)
    assert row is not None
    return row


def get_procedure(conn: sqlite3.Connection, persona: str, name: str) -> ProcedureRow | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM procedures WHERE persona = ? AND name = ?", (persona, name)
    ).fetchone()
    return None if row is None else ProcedureRow(*row)


def list_procedures(
    conn: sqlite3.Connection, persona: str | None = None, *, status: Status | None = None
) -> list[ProcedureRow]:
    """Procedures by persona and name; ``persona``/``status`` narrow the list."""
    where, params = [], []
    if persona is not None:
        where.append("persona = ?")
        params.append(persona)
    if status is not None:
        where.append("status = ?")
        params.append(status)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM procedures{clause} ORDER BY persona, name", params)
    return [ProcedureRow(*r) for r in rows.fetchall()]


def count_procedures(conn: sqlite3.Connection, persona: str) -> int:
    (count,) = conn.execute("SELECT COUNT(*) FROM procedures WHERE persona = ?", (persona,)).fetchone()
    return int(count)


def approve_procedure(
    conn: sqlite3.Connection, persona: str, name: str, *, content: str, description: str, now: float
) -> ProcedureRow | None:
    """Mark the draft approved with the text the operator approved; ``None`` when there is none."""
    cur = conn.execute(
        "UPDATE procedures SET status = 'approved', content = ?, description = ?, updated_at = ?, "
        "approved_at = ? WHERE persona = ? AND name = ?",
        (content, description, now, now, persona, name),
    )
    return get_procedure(conn, persona, name) if cur.rowcount else None
