"""What the self-inspection tools share: which run a ``session`` names, a run's events, and
the ``where`` filter.

The reference's "session" is a Talon run (one turn, or a child's run): ``latest`` is the
persona's newest traced run before this one, ``current``/``self`` this run (its events so far,
not yet written), and a number a run id. A persona reaches only its own runs: another's run id
is answered like one that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gateway.store.traces import EventRow, RunInfo, get_run, persona_runs, run_events
from tools.base import ToolContext, ToolError

__all__ = [
    "EVENT_KINDS",
    "KINDS_SCHEMA",
    "SESSION_SCHEMA",
    "WHERE_SCHEMA",
    "check_where",
    "matches",
    "resolve_run",
    "run_trace",
]

EVENT_KINDS = ("model_call", "tool_call", "phase", "budget", "child")
MAX_WHERE_KEYS = 10
MAX_PATH_SEGMENTS = 8
MAX_PATH_CHARS = 200
_FORBIDDEN_SEGMENTS = frozenset({"__proto__", "constructor", "prototype"})

SESSION_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": 32,
    "description": "Which run (Talon's runs are the reference's sessions): a run id, 'latest' (default: "
    "this persona's newest traced run before this one), or 'current'/'self' (this run so far). "
    "Only this persona's runs.",
}
KINDS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "enum": list(EVENT_KINDS)},
    "maxItems": len(EVENT_KINDS),
    "description": "Only events of these kinds: model_call, tool_call, phase (turn_started, turn_ended), "
    "budget (a budget ran out), child (a child agent started or ended).",
}
WHERE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": MAX_WHERE_KEYS,
    "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
    "description": "Exact-match AND filter from dotted event paths to scalars, e.g. "
    '{"payload.decision": "refused"} or {"error_class": "timeout"}. Paths: run_id, seq, kind, name, '
    "at, duration_ms, error_class, payload.<key>...; __proto__, constructor and prototype are refused.",
}


async def resolve_run(ctx: ToolContext, session: Any) -> tuple[int, bool]:
    """(run id, whether it is this run) for ``session``; a :class:`ToolError` when the persona
    has no such run."""
    name = "latest" if session in (None, "") else str(session).strip().lower()
    if name in ("current", "self"):
        if ctx.run_id is None:
            raise ToolError("this call has no run of its own; pass a run id or 'latest'")
        return ctx.run_id, True
    if name == "latest":
        found = await ctx.db.read(persona_runs, ctx.persona.name, limit=1, exclude=ctx.run_id)
        if not found:
            raise ToolError("this persona has no earlier traced run yet; use session 'current' for this one")
        return found[0], False
    if not name.isdigit():
        raise ToolError(
            f"session must be a run id (digits), 'latest', 'current' or 'self', not {name[:32]!r}"
        )
    run_id = int(name)
    info = await ctx.db.read(get_run, run_id)
    if info is None or info.persona != ctx.persona.name:
        raise ToolError(f"no run {run_id} among this persona's runs; 'latest' names the newest one")
    return run_id, run_id == ctx.run_id


async def run_trace(ctx: ToolContext, run_id: int, current: bool) -> tuple[RunInfo | None, list[EventRow]]:
    """The run's row and its events in order: written ones, then (for this run) those still buffered."""

    def read(conn: Any) -> tuple[RunInfo | None, list[EventRow]]:
        return get_run(conn, run_id), list(run_events(conn, run_id))

    info, events = await ctx.db.read(read)
    if current and ctx.trace is not None:
        events += ctx.trace.buffered()
    return info, events


def check_where(where: Any) -> list[tuple[list[str], Any]]:
    """``where`` as (path segments, value) pairs, or a :class:`ToolError` saying what to fix."""
    if where in (None, {}):
        return []
    if not isinstance(where, Mapping) or len(where) > MAX_WHERE_KEYS:
        raise ToolError(f"where must be an object of at most {MAX_WHERE_KEYS} dotted paths to scalars")
    checked = []
    for path, value in where.items():
        if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
            raise ToolError(f"where: each path is a dotted name of at most {MAX_PATH_CHARS} characters")
        segments = path.split(".")
        if len(segments) > MAX_PATH_SEGMENTS or not all(segments):
            raise ToolError(
                f"where: {path[:60]!r} must be at most {MAX_PATH_SEGMENTS} non-empty segments joined by '.'"
            )
        bad = _FORBIDDEN_SEGMENTS.intersection(segments)
        if bad:
            raise ToolError(f"where: the path segment {sorted(bad)[0]!r} is not allowed")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ToolError(f"where: {path[:60]!r} must map to a string, number, boolean or null")
        checked.append((segments, value))
    return checked


def matches(event: dict[str, Any], where: Iterable[tuple[list[str], Any]]) -> bool:
    """Whether every path of ``where`` leads to exactly its value (own keys only; a boolean
    never equals a number)."""
    for segments, expected in where:
        node: Any = event
        for segment in segments:
            if not isinstance(node, dict) or segment not in node:
                return False
            node = node[segment]
        if isinstance(node, bool) != isinstance(expected, bool) or node != expected:
            return False
    return True
