"""The ``run_events`` table: each run's trace, one row per event, in the run's order.

Events are written in batches (:func:`add_events`, one ``executemany`` per run end, by
:mod:`gateway.tracing`) and read back per run (:func:`run_events`), across a persona's recent
runs (:func:`persona_runs`, :func:`search_events`) and summed per run for ``talon runs``
(:func:`recent_runs`). Payloads are JSON objects, encoded and bounded by the caller.
:func:`purge_before` is the retention sweep.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PURGE_BATCH",
    "EventRow",
    "RunInfo",
    "TraceEvent",
    "add_events",
    "get_run",
    "persona_run_count",
    "persona_runs",
    "purge_before",
    "recent_runs",
    "run_events",
    "search_events",
]

PURGE_BATCH = 5000  # rows one sweep transaction deletes: short enough not to hold the writer


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One event to write. ``payload`` is JSON text of an object."""

    run_id: int
    root_run_id: int | None
    thread_id: int | None
    persona: str
    seq: int
    kind: str
    name: str | None
    at: float
    duration_ms: float | None = None
    error_class: str | None = None
    payload: str = "{}"


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored event, its payload decoded."""

    id: int
    run_id: int
    root_run_id: int | None
    seq: int
    kind: str
    name: str | None
    at: float
    duration_ms: float | None
    error_class: str | None
    payload: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The event as the inspection tools and ``talon runs`` show it."""
        return {
            "run_id": self.run_id,
            "root_run_id": self.root_run_id,
            "seq": self.seq,
            "kind": self.kind,
            "name": self.name,
            "at": self.at,
            "duration_ms": self.duration_ms,
            "error_class": self.error_class,
            "payload": self.payload,
        }


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One ``runs`` row with its trace's counts."""

    id: int
    thread_id: int
    persona: str
    status: str
    model: str | None
    started_at: float
    ended_at: float | None
    input_tokens: int
    output_tokens: int
    model_calls: int
    tool_calls: int
    error: str | None


_EVENT_COLUMNS = "id, run_id, root_run_id, seq, kind, name, at, duration_ms, error_class, payload"


def add_events(conn: sqlite3.Connection, events: Sequence[TraceEvent]) -> int:
    """Write ``events`` in one statement; returns how many."""
    conn.executemany(
        "INSERT INTO run_events (run_id, root_run_id, thread_id, persona, seq, kind, name, at, "
        "duration_ms, error_class, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                e.run_id,
                e.root_run_id,
                e.thread_id,
                e.persona,
                e.seq,
                e.kind,
                e.name,
                e.at,
                e.duration_ms,
                e.error_class,
                e.payload,
            )
            for e in events
        ],
    )
    return len(events)


def _event(row: sqlite3.Row | tuple[Any, ...]) -> EventRow:
    payload = json.loads(row[9]) if row[9] else {}
    return EventRow(
        int(row[0]),
        int(row[1]),
        row[2],
        int(row[3]),
        row[4],
        row[5],
        float(row[6]),
        row[7],
        row[8],
        payload if isinstance(payload, dict) else {},
    )


def run_events(
    conn: sqlite3.Connection,
    run_id: int,
    *,
    kinds: Sequence[str] = (),
    name: str | None = None,
    errors_only: bool = False,
) -> Iterator[EventRow]:
    """The run's events in order, filtered by kind, name and having an error class."""
    sql = f"SELECT {_EVENT_COLUMNS} FROM run_events WHERE run_id = ?"
    params: list[Any] = [run_id]
    if kinds:
        sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
        params += list(kinds)
    if name is not None:
        sql += " AND name = ?"
        params.append(name)
    if errors_only:
        sql += " AND error_class IS NOT NULL"
    for row in conn.execute(sql + " ORDER BY seq, id", params):
        yield _event(row)


def persona_runs(
    conn: sqlite3.Connection,
    persona: str,
    *,
    limit: int,
    since: float | None = None,
    exclude: int | None = None,
) -> list[int]:
    """Ids of ``persona``'s most recent traced runs (newest first), begun at ``since`` or later,
    without ``exclude``."""
    sql, params = _persona_runs_query(persona, since, exclude)
    rows = conn.execute(sql + " ORDER BY run_id DESC LIMIT ?", [*params, limit]).fetchall()
    return [int(r[0]) for r in rows]


