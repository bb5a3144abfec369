"""Checking the schedule tools' arguments: each check returns the stored value or raises a
:class:`~tools.base.ToolError` that says what was wrong and what to send instead."""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Any

from gateway.labels import check
from gateway.scheduling.cron import ScheduleError, iso, parse_run_at, validate_cron, zone
from gateway.scheduling.outcomes import split_target
from tools.base import ToolContext, ToolError
from tools.host.channel_send import TOOL as CHANNEL_SEND
from tools.workspace.roots import SHARED, WORKSPACE
from tools.workspace.sandbox import shell_mounts, shell_problem
from tools.workspace.shell import TOOL as BASH

__all__ = [
    "EXECUTORS",
    "MAX_COMMAND_CHARS",
    "MAX_NAME_CHARS",
    "NOTIFY_ON",
    "bounded_int",
    "command",
    "cwd",
    "executor",
    "name",
    "notify_chat",
    "notify_on",
    "slug",
    "time_arg",
    "timezone",
    "trigger",
    "when",
]

EXECUTORS = ("agent", "shell")
NOTIFY_ON = ("failure", "always", "never")
MAX_NAME_CHARS = 200
MAX_COMMAND_CHARS = 16_000
MAX_SLUG_CHARS = 48
MAX_TARGET_CHARS = 200
MAX_CWD_CHARS = 1000
_SLUG_JUNK = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    """A task id from a name: lower-case letters, digits and hyphens (``Nightly cleanup`` ->
    ``nightly-cleanup``); ``task`` when nothing is left."""
    base = _SLUG_JUNK.sub("-", text.lower()).strip("-")[:MAX_SLUG_CHARS].strip("-")
    return base or "task"


def _text(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"{key} must be a string")
    return value


def name(args: dict[str, Any]) -> str:
    value = (_text(args, "name") or "").strip()
    if not value:
        raise ToolError('name is required: a short human-readable label, e.g. "Nightly cleanup"')
    if len(value) > MAX_NAME_CHARS:
        raise ToolError(f"name is {len(value)} characters; keep it under {MAX_NAME_CHARS}")
    return value


def command(args: dict[str, Any]) -> str:
    value = _text(args, "command")
    if value is None or not value.strip():
        raise ToolError(
            "command is required: the prompt the persona runs (executor agent) or the shell command "
            "(executor shell)"
        )
    if len(value) > MAX_COMMAND_CHARS or "\x00" in value:
        raise ToolError(
            f"command must be at most {MAX_COMMAND_CHARS:,} characters without NUL bytes; for a long "
            "shell script write it to a file in /shared and run that"
        )
    return value


def trigger(args: dict[str, Any]) -> None:
    value = args.get("trigger")
    if value not in (None, "cron"):
        raise ToolError(
            "trigger must be 'cron': Talon has no session starts to trigger on; use cron or runAt"
        )


def timezone(args: dict[str, Any], default: str) -> str:
    value = _text(args, "timezone")
    if value is None:
        return default
    if len(value) > 64:
        raise ToolError("timezone must be an IANA name such as UTC or Europe/Berlin")
    try:
        zone(value.strip())
    except ScheduleError as exc:
        raise ToolError(str(exc)) from None
    return value.strip()


def time_arg(args: dict[str, Any], key: str, tz: str) -> float | None:
    """An ISO 8601 argument as epoch seconds (None when absent)."""
    value = _text(args, key)
    if value is None:
        return None
    if len(value) > 64:
        raise ToolError(
            f"{key} is not an ISO 8601 time; send e.g. '2030-01-31T09:00' or '2030-01-31T09:00:00+01:00'"
        )
    try:
        return parse_run_at(value, tz)
    except ScheduleError as exc:
        raise ToolError(str(exc).replace("runAt", key, 1)) from None


def when(
    ctx: ToolContext,
    cron_text: str | None,
    run_at: float | None,
    tz: str,
    now: float,
    *,
    judge_run_at: bool = True,
) -> tuple[str | None, float | None]:
    """(cron, runAt) checked: cron a 5-field expression, runAt not far in the past."""
    cron = None
    if cron_text is not None:
        if not isinstance(cron_text, str):
            raise ToolError("cron must be a string such as '0 2 * * *'")
        try:
            cron = validate_cron(cron_text)
        except ScheduleError as exc:
            raise ToolError(str(exc).replace("cronExpr", "cron")) from None
    if cron is None and run_at is None:
        raise ToolError(
            "send cron (5 fields, e.g. '0 9 * * 1-5') for a recurring task or runAt (ISO 8601, e.g. "
            "'2030-01-31T09:00') for a one-shot"
        )
    grace = ctx.settings.scheduler.grace_seconds
    if judge_run_at and run_at is not None and run_at < now - grace:
        raise ToolError(
            f"runAt {iso(run_at, tz)} is more than {grace:g} s in the past (it is now {iso(now, tz)}); "
            "send a time still to come"
        )
    return cron, run_at


