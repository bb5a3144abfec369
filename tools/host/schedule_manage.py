"""``schedule_manage``: durable cron and one-shot schedules owned by the calling persona.

A schedule is created in the caller's thread: that is where it runs and where its result
is delivered. A persona only ever sees and changes its own schedules; another persona's id
is reported as unknown.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.scheduler import schedules_changed
from gateway.scheduling.cron import ScheduleError, iso, next_run, parse_run_at, validate_cron, zone
from gateway.store import schedules
from gateway.store.schedules import ScheduleRow
from tools.base import HostTool, ToolContext, ToolError

ACTIONS = ("create", "update", "cancel", "delete", "list")
MAX_ENABLED_PER_PERSONA = 100
MAX_PROMPT_CHARS = 16_000
MAX_LABEL_CHARS = 200
_PREVIEW_CHARS = 200
_ARGS = frozenset(
    {"action", "scheduleId", "cronExpr", "runAt", "timezone", "label", "prompt", "promptFile", "enabled"}
)


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Dispatch one ``schedule_manage`` call."""
    args = {k: v for k, v in args.items() if v is not None}
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise ToolError(f"unknown argument(s) {', '.join(unknown)}; accepted: {', '.join(sorted(_ARGS))}")
    action = args.get("action")
    if action is None:
        raise ToolError(f"action is required: one of {', '.join(ACTIONS)}")
    if action not in ACTIONS:
        raise ToolError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    now = time.time()
    try:
        if action == "list":
            rows = await ctx.db.read(schedules.persona_schedules, ctx.persona.name)
            return {"schedules": [_view(row, ctx.thread_id) for row in rows]}
        if action == "create":
            result = await _create(ctx, args, now)
        else:
            result = await _change(ctx, action, args, now)
    except ScheduleError as exc:
        raise ToolError(str(exc)) from None
    schedules_changed(ctx.db)
    return result


async def _create(ctx: ToolContext, args: dict[str, Any], now: float) -> dict[str, Any]:
    if "scheduleId" in args or "enabled" in args:
        raise ToolError("create takes no scheduleId or enabled; to change a schedule use action 'update'")
    tz = _timezone(args, ctx.settings.timezone)
    cron_expr, run_at = _when(args, tz, now, required=True)
    prompt, prompt_file = _prompt(ctx, args)
    label = _label(args)
    if await ctx.db.read(schedules.count_enabled, ctx.persona.name) >= MAX_ENABLED_PER_PERSONA:
        raise ToolError(
            f"this persona already has {MAX_ENABLED_PER_PERSONA} active schedules; cancel or delete some first"
        )
    next_at = next_run(cron_expr, tz, now) if cron_expr else run_at
    row = await ctx.db.run_transaction(
        schedules.create_schedule,
        persona=ctx.persona.name,
        thread_id=ctx.thread_id,
        label=label,
        cron_expr=cron_expr,
        run_at=run_at,
        timezone=tz,
        prompt=prompt,
        prompt_file=prompt_file,
        next_run_at=next_at,
        now=now,
    )
    return _view(row, ctx.thread_id)


async def _change(ctx: ToolContext, action: str, args: dict[str, Any], now: float) -> dict[str, Any]:
    schedule_id = _string(args, "scheduleId")
    if not schedule_id:
        raise ToolError(f"{action} needs scheduleId; call action 'list' to see your schedules")
    if action != "update":
        extra = sorted(set(args) - {"action", "scheduleId"})
        if extra:
            raise ToolError(
                f"{action} takes only scheduleId; use action 'update' to change {', '.join(extra)}"
            )
    row = await ctx.db.read(schedules.get_schedule, schedule_id, ctx.persona.name)
    if row is None:
        raise ToolError(
            f"no schedule {schedule_id!r} for this persona; call action 'list' to see your schedules"
        )
    if action == "delete":
        return {
            "scheduleId": schedule_id,
            "deleted": await ctx.db.run_transaction(schedules.delete_schedule, schedule_id, ctx.persona.name),
        }
    if action == "cancel":
        changes: dict[str, Any] = {"enabled": 0, "next_run_at": None}
    else:
        changes = _update_changes(ctx, row, args, now)
    updated = await ctx.db.run_transaction(
        schedules.update_schedule, schedule_id, ctx.persona.name, changes, now=now
    )
    if updated is None:
        raise ToolError(f"no schedule {schedule_id!r} for this persona; it was deleted meanwhile")
    return _view(updated, ctx.thread_id)


def _update_changes(ctx: ToolContext, row: ScheduleRow, args: dict[str, Any], now: float) -> dict[str, Any]:
    if set(args) <= {"action", "scheduleId"}:
        raise ToolError(
            "update needs at least one of cronExpr, runAt, timezone, label, prompt, promptFile, enabled"
        )
    changes: dict[str, Any] = {}
    tz = _timezone(args, row.timezone)
    if "timezone" in args:
        changes["timezone"] = tz
    cron_expr, run_at = _when(args, tz, now, required=False)
    if cron_expr is not None or run_at is not None:
        changes["cron_expr"], changes["run_at"] = cron_expr, run_at
    else:
        cron_expr, run_at = row.cron_expr, row.run_at
    if "prompt" in args or "promptFile" in args:
        changes["prompt"], changes["prompt_file"] = _prompt(ctx, args)
    if "label" in args:
        changes["label"] = _label(args)
    enabled = row.enabled
    if "enabled" in args:
        if not isinstance(args["enabled"], bool):
            raise ToolError("enabled must be true or false")
        enabled = args["enabled"]
        changes["enabled"] = int(enabled)
    timing_changed = {"cron_expr", "run_at", "timezone", "enabled"} & set(changes)
    if not enabled:
        changes["next_run_at"] = None
    elif timing_changed:
        if cron_expr:
            changes["next_run_at"] = next_run(cron_expr, tz, now)
        elif run_at is not None and run_at > now:
            changes["next_run_at"] = run_at
        else:
            raise ToolError("this one-shot schedule's runAt has passed; send a new runAt (or a cronExpr)")
    return changes


