"""The ``schedules`` and ``schedule_runs`` tables.

Every function takes the :class:`~gateway.store.db.Database` and, where it writes, the
current time ``now`` so that callers (and tests) own the clock.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from typing import Any

from gateway.scheduling.cron import iso
from gateway.store.db import Database

RESULT_STATUSES = frozenset({"completed", "failed", "canceled"})


def new_schedule_id() -> str:
    """A short random id that a model can copy back reliably."""
    return f"sch_{secrets.token_hex(5)}"


async def create_schedule(
    db: Database,
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
) -> sqlite3.Row:
    """Insert an enabled schedule and return its row."""
    schedule_id = new_schedule_id()
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO schedules (id, persona, thread_id, label, cron_expr, run_at, timezone, prompt, "
            "prompt_file, enabled, next_run_at, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
            (
                schedule_id,
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
        )
    row = await get_schedule(db, schedule_id)
    assert row is not None
    return row


async def get_schedule(db: Database, schedule_id: str, persona: str | None = None) -> sqlite3.Row | None:
    """One schedule; with ``persona`` only if it belongs to that persona."""
    if persona is None:
        return await db.fetchone("SELECT * FROM schedules WHERE id = ?", (schedule_id,))
    return await db.fetchone("SELECT * FROM schedules WHERE id = ? AND persona = ?", (schedule_id, persona))


async def persona_schedules(db: Database, persona: str) -> list[sqlite3.Row]:
    """A persona's schedules, oldest first."""
    return await db.fetchall("SELECT * FROM schedules WHERE persona = ? ORDER BY created_at, id", (persona,))


async def count_enabled(db: Database, persona: str) -> int:
    row = await db.fetchone("SELECT COUNT(*) FROM schedules WHERE persona = ? AND enabled = 1", (persona,))
    return int(row[0]) if row else 0


_UPDATABLE = frozenset(
    {"label", "cron_expr", "run_at", "timezone", "prompt", "prompt_file", "enabled", "next_run_at"}
)


async def update_schedule(
    db: Database, schedule_id: str, persona: str, changes: dict[str, Any], *, now: float
) -> sqlite3.Row | None:
    """Apply column changes to a persona's schedule; None when it does not exist."""
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {', '.join(sorted(unknown))}")
    columns = [*changes, "updated_at"]
    assignments = ", ".join(f"{name} = ?" for name in columns)
    async with db.transaction() as conn:
        cursor = await conn.execute(
            f"UPDATE schedules SET {assignments} WHERE id = ? AND persona = ?",
            (*changes.values(), now, schedule_id, persona),
        )
        if cursor.rowcount == 0:
            return None
    return await get_schedule(db, schedule_id, persona)


async def delete_schedule(db: Database, schedule_id: str, persona: str) -> bool:
    """Remove a persona's schedule and its run history; False when there was none."""
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "DELETE FROM schedules WHERE id = ? AND persona = ?", (schedule_id, persona)
        )
        return cursor.rowcount > 0


async def record_result(
    db: Database, schedule_id: str, due_at: float, *, status: str, run_id: int | None, error: str | None
) -> bool:
    """Record how a scheduled turn ended; the queue calls this when the turn is over.

    Updates the ``schedule_runs`` row of that occurrence and, unless a newer occurrence has
    already been recorded, the schedule's ``last_status``. Returns False when the
    occurrence is unknown (for example, the schedule was deleted meanwhile).

    Raises:
        ValueError: ``status`` is not one of completed, failed, canceled.
    """
    if status not in RESULT_STATUSES:
        raise ValueError(f"status must be one of {', '.join(sorted(RESULT_STATUSES))}, not {status!r}")
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "UPDATE schedule_runs SET status = ?, run_id = ?, error = ? WHERE schedule_id = ? AND due_at = ?",
            (status, run_id, error, schedule_id, due_at),
        )
        if cursor.rowcount == 0:
            return False
        await conn.execute(
            "UPDATE schedules SET last_status = ?, last_run_at = ?, updated_at = ? "
            "WHERE id = ? AND (last_run_at IS NULL OR last_run_at <= ?)",
            (status, due_at, time.time(), schedule_id, due_at),
        )
    return True


async def list_schedules(db: Database) -> list[dict[str, Any]]:
    """Every schedule of every persona, for ``talon schedules``; times are ISO in their timezone."""
    rows = await db.fetchall("SELECT * FROM schedules ORDER BY persona, created_at, id")
    return [
        {
            "id": row["id"],
            "persona": row["persona"],
            "thread_id": row["thread_id"],
            "label": row["label"],
            "cron_expr": row["cron_expr"],
            "run_at": iso(row["run_at"], row["timezone"]),
            "timezone": row["timezone"],
            "prompt_file": row["prompt_file"],
            "enabled": bool(row["enabled"]),
            "next_run_at": iso(row["next_run_at"], row["timezone"]),
            "last_run_at": iso(row["last_run_at"], row["timezone"]),
            "last_status": row["last_status"],
        }
        for row in rows
    ]
