"""The ``schedules`` and ``schedule_runs`` tables: a persona's cron and one-shot schedules, and
one row per attempt of each occurrence that was fired, skipped or failed.

A schedule is due when it is enabled and its ``next_run_at`` has come; a schedule without a
next run is disabled. ``schedule_runs`` holds at most one row per (schedule, due time,
attempt); the first attempt's row is written when the occurrence fires, which is what makes
firing it happen once. Retries of a transient failure add the next attempt's row.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RunRecord",
    "ScheduleRow",
    "advance",
    "all_schedules",
    "attempt_started",
    "count_enabled",
    "create_schedule",
    "delete_schedule",
    "disable_failed",
    "due_schedules",
    "expire_due",
    "free_task_id",
    "get_schedule",
    "get_task",
    "insert_run",
    "interrupt_shell_runs",
    "next_due_at",
    "persona_schedules",
    "record_result",
    "run_history",
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
            ``skipped``, ``completed``, ``failed``, ``retrying``, ``canceled``, ``expired``).
        task_id (:obj:`str`): The persona's name for it (a slug, or the id of older rows).
        expires_at (:obj:`float` | :obj:`None`): After this it is disabled.
        executor (:obj:`str`): ``agent`` (a turn of the persona) or ``shell`` (a sandboxed command).
        notify_on (:obj:`str`): ``failure``, ``always`` or ``never``.
        notify_chat (:obj:`str` | :obj:`None`): ``channel`` or ``channel:chat``; None: its thread.
        max_attempts (:obj:`int`): Attempts per occurrence on transient failures (1 to 5).
        retry_delay_ms (:obj:`int`): The first retry's delay; it doubles per attempt.
        cwd (:obj:`str` | :obj:`None`): A shell task's directory as the sandbox sees it.
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
    task_id: str
    expires_at: float | None
    executor: str
    notify_on: str
    notify_chat: str | None
    max_attempts: int
    retry_delay_ms: int
    cwd: str | None


_COLUMNS = (
    "id, persona, thread_id, label, cron_expr, run_at, timezone, prompt, prompt_file, enabled, "
    "next_run_at, last_run_at, last_status, created_at, updated_at, task_id, expires_at, executor, "
    "notify_on, notify_chat, max_attempts, retry_delay_ms, cwd"
)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One attempt of one occurrence, for ``get_schedule_history``.

    Attributes:
        status (:obj:`str`): ``queued``, ``running``, ``completed``, ``failed``, ``retrying``,
            ``skipped`` or ``canceled``.
        output_tail (:obj:`str` | :obj:`None`): The end of the reply or of the command's output.
    """

    due_at: float
    attempt: int
    status: str
    run_id: int | None
    error: str | None
    exit_code: int | None
    duration_ms: int | None
    output_tail: str | None
    started_at: float | None
    finished_at: float | None
    created_at: float


_RUN_COLUMNS = (
    "due_at, attempt, status, run_id, error, exit_code, duration_ms, output_tail, started_at, "
    "finished_at, created_at"
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
    task_id: str | None = None,
    enabled: bool = True,
    expires_at: float | None = None,
    executor: str = "agent",
    notify_on: str = "failure",
    notify_chat: str | None = None,
    max_attempts: int = 1,
    retry_delay_ms: int = 30_000,
    cwd: str | None = None,
) -> ScheduleRow:
    """A new schedule of ``persona`` in the thread, with a fresh id; ``task_id`` defaults to it.

    Raises:
        sqlite3.IntegrityError: the persona has a schedule with that ``task_id`` already.
    """
    schedule_id = _new_schedule_id()
    row = conn.execute(
        "INSERT INTO schedules (id, persona, thread_id, label, cron_expr, run_at, timezone, prompt, "
        "prompt_file, enabled, next_run_at, created_at, updated_at, task_id, expires_at, executor, "
        "notify_on, notify_chat, max_attempts, retry_delay_ms, cwd) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
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
            int(enabled),
            next_run_at if enabled else None,
            now,
            now,
            task_id or schedule_id,
            expires_at,
            executor,
            notify_on,
            notify_chat,
            max_attempts,
            retry_delay_ms,
            cwd,
        ),
    ).fetchone()
    return _schedule(row)


