"""``create_schedule`` and ``update_schedule`` (``schedule.manage:own``).

A task runs in the conversation it was created in: a turn of the persona with ``command`` as
its prompt (``executor: agent``), or ``command`` in the persona's sandboxed shell with no model
call (``executor: shell``, which also needs ``shell.exec:sandbox``). Its ``taskId`` is a slug
of its first name, unique per persona and never changed.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, replace
from typing import Any

from gateway.scheduling.cron import ScheduleError, iso, next_run
from gateway.store import schedules
from gateway.store.schedules import ScheduleRow
from gateway.store.threads import get_thread
from tools.base import HostTool, ToolContext, ToolError
from tools.schedules import fields
from tools.schedules.view import MAX_ENABLED_PER_PERSONA, find_task, synced, task_view

__all__ = ["CREATE", "UPDATE"]

MAX_ATTEMPTS = 5
MIN_RETRY_MS, MAX_RETRY_MS = 1000, 300_000


@dataclass(frozen=True, slots=True)
class _Spec:
    """A task's settings as they will be stored (times in epoch seconds)."""

    label: str | None
    prompt: str | None
    prompt_file: str | None
    cron_expr: str | None
    run_at: float | None
    expires_at: float | None
    timezone: str
    executor: str
    notify_on: str
    notify_chat: str | None
    max_attempts: int
    retry_delay_ms: int
    enabled: bool
    cwd: str | None

    def columns(self, next_run_at: float | None) -> dict[str, Any]:
        return {
            "label": self.label,
            "prompt": self.prompt,
            "prompt_file": self.prompt_file,
            "cron_expr": self.cron_expr,
            "run_at": self.run_at,
            "expires_at": self.expires_at,
            "timezone": self.timezone,
            "executor": self.executor,
            "notify_on": self.notify_on,
            "notify_chat": self.notify_chat,
            "max_attempts": self.max_attempts,
            "retry_delay_ms": self.retry_delay_ms,
            "enabled": int(self.enabled),
            "cwd": self.cwd,
            "next_run_at": next_run_at,
        }


def _default_spec(ctx: ToolContext) -> _Spec:
    return _Spec(
        label=None,
        prompt=None,
        prompt_file=None,
        cron_expr=None,
        run_at=None,
        expires_at=None,
        timezone=ctx.settings.timezone,
        executor="agent",
        notify_on="failure",
        notify_chat=None,
        max_attempts=1,
        retry_delay_ms=30_000,
        enabled=True,
        cwd=None,
    )


def _row_spec(row: ScheduleRow) -> _Spec:
    return _Spec(
        label=row.label,
        prompt=row.prompt,
        prompt_file=row.prompt_file,
        cron_expr=row.cron_expr,
        run_at=row.run_at,
        expires_at=row.expires_at,
        timezone=row.timezone,
        executor=row.executor,
        notify_on=row.notify_on,
        notify_chat=row.notify_chat,
        max_attempts=row.max_attempts,
        retry_delay_ms=row.retry_delay_ms,
        enabled=row.enabled,
        cwd=row.cwd,
    )


async def _apply(ctx: ToolContext, spec: _Spec, args: dict[str, Any], now: float) -> _Spec:
    """``spec`` with the supplied arguments applied and checked; omitted ones are kept."""
    fields.trigger(args)
    changes: dict[str, Any] = {}
    if "name" in args:
        changes["label"] = fields.name(args)
    if "command" in args:
        changes["prompt"], changes["prompt_file"] = fields.command(args), None
    tz = fields.timezone(args, spec.timezone)
    changes["timezone"] = tz
    for key, column in (("runAt", "run_at"), ("expiresAt", "expires_at")):
        if key in args:
            changes[column] = fields.time_arg(args, key, tz)
    if "cron" in args:
        changes["cron_expr"] = args["cron"]
    if "executor" in args:
        changes["executor"] = fields.executor(ctx, args["executor"])
    if "notifyOn" in args:
        changes["notify_on"] = fields.notify_on(args["notifyOn"])
    if "notifyChat" in args:
        changes["notify_chat"] = fields.notify_chat(ctx, args["notifyChat"], await _own_channel(ctx))
    attempts = fields.bounded_int(args, "maxAttempts", 1, MAX_ATTEMPTS)
    if attempts is not None:
        changes["max_attempts"] = attempts
    delay = fields.bounded_int(args, "retryDelayMs", MIN_RETRY_MS, MAX_RETRY_MS)
    if delay is not None:
        changes["retry_delay_ms"] = delay
    if "enabled" in args:
        if not isinstance(args["enabled"], bool):
            raise ToolError("enabled must be true or false")
        changes["enabled"] = args["enabled"]
    if "cwd" in args:
        if args["cwd"] and changes.get("executor", spec.executor) != "shell":
            raise ToolError("cwd is only for executor 'shell'; leave it out for an agent task")
        changes["cwd"] = fields.cwd(ctx, args["cwd"])
    new = replace(spec, **changes)
    if _timing(args):
        # An old one-shot's time is only judged when it is set or the task is switched on.
        judge = "runAt" in args or args.get("enabled") is True or "taskId" not in args
        cron, run_at = fields.when(ctx, new.cron_expr, new.run_at, tz, now, judge_run_at=judge)
        new = replace(new, cron_expr=cron, run_at=run_at)
    return _consistent(ctx, new, args, now)


