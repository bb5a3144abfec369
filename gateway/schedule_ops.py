"""What an operator does to schedules (``talon schedules``, the web console): list them, pause,
resume, run one now, read one's history.

Like :mod:`gateway.dead_letters`: while the daemon runs these go through its control socket
(the ``schedules`` op, served here) and its scheduler is woken at once; while it is stopped the
CLI applies them to the database under the data-dir lock, and the next start acts on them.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict
from typing import Any

from gateway.ndjson_socket import Reply
from gateway.scheduler import list_schedules, schedules_changed
from gateway.scheduling.cron import iso
from gateway.store import schedules
from gateway.store.db import Database

__all__ = ["ACTIONS", "CHANGES", "HISTORY_SHOWN", "OP", "ScheduleOps", "manage"]

OP = "schedules"
CHANGES = ("pause", "resume", "run")
ACTIONS = ("list", "history", *CHANGES)
HISTORY_SHOWN = 50


def _change(conn: sqlite3.Connection, schedule_id: str, action: str, now: float) -> str | None:
    """Apply ``action``; returns why it cannot be done, or None when it was."""
    row = schedules.get_schedule(conn, schedule_id)
    if row is None:
        return f"no schedule {schedule_id!r}; `talon schedules` lists them"
    if action == "pause":
        changes: dict[str, Any] = {"enabled": 0}
    elif action == "resume":
        # No next run: the scheduler computes one from now, so a long pause fires nothing it missed.
        changes = {"enabled": 1, "next_run_at": None}
    else:
        if not row.enabled:
            return f"schedule {schedule_id} is paused; resume it first"
        changes = {"next_run_at": now}
    schedules.update_schedule(conn, schedule_id, row.persona, changes, now=now)
    return None


async def manage(db: Database, action: str, schedule_id: str | None) -> dict[str, Any]:
    """Apply ``action`` and say what happened: ``{"ok": ...}`` with ``schedules`` for ``list``,
    ``runs`` for ``history``, or ``error`` saying what to send instead."""
    if action == "list":
        return {"ok": True, "schedules": await list_schedules(db)}
    if action not in ACTIONS:
        return {"ok": False, "error": f"unknown action {action!r}; use one of {', '.join(ACTIONS)}"}
    if not isinstance(schedule_id, str) or not schedule_id:
        return {"ok": False, "error": f"{action} needs the schedule's id (as `talon schedules` lists it)"}
    if action == "history":
        row = await db.read(schedules.get_schedule, schedule_id)
        if row is None:
            return {"ok": False, "error": f"no schedule {schedule_id!r}; `talon schedules` lists them"}
        runs = await db.read(schedules.run_history, schedule_id, HISTORY_SHOWN)
        return {
            "ok": True,
            "runs": [{**asdict(r), "due": iso(r.due_at, row.timezone)} for r in runs],
        }
    error = await db.run_transaction(_change, schedule_id, action, time.time())
    if error is not None:
        return {"ok": False, "error": error}
    schedules_changed(db)
    return {"ok": True}


class ScheduleOps:
    """Serves the control socket's ``schedules`` op."""

    def __init__(self, db: Database):
        self.db = db

    async def handle_control(self, request: dict[str, Any], reply: Reply) -> bool:
        if request.get("op") != OP:
            return False
        result = await manage(self.db, str(request.get("action", "list")), request.get("id"))
        await reply({"type": "done", **result})
        return True
