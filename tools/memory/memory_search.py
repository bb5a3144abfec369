"""``memory_search``: ranked full-text search over the memory this turn may reach."""

from __future__ import annotations

from typing import Any

from gateway.memory_query import MAX_QUERY_CHARS, parse_query
from gateway.store.facts import SearchHit, search
from tools.base import HostTool, ToolContext, ToolError
from tools.memory.common import (
    CATEGORY_SCHEMA,
    MAX_RESULTS,
    RESULT_CHARS,
    SCOPE_SCHEMA,
    category,
    pick,
    since,
    turn_keys,
    when,
)

DEFAULT_LIMIT = 10


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    query = args.get("query")
    if not isinstance(query, str):
        raise ToolError(
            'query is required: words to look for, e.g. deploy AND friday, "exact phrase", migrat*'
        )
    parsed = parse_query(query)
    limit = args.get("limit", DEFAULT_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_RESULTS:
        raise ToolError(f"limit must be a whole number from 1 to {MAX_RESULTS}")
    keys = await turn_keys(ctx)
    scope = args.get("scope")
    chosen = [pick(keys, scope, ctx)] if scope is not None else list(keys.values())
    if not chosen:
        raise ToolError("this persona holds no memory.access label that opens a scope")
    hits = await ctx.db.read(
        search,
        parsed,
        chosen,
        category=category(args.get("category"), required=False),
        since=since(args.get("since"), ctx),
        limit=limit,
        procedures_of=ctx.persona.name if scope in (None, "persona") else None,
    )
    return {"results": [_shown(hit, ctx) for hit in hits], "scopes": [k.scope for k in chosen]}


def _shown(hit: SearchHit, ctx: ToolContext) -> dict[str, Any]:
    if hit.kind == "procedure":  # procedure_write's; the skill tool runs it once approved
        out: dict[str, Any] = {"procedure": hit.key, "kind": "procedure"}
    else:
        out = {"id": hit.id} if hit.id is not None else {"key": hit.key}
        out["kind"] = hit.kind if hit.id is not None else f"memory_access {hit.kind}"
    out["scope"] = hit.scope
    if hit.category:
        out["category"] = hit.category
    if len(hit.content) > RESULT_CHARS:
        out["content"] = hit.content[:RESULT_CHARS] + "…"
        out["truncated"] = True
    else:
        out["content"] = hit.content
    if hit.evidence:
        out["evidence"] = hit.evidence
    out["created_at"] = when(hit.created_at, ctx)
    out["score"] = round(hit.score, 6)
    return out


TOOL = HostTool(
    mcp_name="memory_search",
    internal_name="memory.search",
    prefix="memory.access",
    description=(
        "Search your memory, best matches first (bm25): facts saved with memory_update and the notes, "
        "facts and summaries of memory_access, and your procedures (procedure_write). Query syntax (SQLite FTS5): words (all must match), "
        '"exact phrase", prefix*, AND, OR, NOT (binary: apples NOT pears), parentheses. Searches every '
        "scope your labels open (this conversation; the person you are answering; everyone's) unless "
        "scope names one. Long items are cut to 1000 characters: read a memory_access item whole by its key."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "maxLength": MAX_QUERY_CHARS, "description": "FTS5 query."},
            "category": {**CATEGORY_SCHEMA, "description": "Only facts of this category."},
            "since": {"type": "string", "description": "ISO date; only items created on or after it."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "description": f"Most results (default {DEFAULT_LIMIT}).",
            },
            "scope": {
                **SCOPE_SCHEMA,
                "description": "Search only this scope. " + SCOPE_SCHEMA["description"],
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    handler=handle,
)