def get_task(conn: sqlite3.Connection, persona: str, task_id: str) -> ScheduleRow | None:
    """The persona's schedule called ``task_id``."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM schedules WHERE persona = ? AND task_id = ?", (persona, task_id)
    ).fetchone()
    return None if row is None else _schedule(row)


def free_task_id(conn: sqlite3.Connection, persona: str, base: str, *, limit: int = 1000) -> str | None:
    """``base``, or ``base-2``, ``base-3`` ... : the first the persona does not use; None past ``limit``."""
    taken = {
        row[0]
        for row in conn.execute(
            "SELECT task_id FROM schedules WHERE persona = ? AND (task_id = ? OR substr(task_id, 1, ?) = ?)",
            (persona, base, len(base) + 1, base + "-"),
        )
    }
    for n in range(1, limit + 1):
        candidate = base if n == 1 else f"{base}-{n}"
        if candidate not in taken:
            return candidate
    return None


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
    {
        "label",
        "cron_expr",
        "run_at",
        "timezone",
        "prompt",
        "prompt_file",
        "enabled",
        "next_run_at",
        "expires_at",
        "executor",
        "notify_on",
        "notify_chat",
        "max_attempts",
        "retry_delay_ms",
        "cwd",
    }
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
    conn: sqlite3.Connection,
    schedule_id: str,
    due_at: float,
    status: str,
    error: str | None,
    now: float,
    *,
    started_at: float | None = None,
) -> bool:
    """Record the first attempt of the occurrence at ``due_at`` as ``status``; False when it
    was recorded already (another tick fired it)."""
    finished = now if status in ("skipped", "failed") else None
    cursor = conn.execute(
        "INSERT INTO schedule_runs (schedule_id, due_at, attempt, status, error, started_at, finished_at, "
        "created_at) VALUES (?, ?, 1, ?, ?, ?, ?, ?) ON CONFLICT (schedule_id, due_at, attempt) DO NOTHING",
        (schedule_id, due_at, status, error, started_at, finished, now),
    )
    return cursor.rowcount > 0


def attempt_started(
    conn: sqlite3.Connection, schedule_id: str, due_at: float, attempt: int, run_id: int | None, now: float
) -> bool:
    """Attempt ``attempt`` of the occurrence at ``due_at`` is running now (a row is made for a
    retry). An earlier attempt still open was cut short by a restart: it is marked
    ``retrying``. False when the occurrence is unknown (its schedule was deleted)."""
    known = conn.execute(
        "SELECT 1 FROM schedule_runs WHERE schedule_id = ? AND due_at = ? LIMIT 1", (schedule_id, due_at)
    ).fetchone()
    if known is None:
        return False
    conn.execute(
        "UPDATE schedule_runs SET status = 'retrying', finished_at = ?, "
        "error = COALESCE(error, 'interrupted: the daemon stopped during this attempt') "
        "WHERE schedule_id = ? AND due_at = ? AND attempt < ? AND status IN ('queued', 'running')",
        (now, schedule_id, due_at, attempt),
    )
    conn.execute(
        "INSERT INTO schedule_runs (schedule_id, due_at, attempt, status, run_id, started_at, created_at) "
        "VALUES (?, ?, ?, 'running', ?, ?, ?) ON CONFLICT (schedule_id, due_at, attempt) DO UPDATE SET "
        "status = 'running', run_id = excluded.run_id, started_at = excluded.started_at, "
        "finished_at = NULL",
        (schedule_id, due_at, attempt, run_id, now, now),
    )
    return True


def run_history(conn: sqlite3.Connection, schedule_id: str, limit: int) -> list[RunRecord]:
    """The latest ``limit`` attempts of a schedule's occurrences, oldest first."""
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM (SELECT {_RUN_COLUMNS}, id FROM schedule_runs WHERE schedule_id = ? "
        "ORDER BY due_at DESC, attempt DESC, id DESC LIMIT ?) AS latest ORDER BY due_at, attempt, id",
        (schedule_id, limit),
    ).fetchall()
    return [RunRecord(*tuple(row)) for row in rows]


def interrupt_shell_runs(conn: sqlite3.Connection, now: float) -> int:
    """At start: shell attempts a stop left open failed (a command is not run twice blindly)."""
    cursor = conn.execute(
        "UPDATE schedule_runs SET status = 'failed', finished_at = ?, "
        "error = 'interrupted: the daemon stopped while the command ran; it is not run again' "
        "WHERE status IN ('queued', 'running') AND schedule_id IN "
        "(SELECT id FROM schedules WHERE executor = 'shell')",
        (now,),
    )
    return cursor.rowcount


def expire_due(conn: sqlite3.Connection, now: float) -> list[str]:
    """Disable the enabled schedules whose ``expires_at`` has passed; returns their ids."""
    rows = conn.execute(
        "UPDATE schedules SET enabled = 0, next_run_at = NULL, last_status = 'expired', updated_at = ? "
        "WHERE enabled = 1 AND expires_at IS NOT NULL AND expires_at <= ? RETURNING id",
        (now, now),
    ).fetchall()
    return sorted(row[0] for row in rows)


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
    exit_code: int | None = None,
    duration_ms: int | None = None,
    output_tail: str | None = None,
) -> bool:
    """How the latest attempt of the occurrence at ``due_at`` ended (``retrying``: it failed
    and the next attempt is on its way).

    Updates that attempt's ``schedule_runs`` row and, unless a newer occurrence has been
    recorded already, the schedule's ``last_status``. False when the occurrence is unknown
    (the schedule was deleted meanwhile, say).
    """
    cursor = conn.execute(
        "UPDATE schedule_runs SET status = ?, run_id = COALESCE(?, run_id), error = ?, "
        "exit_code = COALESCE(?, exit_code), duration_ms = COALESCE(?, duration_ms), "
        "output_tail = COALESCE(?, output_tail), finished_at = ? "
        "WHERE schedule_id = ? AND due_at = ? AND attempt = "
        "(SELECT MAX(attempt) FROM schedule_runs WHERE schedule_id = ? AND due_at = ?)",
        (
            status,
            run_id,
            error,
            exit_code,
            duration_ms,
            output_tail,
            now,
            schedule_id,
            due_at,
            schedule_id,
            due_at,
        ),
    )
    if cursor.rowcount == 0:
        return False
    conn.execute(
        "UPDATE schedules SET last_status = ?, last_run_at = ?, updated_at = ? "
        "WHERE id = ? AND (last_run_at IS NULL OR last_run_at <= ?)",
        (status, due_at, now, schedule_id, due_at),
    )
    return True
