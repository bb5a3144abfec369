"""What the ``chat.ask`` tools share: who may answer, the no-human decline, the wait itself."""

from __future__ import annotations

from typing import Any

from gateway.interactions.kinds import asked_for
from tools.base import ToolContext, ToolError

__all__ = ["DEFAULT_TIMEOUT", "MAX_TIMEOUT", "answerers_for", "ask_humans"]

DEFAULT_TIMEOUT = 900.0
MAX_TIMEOUT = 86_400.0
NO_HUMAN = {
    "action": "decline",
    "reason": "no human can answer in this run (a schedule, background job or child agent); go on without asking",
}


def answerers_for(ctx: ToolContext, setting: str | tuple[str, ...]) -> tuple[str, ...] | None:
    """The user ids who may answer (None: anyone in the chat) for an ``asker | anyone | [ids]`` setting.

    ``asker`` is the one sender the turn answers; a turn answering several senders lets any of
    the chat answer."""
    if setting == "anyone":
        return None
    if setting == "asker":
        return (ctx.sender_id,) if ctx.sender_id else None
    return tuple(setting)


async def ask_humans(ctx: ToolContext, kind: str, spec: dict[str, Any], timeout: float | None) -> Any:
    """Post the interaction and wait for its answer: the tool's result."""
    if not ctx.interactive or ctx.root_run_id is not None or ctx.depth > 0:
        return dict(NO_HUMAN)
    services = ctx.require_services("asking the chat needs the running daemon")
    service = getattr(services, "interactions", None)
    if service is None:
        raise ToolError("asking the chat is not available in this run")
    wait = float(timeout) if timeout is not None else DEFAULT_TIMEOUT
    answerers = answerers_for(ctx, ctx.persona.answerers)
    row = await service.ask(ctx.thread_id, ctx.run_id, ctx.call_id, asked_for(kind, spec, answerers, wait))
    if row.state == "answered":
        return row.answer
    return {"action": "timeout", "message": f"nobody answered within {wait:g} seconds"}
