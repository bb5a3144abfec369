"""The ``schedules`` and ``schedule_runs`` tables: a persona's cron and one-shot schedules, and
one row per occurrence that was fired, skipped or failed.

A schedule is due when it is enabled and its ``next_run_at`` has come; a schedule without a
next run is disabled. ``schedule_runs`` holds at most one row per (schedule, due time), which
is what makes firing an occurrence happen once.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ScheduleRow",
    "advance",
    "all_schedules",
    "count_enabled",
    "create_schedule",
    "delete_schedule",
    "disable_failed",
    "due_schedules",
    "get_schedule",
    "insert_run",
    "next_due_at",
    "persona_schedules",
    "record_result",
    "set_next_run",
    "update_schedule",
    "without_next_run",
]


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One schedule. Times are epoch seconds; ``timezone`` is the one its cron and run time are read in.

    Attributes:
        thread_id (:obj:`int`): Where it runs and where its result is delivered.
        cron_expr (:obj:`str` | :obj:`None`): A 5-field cron; ``None`` for a one-shot.
        run_at (:obj:`float` | :obj:`None`): A one-shot's time.
        prompt_file (:obj:`str` | :obj:`None`): A prompt alias of the persona, read at fire time.
        last_status (:obj:`str` | :obj:`None`): How its latest occurrence went (``queued``,
            ``skipped``, ``completed``, ``failed``, ``canceled``).
    """

    id: str
    persona: str
    thread_id: int
    label: str | None
    cron_expr: str | None
    run_at: float | None
    timezone: str
    prompt: str | None
    prompt_file: str | None
    enabled: bool
    next_run_at: float | None
    last_run_at: float | None
    last_status: str | None
    created_at: float
    updated_at: float


_COLUMNS = (
    "id, persona, thread_id, label, cron_expr, run_at, timezone, prompt, prompt_file, enabled, "
    "next_run_at, last_run_at, last_status, created_at, updated_at"
)


def _schedule(row: Any) -> ScheduleRow:
    values = tuple(row)
    return ScheduleRow(*values[:9], bool(values[9]), *values[10:])


def _new_schedule_id() -> str:
    """A short random id that a model can copy back reliably."""
    return f"sch_{secrets.token_hex(5)}"


def create_schedule(
    conn: sqlite3.Connection,
    *,
    persona: str,
    thread_id: int,
    label: str | None,
    cron_expr: str | None,
    run_at: float | None,
    timezone: str,
    prompt: str | None,
    prompt_file: str | None,
    next_run_at: float | None,
    now: float,
) -> ScheduleRow:
    """A new enabled schedule of ``persona`` in the thread, with a fresh id."""
    row = conn.execute(
        "INSERT INTO schedules (id, persona, thread_id, label, cron_expr, run_at, timezone, prompt, "
        "prompt_file, enabled, next_run_at, created_at, updated_at) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) RETURNING {_COLUMNS}",
        (
            _new_schedule_id(),
            persona,
            thread_id,
            label,
            cron_expr,
            run_at,
            timezone,
            prompt,
            prompt_file,
            next_run_at,
            now,
            now,
        ),
    ).fetchone()
    return _schedule(row)


def get_schedule(
    conn: sqlite3.Connection, schedule_id: str, persona: str | None = None
) -> ScheduleRow | None:
    """One schedule; with ``persona`` only if it belongs to that persona."""
    if persona is None:
        row = conn.execute(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
    else:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM schedules WHERE id = ? AND persona = ?", (schedule_id, persona)
        ).fetchone()
    return None if row is None else _schedule(row)


def persona_schedules(conn: sqlite3.Connection, persona: str) -> list[ScheduleRow]:
    """A persona's schedules, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM schedules WHERE persona = ? ORDER BY created_at, id", (persona,)
    ).fetchall()
    return [_schedule(row) for row in rows]


def all_schedules(conn: sqlite3.Connection) -> list[ScheduleRow]:
    """Every schedule of every persona, by persona, oldest first."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM schedules ORDER BY persona, created_at, id").fetchall()
    return [_schedule(row) for row in rows]


def count_enabled(conn: sqlite3.Connection, persona: str) -> int:
    """How many of the persona's schedules are enabled."""
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM schedules WHERE persona = ? AND enabled = 1", (persona,)
    ).fetchone()
    return int(count)


_UPDATABLE = frozenset(
    {"label", "cron_expr", "run_at", "timezone", "prompt", "prompt_file", "enabled", "next_run_at"}
)


