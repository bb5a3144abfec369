"""``get_facet`` (label ``runtime.inspect``): a run's structured summary from its trace."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gateway.store.traces import EventRow, RunInfo
from tools.base import HostTool, ToolContext, ToolError
from tools.inspect.runs import SESSION_SCHEMA, resolve_run, run_trace

PREFIX = "runtime.inspect"
FIELDS = (
    "persona",
    "thread_id",
    "outcome",
    "model",
    "started_at",
    "ended_at",
    "duration_ms",
    "model_calls",
    "tokens",
    "cost",
    "tool_calls",
    "errors",
    "subagents",
    "budgets",
)


def facet(info: RunInfo | None, events: list[EventRow]) -> dict[str, Any]:
    """Every field of the facet of a run with ``info`` and ``events``."""
    calls = [e for e in events if e.kind == "model_call"]
    tools = [e for e in events if e.kind == "tool_call"]
    ended = next((e for e in reversed(events) if e.kind == "phase" and e.name == "turn_ended"), None)
    tokens_in = sum(int(e.payload.get("input_tokens", 0)) for e in calls)
    tokens_out = sum(int(e.payload.get("output_tokens", 0)) for e in calls)
    if not calls and info is not None:
        tokens_in, tokens_out = info.input_tokens, info.output_tokens
    started = info.started_at if info else (events[0].at if events else None)
    ended_at = info.ended_at if info else None
    return {
        "persona": info.persona if info else None,
        "thread_id": info.thread_id if info else None,
        "outcome": (ended.payload.get("outcome") if ended else None) or (info.status if info else None),
        "model": info.model if info else None,
        "started_at": started,
        "ended_at": ended_at,
        "duration_ms": None if started is None or ended_at is None else round((ended_at - started) * 1000, 1),
        "model_calls": len(calls) or (info.model_calls if info else 0),
        "tokens": {"input": tokens_in, "output": tokens_out, "total": tokens_in + tokens_out},
        "cost": None,  # Talon's config has no prices, so no cost is claimed
        "tool_calls": {
            "total": len(tools),
            "by_name": dict(Counter(e.name or "?" for e in tools)),
            "refused": sum(e.payload.get("decision") == "refused" for e in tools),
        },
        "errors": {
            "total": sum(e.error_class is not None for e in tools),
            "by_class": dict(Counter(e.error_class for e in tools if e.error_class)),
        },
        "subagents": [
            {"name": e.name, **{k: v for k, v in e.payload.items() if k != "event"}}
            for e in events
            if e.kind == "child" and e.payload.get("event") == "ended"
        ],
        "budgets": [{"name": e.name, **e.payload} for e in events if e.kind == "budget"],
    }


async def get_facet(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    wanted = args.get("fields") or list(FIELDS)
    unknown = [f for f in wanted if f not in FIELDS]
    if unknown:
        raise ToolError(f"unknown field {unknown[0][:40]!r}; fields: {', '.join(FIELDS)}")
    run_id, current = await resolve_run(ctx, args.get("session"))
    info, events = await run_trace(ctx, run_id, current)
    whole = facet(info, events)
    return {"run_id": run_id, "is_current_run": current, **{f: whole[f] for f in FIELDS if f in wanted}}


TOOL = HostTool(
    mcp_name="get_facet",
    internal_name="runtime.get_facet",
    prefix=PREFIX,
    description=(
        "Read a structured summary of one of this persona's runs (a Talon run is the reference's "
        "session): outcome, model, duration, model calls, tokens, tool-call counts by name with refusals, "
        "error categories, sub-agents and budgets that ran out. cost is null: Talon's config has no "
        "prices. session: a run id, 'latest' (default, the newest run before this one) or "
        "'current'/'self' (this run so far). fields limits the result to those top-level fields; "
        "run_id and is_current_run are always there."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "session": SESSION_SCHEMA,
            "fields": {
                "type": "array",
                "items": {"type": "string", "enum": list(FIELDS)},
                "maxItems": len(FIELDS),
                "description": "Top-level fields to return; omit for all.",
            },
        },
        "additionalProperties": False,
    },
    handler=get_facet,
)
