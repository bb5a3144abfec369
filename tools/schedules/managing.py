"""``list_schedules``, ``get_schedule_history`` and ``cancel_schedule`` (``schedule.manage:own``).

They see every schedule of the calling persona, also those made with ``schedule_manage``
(whose taskId is their scheduleId), and nothing of other personas.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.scheduling.cron import ScheduleError, iso, next_run
from gateway.store import schedules
from tools.base import HostTool, ToolContext, ToolError
from tools.schedules.fields import bounded_int
from tools.schedules.view import MAX_ENABLED_PER_PERSONA, find_task, record_view, synced, task_view

__all__ = ["CANCEL", "HISTORY", "LIST"]

DEFAULT_HISTORY, MAX_HISTORY = 10, 50


async def list_tasks(ctx: ToolContext, args: dict[str, Any]) -> list[dict[str, Any]]:
    rows = await ctx.db.read(schedules.persona_schedules, ctx.persona.name)
    return [task_view(row, ctx.thread_id) for row in rows]


async def history(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    row = await find_task(ctx, args.get("taskId"))
    limit = bounded_int(args, "limit", 1, MAX_HISTORY) or DEFAULT_HISTORY
    records = await ctx.db.read(schedules.run_history, row.id, limit)
    return {"taskId": row.task_id, "records": [record_view(r, row.timezone) for r in records]}


async def cancel(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    row = await find_task(ctx, args.get("taskId"))
    for flag in ("enable", "permanent"):
        if args.get(flag) is not None and not isinstance(args[flag], bool):
            raise ToolError(f"{flag} must be true or false")
    now = time.time()
    if args.get("permanent"):
        removed = await ctx.db.run_transaction(schedules.delete_schedule, row.id, ctx.persona.name)
        return {"taskId": row.task_id, "removed": removed, **synced(ctx)}
    if args.get("enable"):
        changes = {"enabled": 1, "next_run_at": _next_when_enabled(ctx, row, now)}
        if not row.enabled and (
            await ctx.db.read(schedules.count_enabled, ctx.persona.name) >= MAX_ENABLED_PER_PERSONA
        ):
            raise ToolError(
                f"this persona already has {MAX_ENABLED_PER_PERSONA} enabled tasks; cancel some first"
            )
    else:
        changes = {"enabled": 0, "next_run_at": None}
    updated = await ctx.db.run_transaction(
        schedules.update_schedule, row.id, ctx.persona.name, changes, now=now
    )
    if updated is None:
        raise ToolError(f"task {row.task_id!r} was removed meanwhile; call list_schedules")
    return {**task_view(updated, ctx.thread_id), **synced(ctx)}


def _next_when_enabled(ctx: ToolContext, row: schedules.ScheduleRow, now: float) -> float:
    if row.expires_at is not None and row.expires_at <= now:
        raise ToolError(
            f"task {row.task_id!r} expired at {iso(row.expires_at, row.timezone)}; give it a later expiresAt "
            "with update_schedule first"
        )
    if row.run_at is not None:
        if row.run_at < now - ctx.settings.scheduler.grace_seconds:
            raise ToolError(
                f"this one-shot task's runAt ({iso(row.run_at, row.timezone)}) has passed; send a new runAt "
                "with update_schedule (and enabled true)"
            )
        return row.run_at
    if row.cron_expr is None:
        raise ToolError("this task has neither cron nor runAt; set one with update_schedule")
    try:
        return next_run(row.cron_expr, row.timezone, now)
    except ScheduleError as exc:
        raise ToolError(str(exc)) from None


LIST = HostTool(
    mcp_name="list_schedules",
    internal_name="schedule.list",
    prefix="schedule.manage",
    description=(
        "List this persona's scheduled tasks (also those made with schedule_manage) with taskId, cron, "
        "runAt, expiresAt, enabled, executor, notify settings, next and last run. Returns a JSON array."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    handler=list_tasks,
)

HISTORY = HostTool(
    mcp_name="get_schedule_history",
    internal_name="schedule.history",
    prefix="schedule.manage",
    description=(
        "Recent runs of one task, oldest first: one record per attempt with dueAt, attempt, status "
        "(queued, running, ok, failed, retrying, skipped, canceled), startedAt, finishedAt, error, the "
        "output's tail, and a shell task's exitCode and durationMs."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "taskId": {"type": "string", "description": "The task's slug."},
            "limit": {
                "type": "integer",
                "description": f"Records to return, default {DEFAULT_HISTORY}, max {MAX_HISTORY}.",
            },
        },
        "required": ["taskId"],
        "additionalProperties": False,
    },
    handler=history,
)

CANCEL = HostTool(
    mcp_name="cancel_schedule",
    internal_name="schedule.cancel",
    prefix="schedule.manage",
    description=(
        "Disable one of this persona's tasks (default), re-enable it (enable: true), or remove it and its "
        "history for good (permanent: true, which wins over enable). Returns daemonSynced and syncDetail."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "taskId": {"type": "string", "description": "The task's slug."},
            "enable": {"type": "boolean", "description": "Re-enable a disabled task."},
            "permanent": {"type": "boolean", "description": "Remove it entirely."},
        },
        "required": ["taskId"],
        "additionalProperties": False,
    },
    handler=cancel,
)