def update_schedule(
    conn: sqlite3.Connection, schedule_id: str, persona: str, changes: dict[str, Any], *, now: float
) -> ScheduleRow | None:
    """Apply column changes to a persona's schedule; None when it does not exist.

    Raises:
        ValueError: a key of ``changes`` is not a column a schedule's owner may change.
    """
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {', '.join(sorted(unknown))}")
    assignments = ", ".join(f"{name} = ?" for name in [*changes, "updated_at"])
    row = conn.execute(
        f"UPDATE schedules SET {assignments} WHERE id = ? AND persona = ? RETURNING {_COLUMNS}",
        (*changes.values(), now, schedule_id, persona),
    ).fetchone()
    return None if row is None else _schedule(row)


def delete_schedule(conn: sqlite3.Connection, schedule_id: str, persona: str) -> bool:
    """Remove a persona's schedule and its run history; False when there was none."""
    cursor = conn.execute("DELETE FROM schedules WHERE id = ? AND persona = ?", (schedule_id, persona))
    return cursor.rowcount > 0


def due_schedules(conn: sqlite3.Connection, now: float) -> list[tuple[str, float]]:
    """(id, next run) of every enabled schedule due at ``now``, the earliest first."""
    rows = conn.execute(
        "SELECT id, next_run_at FROM schedules WHERE enabled = 1 AND next_run_at IS NOT NULL "
        "AND next_run_at <= ? ORDER BY next_run_at, id",
        (now,),
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def next_due_at(conn: sqlite3.Connection) -> float | None:
    """When the next enabled schedule is due; None when none is."""
    row = conn.execute(
        "SELECT MIN(next_run_at) FROM schedules WHERE enabled = 1 AND next_run_at IS NOT NULL"
    ).fetchone()
    return None if row is None else row[0]


def without_next_run(conn: sqlite3.Connection) -> list[ScheduleRow]:
    """Enabled schedules that have no next run (rows written by other means than the tool)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM schedules WHERE enabled = 1 AND next_run_at IS NULL ORDER BY id"
    ).fetchall()
    return [_schedule(row) for row in rows]


def set_next_run(conn: sqlite3.Connection, schedule_id: str, next_run_at: float, now: float) -> None:
    """Give a schedule its next run, unless it got one meanwhile."""
    conn.execute(
        "UPDATE schedules SET next_run_at = ?, updated_at = ? WHERE id = ? AND next_run_at IS NULL",
        (next_run_at, now, schedule_id),
    )


def disable_failed(conn: sqlite3.Connection, schedule_id: str, now: float) -> None:
    """A schedule that cannot run (its cron or timezone is broken) is disabled as ``failed``."""
    conn.execute(
        "UPDATE schedules SET enabled = 0, next_run_at = NULL, last_status = 'failed', updated_at = ? "
        "WHERE id = ?",
        (now, schedule_id),
    )


def insert_run(
    conn: sqlite3.Connection, schedule_id: str, due_at: float, status: str, error: str | None, now: float
) -> bool:
    """Record the occurrence at ``due_at`` as ``status``; False when it was recorded already
    (another tick fired it)."""
    cursor = conn.execute(
        "INSERT INTO schedule_runs (schedule_id, due_at, status, error, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (schedule_id, due_at) DO NOTHING",
        (schedule_id, due_at, status, error, now),
    )
    return cursor.rowcount > 0


def advance(
    conn: sqlite3.Connection,
    schedule_id: str,
    *,
    next_run_at: float | None,
    last_run_at: float | None,
    last_status: str | None,
    now: float,
) -> None:
    """After an occurrence: its next run (none disables it), its latest run and how it went."""
    conn.execute(
        "UPDATE schedules SET next_run_at = ?, enabled = ?, last_run_at = ?, last_status = ?, "
        "updated_at = ? WHERE id = ?",
        (next_run_at, 1 if next_run_at is not None else 0, last_run_at, last_status, now, schedule_id),
    )


def record_result(
    conn: sqlite3.Connection,
    schedule_id: str,
    due_at: float,
    *,
    status: str,
    run_id: int | None,
    error: str | None,
    now: float,
) -> bool:
    """How the scheduled turn of the occurrence at ``due_at`` ended.

    Updates that occurrence's ``schedule_runs`` row and, unless a newer occurrence has been
    recorded already, the schedule's ``last_status``. False when the occurrence is unknown
    (the schedule was deleted meanwhile, say).
    """
    cursor = conn.execute(
        "UPDATE schedule_runs SET status = ?, run_id = ?, error = ? WHERE schedule_id = ? AND due_at = ?",
        (status, run_id, error, schedule_id, due_at),
    )
    if cursor.rowcount == 0:
        return False
    conn.execute(
        "UPDATE schedules SET last_status = ?, last_run_at = ?, updated_at = ? "
        "WHERE id = ? AND (last_run_at IS NULL OR last_run_at <= ?)",
        (status, due_at, now, schedule_id, due_at),
    )
    return True
