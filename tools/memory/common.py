"""What the memory tools share: which scopes a call reaches and the limits.

A turn's ``memory.access`` labels open scopes (:data:`gateway.labels.MEMORY_SCOPES`):
``thread`` this thread's memory, ``user`` also the memory of the sender the turn answers (on
this channel, across the persona's threads), ``persona`` also the persona's own, shared with
everyone who talks to it. :func:`gateway.memory_scopes.memory_keys` says whose memory each
open scope means for the calling turn; this module turns a call's ``scope`` argument into
those keys or a refusal the model can act on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from gateway.memory_scopes import allowed_scopes, memory_keys
from gateway.store.facts import CATEGORIES, SCOPES, Scope, ScopeKey
from gateway.store.threads import get_thread
from tools.base import ToolContext, ToolError

MAX_FACT_CHARS = 4000
MAX_HOT_CHARS = 2000
MAX_EVIDENCE_CHARS = 500
MAX_FACTS_PER_SCOPE = 5000
MAX_RESULTS = 50
RESULT_CHARS = 1000

SCOPE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "enum": list(SCOPES),
    "description": "thread: this conversation; user: the person you are answering, in every conversation "
    "with you on this channel, never shown to anyone else; persona: shared with everyone who talks to you. "
    "Your labels decide which you may use.",
}
CATEGORY_SCHEMA: dict[str, Any] = {"type": "string", "enum": list(CATEGORIES)}


async def turn_keys(ctx: ToolContext) -> dict[Scope, ScopeKey]:
    """Whose memory each scope open to this call means (no ``user`` without one sender)."""
    thread = await ctx.db.read(get_thread, ctx.thread_id)
    channel = thread.channel if thread is not None else ""
    return memory_keys(
        ctx.persona.capabilities,
        persona=ctx.persona.name,
        thread_id=ctx.thread_id,
        channel=channel,
        sender_id=ctx.sender_id,
    )


def pick(keys: dict[Scope, ScopeKey], scope: str, ctx: ToolContext) -> ScopeKey:
    """The key of ``scope``, or a :class:`ToolError` saying why this call cannot use it."""
    key = keys.get(scope)  # type: ignore[call-overload]
    if key is not None:
        return key
    usable = ", ".join(keys) or "none"
    if scope == "user" and "user" in allowed_scopes(ctx.persona.capabilities):
        raise ToolError(
            "scope 'user' needs a turn that answers one person; this one answers several people or "
            f"none (a schedule, a session). Use one of: {usable}"
        )
    raise ToolError(f"scope {scope!r} is not open to this persona; its memory.access labels allow: {usable}")


def bounded_text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{what} is required: a non-empty string")
    if len(value) > limit:
        raise ToolError(f"{what} is {len(value)} characters; keep it under {limit}")
    return value.strip()


def category(value: Any, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise ToolError(f"category is required for a fact: one of {', '.join(CATEGORIES)}")
        return None
    if value not in CATEGORIES:
        raise ToolError(f"category must be one of {', '.join(CATEGORIES)}")
    return str(value)


def when(ts: float, ctx: ToolContext) -> str:
    return datetime.fromtimestamp(ts, ZoneInfo(ctx.settings.timezone)).isoformat(timespec="seconds")


def since(value: Any, ctx: ToolContext) -> float | None:
    """An ISO date or date-time as a timestamp (a naive one in the configured time zone)."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        raise ToolError(
            "since must be an ISO date or date-time, e.g. 2026-11-30 or 2026-11-30T09:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(ctx.settings.timezone))
    return moment.timestamp()