def executor(ctx: ToolContext, value: Any) -> str:
    if value not in EXECUTORS:
        raise ToolError("executor must be 'agent' (a turn of this persona) or 'shell' (a sandboxed command)")
    if value == "shell":
        if not check(ctx.persona.capabilities, BASH, {}).allowed:
            raise ToolError(
                "executor 'shell' needs the label shell.exec:sandbox, which this persona does not hold; "
                "use executor 'agent' or ask the operator for the label"
            )
        problem = shell_problem()
        if problem is not None:
            raise ToolError(f"executor 'shell' cannot run on this host: {problem}")
    return str(value)


def notify_on(value: Any) -> str:
    if value not in NOTIFY_ON:
        raise ToolError("notifyOn must be 'failure' (default), 'always' or 'never'")
    return str(value)


def bounded_int(args: dict[str, Any], key: str, low: int, high: int) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ToolError(f"{key} must be a whole number from {low} to {high}")
    if not low <= int(value) <= high:
        raise ToolError(f"{key} must be from {low} to {high}; got {int(value)}")
    return int(value)


def notify_chat(ctx: ToolContext, value: Any, own_channel: str) -> str | None:
    """``channel`` or ``channel:chat`` that Talon may post to; a bare chat id (or a number) is a
    chat of this conversation's channel. None or "" means the schedule's own conversation."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ToolError("notifyChat must be a channel name, 'channel:chat' or a chat id")
    text = str(value).strip()
    if len(text) > MAX_TARGET_CHARS:
        raise ToolError(
            f"notifyChat is longer than {MAX_TARGET_CHARS} characters; send 'channel' or 'channel:chat'"
        )
    names = [c.name for c in ctx.settings.channels]
    if ":" in text:
        channel, chat = split_target(text)
    elif text in names:
        channel, chat = text, None
    else:
        channel, chat = own_channel, text
    settings = ctx.settings.channel(channel)
    if settings is None:
        raise ToolError(
            f"notifyChat names the channel {channel!r}, which is not configured; use one of "
            f"{', '.join(names) or '(none)'}, optionally as 'channel:chat'"
        )
    allowed = [str(c) for c in getattr(settings, "allowed_chats", []) or []]
    if chat is not None and allowed and chat not in allowed:
        raise ToolError(
            f"notifyChat: chat {chat!r} is not among the allowed chats of {channel!r}; use one of "
            f"{', '.join(allowed)}"
        )
    if chat is None and not getattr(settings, "home_chat", None):
        raise ToolError(
            f"notifyChat: channel {channel!r} has no home_chat; send 'channel:chat' with a chat id"
        )
    if channel != own_channel:
        if not check(ctx.persona.capabilities, CHANNEL_SEND, {"channelId": channel}).allowed:
            raise ToolError(
                f"notifyChat: this persona may not post into {channel!r} (it needs channel.send:{channel}); "
                "leave notifyChat out to be notified in this conversation"
            )
    return channel if chat is None else f"{channel}:{chat}"


def cwd(ctx: ToolContext, value: Any) -> str | None:
    """A shell task's directory as the sandbox sees it: an existing directory under
    /workspace (this conversation's) or /shared (the persona's, when its labels mount it)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_CWD_CHARS or "\x00" in value:
        raise ToolError(f"cwd must be a path of at most {MAX_CWD_CHARS} characters, such as /shared/reports")
    mounts = {m.target: m.source for m in shell_mounts(ctx)}
    roots = " and ".join(sorted(mounts))
    path = PurePosixPath(value.strip() if value.startswith("/") else f"{WORKSPACE}/{value.strip()}")
    if ".." in path.parts:
        raise ToolError(f"cwd must not contain '..'; send a directory under {roots}")
    root = next((r for r in (WORKSPACE, SHARED) if r in mounts and path.is_relative_to(r)), None)
    if root is None:
        raise ToolError(f"cwd {value!r} is outside the workspace; send a directory under {roots}")
    host = os.path.realpath(os.path.join(mounts[root], str(path.relative_to(root))))
    if not (host == mounts[root] or host.startswith(mounts[root].rstrip("/") + "/")):
        raise ToolError(f"cwd {value!r} leads outside the workspace; send a directory under {roots}")
    if not os.path.isdir(host):
        raise ToolError(f"cwd {value!r} is not an existing directory; create it first (under {roots})")
    return str(path)