def _when(args: dict[str, Any], tz: str, now: float, *, required: bool) -> tuple[str | None, float | None]:
    cron_text, run_text = _string(args, "cronExpr"), _string(args, "runAt")
    if cron_text is not None and run_text is not None:
        raise ToolError("send cronExpr (repeating) or runAt (once), not both")
    if cron_text is not None:
        return validate_cron(cron_text), None
    if run_text is not None:
        run_at = parse_run_at(run_text, tz)
        if run_at <= now:
            raise ToolError(
                f"runAt {run_text!r} ({iso(run_at, tz)}) is in the past; it is now {iso(now, tz)}"
            )
        return None, run_at
    if required:
        raise ToolError(
            "create needs cronExpr (5-field cron, e.g. '0 9 * * 1-5') or runAt (ISO 8601, e.g. '2030-01-31T09:00')"
        )
    return None, None


def _prompt(ctx: ToolContext, args: dict[str, Any]) -> tuple[str | None, str | None]:
    prompt, alias = _string(args, "prompt"), _string(args, "promptFile")
    if prompt is not None and alias is not None:
        raise ToolError("send prompt or promptFile, not both")
    if prompt is not None:
        if not prompt.strip():
            raise ToolError("prompt is empty; write what the scheduled run should do")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ToolError(
                f"prompt is {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS} (use a promptFile)"
            )
        return prompt, None
    if alias is not None:
        if ctx.persona.prompt_alias(alias) is None:
            available = _aliases(ctx)
            listing = ", ".join(available) if available else "none (this persona has no prompts/ folder)"
            raise ToolError(
                f"promptFile {alias!r} is not a prompt alias of this persona; send a basename without "
                f"path or '..', one of: {listing}"
            )
        return None, alias.removesuffix(".md")
    raise ToolError("send prompt (the text to run) or promptFile (a prompt alias)")


def _aliases(ctx: ToolContext) -> list[str]:
    folder = ctx.persona.path / "prompts"
    return sorted(p.stem for p in folder.glob("*.md") if p.is_file()) if folder.is_dir() else []


def _label(args: dict[str, Any]) -> str | None:
    label = _string(args, "label")
    if label is None:
        return None
    if len(label) > MAX_LABEL_CHARS:
        raise ToolError(f"label is {len(label)} characters; keep it under {MAX_LABEL_CHARS}")
    return label.strip() or None


def _timezone(args: dict[str, Any], default: str) -> str:
    name = _string(args, "timezone")
    if name is None:
        return default
    zone(name.strip())
    return name.strip()


def _string(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string")
    return value


def _view(row: ScheduleRow, thread_id: int) -> dict[str, Any]:
    tz = row.timezone
    prompt = row.prompt
    if prompt and len(prompt) > _PREVIEW_CHARS:
        prompt = prompt[:_PREVIEW_CHARS] + "…"
    return {
        "scheduleId": row.id,
        "label": row.label,
        "cronExpr": row.cron_expr,
        "runAt": iso(row.run_at, tz),
        "timezone": tz,
        "prompt": prompt,
        "promptFile": row.prompt_file,
        "enabled": row.enabled,
        "nextRunAt": iso(row.next_run_at, tz),
        "lastRunAt": iso(row.last_run_at, tz),
        "lastStatus": row.last_status,
        "inThisThread": row.thread_id == thread_id,
    }


TOOL = HostTool(
    mcp_name="schedule_manage",
    internal_name="schedule.manage",
    prefix="schedule.manage",
    description=(
        "Create, update, cancel (disable), delete or list this persona's durable schedules. A schedule "
        "runs a prompt in this conversation on a 5-field cron (in its timezone) or once at runAt, and "
        "survives restarts. Returns the schedule with nextRunAt."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "scheduleId": {"type": "string", "description": "Required for update, cancel and delete."},
            "cronExpr": {
                "type": "string",
                "description": "5-field cron: minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5'. "
                "Required for create unless runAt is given.",
            },
            "runAt": {
                "type": "string",
                "description": "One-shot time, ISO 8601. Without an offset it is read in the schedule's timezone.",
            },
            "timezone": {
                "type": "string",
                "description": "IANA timezone for cronExpr and runAt, e.g. Europe/Berlin. Defaults to the server's.",
            },
            "label": {"type": "string", "description": "Short human-readable name."},
            "prompt": {"type": "string", "description": "What to do when it runs. Not with promptFile."},
            "promptFile": {
                "type": "string",
                "description": "A prompt alias of this persona (basename in prompts/, e.g. 'daily-report'). Not with prompt.",
            },
            "enabled": {
                "type": "boolean",
                "description": "update only: true re-enables a cancelled schedule.",
            },
        },
        "required": ["action"],
        "additionalProperties": False,
    },
    handler=handle,
)
