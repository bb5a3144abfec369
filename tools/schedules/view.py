"""What the schedule tools return: a task, a history record, and whether the daemon heard."""

from __future__ import annotations

from typing import Any

from gateway.scheduler import schedules_changed
from gateway.scheduling.cron import iso
from gateway.store import schedules
from gateway.store.schedules import RunRecord, ScheduleRow
from tools.base import ToolContext, ToolError

__all__ = ["MAX_ENABLED_PER_PERSONA", "find_task", "record_view", "synced", "task_view"]

MAX_ENABLED_PER_PERSONA = 100  # the same cap as schedule_manage's
_PREVIEW_CHARS = 200
# The history says "ok" where the table says "completed" (the reference's word).
_STATUS_WORDS = {"completed": "ok"}


async def find_task(ctx: ToolContext, task_id: Any) -> ScheduleRow:
    """The caller's schedule called ``task_id``; another persona's is reported as unknown."""
    if not isinstance(task_id, str) or not task_id.strip():
        raise ToolError("taskId is required: the task's slug; call list_schedules to see them")
    row = await ctx.db.read(schedules.get_task, ctx.persona.name, task_id.strip())
    if row is None:
        raise ToolError(f"no task {task_id!r} for this persona; call list_schedules to see your tasks")
    return row


def synced(ctx: ToolContext) -> dict[str, Any]:
    """``daemonSynced``: true when a running scheduler was woken to pick the change up."""
    if schedules_changed(ctx.db):
        return {"daemonSynced": True, "syncDetail": "the running scheduler picked the change up"}
    return {
        "daemonSynced": False,
        "syncDetail": "saved, but no scheduler is running on this database; it applies at the next start",
    }


def task_view(row: ScheduleRow, thread_id: int | None = None) -> dict[str, Any]:
    tz = row.timezone
    command = row.prompt if row.prompt is not None else f"(promptFile {row.prompt_file})"
    if len(command) > _PREVIEW_CHARS:
        command = command[:_PREVIEW_CHARS] + "…"
    view: dict[str, Any] = {
        "taskId": row.task_id,
        "name": row.label,
        "command": command,
        "cron": row.cron_expr,
        "runAt": iso(row.run_at, tz),
        "expiresAt": iso(row.expires_at, tz),
        "timezone": tz,
        "executor": row.executor,
        "notifyOn": row.notify_on,
        "notifyChat": row.notify_chat,
        "maxAttempts": row.max_attempts,
        "retryDelayMs": row.retry_delay_ms,
        "enabled": row.enabled,
        "cwd": row.cwd,
        "nextRunAt": iso(row.next_run_at, tz),
        "lastRunAt": iso(row.last_run_at, tz),
        "lastStatus": _STATUS_WORDS.get(row.last_status or "", row.last_status),
        "scheduleId": row.id,
    }
    if thread_id is not None:
        view["inThisThread"] = row.thread_id == thread_id
    return view


def record_view(record: RunRecord, tz: str) -> dict[str, Any]:
    view: dict[str, Any] = {
        "dueAt": iso(record.due_at, tz),
        "attempt": record.attempt,
        "status": _STATUS_WORDS.get(record.status, record.status),
        "startedAt": iso(record.started_at, tz),
        "finishedAt": iso(record.finished_at, tz),
        "error": record.error,
        "outputTail": record.output_tail,
        "runId": record.run_id,
    }
    if record.exit_code is not None or record.duration_ms is not None:
        view["exitCode"] = record.exit_code
        view["durationMs"] = record.duration_ms
    return view