def persona_run_count(
    conn: sqlite3.Connection, persona: str, *, since: float | None = None, exclude: int | None = None
) -> int:
    """How many traced runs :func:`persona_runs` could return without a limit."""
    sql, params = _persona_runs_query(persona, since, exclude)
    (count,) = conn.execute(f"SELECT COUNT(*) FROM ({sql})", params).fetchone()
    return int(count)


def _persona_runs_query(persona: str, since: float | None, exclude: int | None) -> tuple[str, list[Any]]:
    """The runs of ``persona`` (one row each), ended at ``since`` or later, without ``exclude``."""
    sql = "SELECT run_id FROM run_events WHERE persona = ?"
    params: list[Any] = [persona]
    if exclude is not None:
        sql += " AND run_id != ?"
        params.append(exclude)
    sql += " GROUP BY run_id"
    if since is not None:
        sql += " HAVING MAX(at) >= ?"
        params.append(since)
    return sql, params


def search_events(
    conn: sqlite3.Connection,
    run_ids: Sequence[int],
    needle: str,
    *,
    kinds: Sequence[str] = (),
    name: str | None = None,
) -> Iterator[EventRow]:
    """Events of ``run_ids`` whose name or payload holds ``needle`` (case-insensitive, ASCII
    case folding as SQLite's ``lower``), newest run first, each run in order. The caller stops
    reading when it has enough."""
    if not run_ids:
        return
    needle = needle.lower()
    sql = (
        f"SELECT {_EVENT_COLUMNS} FROM run_events WHERE run_id IN ({', '.join('?' * len(run_ids))}) "
        "AND (instr(lower(coalesce(name, '')), ?) > 0 OR instr(lower(kind), ?) > 0 "
        "OR instr(lower(payload), ?) > 0)"
    )
    params: list[Any] = [*run_ids, needle, needle, needle]
    if kinds:
        sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
        params += list(kinds)
    if name is not None:
        sql += " AND name = ?"
        params.append(name)
    for row in conn.execute(sql + " ORDER BY run_id DESC, seq, id", params):
        yield _event(row)


_RUN_COLUMNS = (
    "r.id, r.thread_id, r.persona, r.status, r.model, r.started_at, r.ended_at, r.input_tokens, "
    "r.output_tokens, r.model_calls, "
    "(SELECT COUNT(*) FROM run_events e WHERE e.run_id = r.id AND e.kind = 'tool_call'), r.error"
)


def _run(row: sqlite3.Row | tuple[Any, ...]) -> RunInfo:
    return RunInfo(*row)


def get_run(conn: sqlite3.Connection, run_id: int) -> RunInfo | None:
    """The run ``run_id`` with its trace's counts, or ``None``."""
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs r WHERE r.id = ?", (run_id,)).fetchone()
    return _run(row) if row else None


def recent_runs(
    conn: sqlite3.Connection,
    *,
    limit: int,
    thread_id: int | None = None,
    persona: str | None = None,
) -> list[RunInfo]:
    """The newest runs (host-tools sessions left out), of one thread or persona if given."""
    sql = f"SELECT {_RUN_COLUMNS} FROM runs r WHERE r.status NOT IN ('session', 'ended')"
    params: list[Any] = []
    if thread_id is not None:
        sql += " AND r.thread_id = ?"
        params.append(thread_id)
    if persona is not None:
        sql += " AND r.persona = ?"
        params.append(persona)
    sql += " ORDER BY r.id DESC LIMIT ?"
    return [_run(row) for row in conn.execute(sql, [*params, limit])]


def purge_before(conn: sqlite3.Connection, cutoff: float, *, batch: int = PURGE_BATCH) -> int:
    """Delete up to ``batch`` events older than ``cutoff``; returns how many."""
    cursor = conn.execute(
        "DELETE FROM run_events WHERE id IN (SELECT id FROM run_events WHERE at < ? LIMIT ?)",
        (cutoff, batch),
    )
    return cursor.rowcount
