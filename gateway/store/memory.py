"""The ``memory_items`` table: what a thread remembers (facts, notes and its ``summary``), by key.

An item belongs to one thread; every function takes that thread and never reaches another's
items. Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = [
    "MemoryRow",
    "count_items",
    "delete_item",
    "get_item",
    "item_kind",
    "keys_of_kind",
    "list_items",
    "put_item",
]


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One memory item.

    Attributes:
        kind (:obj:`str`): Its ``type`` column: ``fact``, ``summary`` or ``note``.
    """

    key: str
    kind: str
    value: str
    updated_at: float


_COLUMNS = "key, type, value, updated_at"


def get_item(conn: sqlite3.Connection, thread_id: int, key: str) -> MemoryRow | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM memory_items WHERE thread_id = ? AND key = ?", (thread_id, key)
    ).fetchone()
    return None if row is None else MemoryRow(*row)


def item_kind(conn: sqlite3.Connection, thread_id: int, key: str) -> str | None:
    """The item's kind, ``None`` when the thread has no item ``key``."""
    row = conn.execute(
        "SELECT type FROM memory_items WHERE thread_id = ? AND key = ?", (thread_id, key)
    ).fetchone()
    return None if row is None else row[0]


def count_items(conn: sqlite3.Connection, thread_id: int) -> int:
    (count,) = conn.execute("SELECT COUNT(*) FROM memory_items WHERE thread_id = ?", (thread_id,)).fetchone()
    return int(count)


def list_items(
    conn: sqlite3.Connection,
    thread_id: int,
    *,
    limit: int,
    kind: str | None = None,
    summaries: bool = True,
) -> list[MemoryRow]:
    """The thread's items, most recently updated first.

    Args:
        kind: only items of this kind.
        summaries: ``False`` leaves out the ``summary`` items.
    """
    where, params = "thread_id = ?", [thread_id]
    if kind is not None:
        where += " AND type = ?"
        params.append(kind)
    if not summaries:
        where += " AND type != 'summary'"
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM memory_items WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [MemoryRow(*row) for row in rows]


def keys_of_kind(conn: sqlite3.Connection, thread_id: int, kind: str) -> set[str]:
    """The keys of the thread's items of ``kind``."""
    rows = conn.execute(
        "SELECT key FROM memory_items WHERE thread_id = ? AND type = ?", (thread_id, kind)
    ).fetchall()
    return {row[0] for row in rows}


def put_item(
    conn: sqlite3.Connection, thread_id: int, persona: str, key: str, kind: str, value: str, now: float
) -> None:
    """Store item ``key``; an existing one takes the new kind, value and persona and keeps its
    creation time."""
    conn.execute(
        "INSERT INTO memory_items (thread_id, persona, key, type, value, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, key) DO UPDATE SET "
        "type = excluded.type, value = excluded.value, persona = excluded.persona, "
        "updated_at = excluded.updated_at",
        (thread_id, persona, key, kind, value, now, now),
    )


def delete_item(conn: sqlite3.Connection, thread_id: int, key: str, *, summaries: bool = True) -> bool:
    """Delete item ``key``; False when there was none. ``summaries=False`` spares a ``summary`` item."""
    sql = "DELETE FROM memory_items WHERE thread_id = ? AND key = ?"
    if not summaries:
        sql += " AND type != 'summary'"
    return conn.execute(sql, (thread_id, key)).rowcount > 0
