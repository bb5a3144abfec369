"""``read_witness`` and ``search_witness`` (label ``runtime.inspect``): a run's trace events,
and a search across the persona's recent runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.store.traces import EventRow, persona_run_count, persona_runs, search_events
from tools.base import HostTool, ToolContext, ToolError
from tools.inspect.runs import (
    KINDS_SCHEMA,
    SESSION_SCHEMA,
    WHERE_SCHEMA,
    check_where,
    matches,
    resolve_run,
    run_trace,
)

PREFIX = "runtime.inspect"
READ_DEFAULT = 50
READ_MAX = 200
SESSIONS_DEFAULT = 20
SESSIONS_MAX = 100
MATCH_CAP = 200
QUERY_MAX = 200
_TOOL_NAME_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": 64,
    "description": "Only tool_call events of this tool.",
}


def _keep(event: EventRow, *, kinds: list[str], tool_name: str | None, errors_only: bool) -> bool:
    if kinds and event.kind not in kinds:
        return False
    if tool_name is not None and (event.kind != "tool_call" or event.name != tool_name):
        return False
    return not errors_only or event.error_class is not None


async def read_witness(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    where = check_where(args.get("where"))
    kinds, tool_name = list(args.get("kinds") or ()), args.get("tool_name")
    limit = int(args.get("limit") or READ_DEFAULT)
    run_id, current = await resolve_run(ctx, args.get("session"))
    _, events = await run_trace(ctx, run_id, current)
    kept = [
        e.as_dict()
        for e in events
        if _keep(e, kinds=kinds, tool_name=tool_name, errors_only=bool(args.get("errors_only")))
    ]
    kept = [e for e in kept if matches(e, where)]
    return {
        "run_id": run_id,
        "is_current_run": current,
        "total_matching": len(kept),
        "events": kept[-limit:],  # the most recent, in order
    }


def _since(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ToolError(
            "since must be an ISO date or time, e.g. 2026-12-01 or 2026-12-01T09:30:00Z"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


async def search_witness(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    query = str(args.get("query") or "").strip()
    if not query:
        raise ToolError("query is required: the text to look for (case-insensitive)")
    where = check_where(args.get("where"))
    since = _since(args.get("since"))
    sessions = int(args.get("sessions") or SESSIONS_DEFAULT)
    kinds, tool_name = list(args.get("kinds") or ()), args.get("tool_name")
    own = ctx.run_id if args.get("include_current_session") else None
    persona = ctx.persona.name

    def scan(conn: Any) -> tuple[int, list[int], list[EventRow], bool]:
        available = persona_run_count(conn, persona, since=since, exclude=ctx.run_id)
        runs = persona_runs(conn, persona, limit=sessions, since=since, exclude=ctx.run_id)
        found: list[EventRow] = []
        for event in search_events(conn, runs, query, kinds=kinds, name=tool_name):
            if tool_name is not None and event.kind != "tool_call":
                continue
            if matches(event.as_dict(), where):
                if len(found) == MATCH_CAP:
                    return available, runs, found, True
                found.append(event)
        return available, runs, found, False

    available, runs, found, capped = await ctx.db.read(scan)
    if own is not None and ctx.trace is not None and not capped:
        needle = query.lower()
        for event in ctx.trace.buffered():
            text = f"{event.kind} {event.name or ''} {event.payload}".lower()
            if needle in text and _keep(event, kinds=kinds, tool_name=tool_name, errors_only=False):
                if matches(event.as_dict(), where):
                    if len(found) == MATCH_CAP:
                        capped = True
                        break
                    found.append(event)
    grouped: dict[int, list[dict[str, Any]]] = {}
    for event in found:
        grouped.setdefault(event.run_id, []).append(event.as_dict())
    result: dict[str, Any] = {
        "query": query,
        "runs": [{"run_id": run, "matches": hits} for run, hits in grouped.items()],
        "matchCount": len(found),
        "matchLimitReached": capped,
        "sessionsAvailable": available,
        "sessionsSearched": len(runs) + (1 if own is not None else 0),
    }
    if capped:
        result["hint"] = (
            f"stopped at {MATCH_CAP} matches; narrow with kinds, tool_name, where, since or fewer sessions"
        )
    return result


READ = HostTool(
    mcp_name="read_witness",
    internal_name="runtime.read_witness",
    prefix=PREFIX,
    description=(
        "Read the trace events of one of this persona's runs (a Talon run is the reference's session), "
        "in order: model calls (model, tokens, latency, stop reason), tool calls (name, decision, duration, "
        "result bytes, error class), phases, budgets and child agents. Traces hold no prompts, arguments "
        "or results unless the operator set traces.content. Filter by kinds, tool_name, errors_only and "
        f"where; limit keeps the most recent matching events (default {READ_DEFAULT}, max {READ_MAX})."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "session": SESSION_SCHEMA,
            "kinds": KINDS_SCHEMA,
            "tool_name": _TOOL_NAME_SCHEMA,
            "errors_only": {"type": "boolean", "description": "Only events with an error class."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": READ_MAX,
                "description": f"Most recent matching events to return (default {READ_DEFAULT}).",
            },
            "where": WHERE_SCHEMA,
        },
        "additionalProperties": False,
    },
    handler=read_witness,
)

SEARCH = HostTool(
    mcp_name="search_witness",
    internal_name="runtime.search_witness",
    prefix=PREFIX,
    description=(
        "Search the traces of this persona's recent runs (Talon's runs are the reference's sessions) "
        "for a case-insensitive substring of event kinds, names and payloads; results are grouped by "
        f"run. sessions: how many recent runs to scan (default {SESSIONS_DEFAULT}, max {SESSIONS_MAX}); "
        "since: an ISO date, only runs with events after it; this run is left out unless "
        f"include_current_session. At most {MATCH_CAP} matches: then matchLimitReached is true with a hint. "
        "sessionsAvailable and sessionsSearched tell a short history from a narrow filter."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": QUERY_MAX,
                "description": "Text to find.",
            },
            "sessions": {
                "type": "integer",
                "minimum": 1,
                "maximum": SESSIONS_MAX,
                "description": f"Recent runs to scan (default {SESSIONS_DEFAULT}).",
            },
            "kinds": KINDS_SCHEMA,
            "since": {"type": "string", "maxLength": 40, "description": "ISO date or time."},
            "tool_name": _TOOL_NAME_SCHEMA,
            "where": WHERE_SCHEMA,
            "include_current_session": {"type": "boolean", "description": "Search this run's events too."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    handler=search_witness,
)