def _timing(args: dict[str, Any]) -> bool:
    return bool({"cron", "runAt", "timezone", "enabled"} & set(args)) or "taskId" not in args


def _consistent(ctx: ToolContext, spec: _Spec, args: dict[str, Any], now: float) -> _Spec:
    if spec.executor == "agent":
        spec = replace(spec, cwd=None)
    elif "executor" not in args:
        fields.executor(ctx, "shell")  # the label is still needed when a shell task changes
    if spec.prompt is None and spec.prompt_file is None:
        raise ToolError(
            "command is required: the prompt (executor agent) or the shell command (executor shell)"
        )
    if spec.expires_at is not None and ("expiresAt" in args or "taskId" not in args):
        if spec.expires_at <= now:
            raise ToolError(
                f"expiresAt {iso(spec.expires_at, spec.timezone)} has passed; send a later time or null"
            )
        if spec.run_at is not None and spec.expires_at <= spec.run_at:
            raise ToolError("expiresAt must come after runAt, or the task would never run")
    return spec


async def _own_channel(ctx: ToolContext) -> str:
    thread = await ctx.db.read(get_thread, ctx.thread_id)
    if thread is None:
        raise ToolError("this conversation is not known to the store; schedules need one")
    return thread.channel


def _next_run(spec: _Spec, now: float) -> float | None:
    if not spec.enabled:
        return None
    if spec.run_at is not None:
        return spec.run_at
    assert spec.cron_expr is not None
    try:
        at = next_run(spec.cron_expr, spec.timezone, now)
    except ScheduleError as exc:
        raise ToolError(str(exc).replace("cronExpr", "cron")) from None
    if spec.expires_at is not None and at >= spec.expires_at:
        raise ToolError(
            f"the next run ({iso(at, spec.timezone)}) would be after expiresAt; send a later expiresAt"
        )
    return at


async def _room_for_one_more(ctx: ToolContext) -> None:
    if await ctx.db.read(schedules.count_enabled, ctx.persona.name) >= MAX_ENABLED_PER_PERSONA:
        raise ToolError(
            f"this persona already has {MAX_ENABLED_PER_PERSONA} enabled tasks; cancel some "
            "(cancel_schedule) first"
        )


async def create(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """``create_schedule``."""
    now = time.time()
    label = fields.name(args)
    fields.command(args)
    spec = await _apply(ctx, _default_spec(ctx), args, now)
    if spec.enabled:
        await _room_for_one_more(ctx)
    next_at = _next_run(spec, now)
    base = fields.slug(label)

    def insert(conn: sqlite3.Connection) -> ScheduleRow:
        task_id = schedules.free_task_id(conn, ctx.persona.name, base)
        if task_id is None:
            raise ToolError(f"too many tasks are named like {label!r}; choose another name")
        columns = spec.columns(next_at)
        columns.pop("next_run_at")
        columns["enabled"] = spec.enabled
        return schedules.create_schedule(
            conn,
            persona=ctx.persona.name,
            thread_id=ctx.thread_id,
            next_run_at=next_at,
            now=now,
            task_id=task_id,
            **columns,
        )

    row = await ctx.db.run_transaction(insert)
    return {**task_view(row, ctx.thread_id), **synced(ctx)}


async def update(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """``update_schedule``: only the supplied fields change; ``taskId`` never does."""
    now = time.time()
    row = await find_task(ctx, args.get("taskId"))
    if set(args) <= {"taskId"}:
        raise ToolError(
            "send at least one field to change: name, command, cron, runAt, expiresAt, executor, "
            "notifyOn, notifyChat, maxAttempts, retryDelayMs, enabled, cwd, timezone"
        )
    spec = await _apply(ctx, _row_spec(row), args, now)
    if spec.enabled and not row.enabled:
        await _room_for_one_more(ctx)
    columns = spec.columns(row.next_run_at)
    if _timing(args) or {"expiresAt"} & set(args):
        columns["next_run_at"] = _next_run(spec, now)
    updated = await ctx.db.run_transaction(
        schedules.update_schedule, row.id, ctx.persona.name, columns, now=now
    )
    if updated is None:
        raise ToolError(f"task {row.task_id!r} was removed meanwhile; call list_schedules")
    return {**task_view(updated, ctx.thread_id), **synced(ctx)}


_TIME = "ISO 8601; without an offset it is read in the task's timezone (talon.yaml's by default)."
_COMMON: dict[str, Any] = {
    "name": {"type": "string", "description": 'Human-readable label (e.g. "Nightly cleanup").'},
    "command": {
        "type": "string",
        "description": "The prompt this persona runs (executor agent) or the shell command (executor shell).",
    },
    "cron": {
        "type": "string",
        "description": "Five-field cron, e.g. '0 2 * * *'. Required unless runAt is set.",
    },
    "runAt": {
        "type": ["string", "null"],
        "description": "One-shot time: fires once at or after it, then disables itself. " + _TIME,
    },
    "expiresAt": {"type": ["string", "null"], "description": "After this the task is disabled. " + _TIME},
    "timezone": {"type": "string", "description": "IANA timezone for cron and times (Talon addition)."},
    "executor": {
        "type": "string",
        "enum": list(fields.EXECUTORS),
        "description": "agent (default): a turn of this persona; shell: the sandboxed bash, no model "
        "(needs shell.exec:sandbox).",
    },
    "trigger": {"type": "string", "enum": ["cron"], "description": "Only cron: Talon has no session starts."},
    "notifyOn": {"type": "string", "enum": list(fields.NOTIFY_ON), "description": "Default failure."},
    "notifyChat": {
        "type": ["string", "integer", "null"],
        "description": "Where notifications go: a configured channel (its home_chat), 'channel:chat', or a "
        "chat id of this channel. Default: this conversation.",
    },
    "maxAttempts": {
        "type": "integer",
        "description": "Attempts per run of an agent task, 1-5 (default 1). Only transient failures retry "
        "(provider 429/5xx/network, the turn's time limit).",
    },
    "retryDelayMs": {
        "type": "integer",
        "description": "First retry delay, 1000-300000 ms (default 30000); doubles per attempt, at most 5 min.",
    },
    "enabled": {"type": "boolean", "description": "Default true."},
    "cwd": {
        "type": ["string", "null"],
        "description": "executor shell: an existing directory under /workspace or /shared to run in.",
    },
}

CREATE = HostTool(
    mcp_name="create_schedule",
    internal_name="schedule.create",
    prefix="schedule.manage",
    description=(
        "Create a recurring (cron) or one-shot (runAt) task of this persona that runs in this conversation "
        "and survives restarts: a turn with command as the prompt, or with executor shell the command in "
        "the sandbox (/workspace is this conversation's folder, /shared the persona's). Returns the task "
        "(taskId is a slug of name, unique and permanent) plus daemonSynced and syncDetail: false means "
        "the change applies when the daemon next starts. Adapted for Talon: notifications post into a "
        "chat channel (notifyChat), cwd is a workspace folder, timezone comes from talon.yaml."
    ),
    input_schema={
        "type": "object",
        "properties": _COMMON,
        "required": ["name", "command"],
        "additionalProperties": False,
    },
    handler=create,
)

UPDATE = HostTool(
    mcp_name="update_schedule",
    internal_name="schedule.update",
    prefix="schedule.manage",
    description=(
        "Change only the supplied fields of one of this persona's tasks, keeping the rest; taskId never "
        "changes, even with a new name. runAt, expiresAt, notifyChat or cwd null clears it. Returns the "
        "task plus daemonSynced and syncDetail."
    ),
    input_schema={
        "type": "object",
        "properties": {"taskId": {"type": "string", "description": "The task's slug."}, **_COMMON},
        "required": ["taskId"],
        "additionalProperties": False,
    },
    handler=update,
)
