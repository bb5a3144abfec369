"""``state_get`` and ``state_query`` (label ``state.read:persona|team``)."""

from __future__ import annotations

import time
from typing import Any

from gateway.store import state
from tools.base import HostTool, ToolContext
from tools.state.common import SCOPE_SCHEMA, check_name, name_schema, owner, shown

PREFIX = "state.read"
QUERY_DEFAULT = 20
QUERY_MAX = 100
PAGE_BYTES = 256 * 1024  # values per page: a page of large documents ends early, next_cursor goes on


async def get(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
    scope, whose = owner(ctx, args, PREFIX)
    namespace, key = check_name(args.get("namespace"), "namespace"), check_name(args.get("key"), "key")
    document = await ctx.db.read(state.get_document, whose, namespace, key, time.time())
    if document is None:
        return None
    return {"namespace": namespace, "scope": scope, **shown(document, ctx)}


async def query(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    scope, whose = owner(ctx, args, PREFIX)
    namespace = check_name(args.get("namespace"), "namespace")
    prefix = "" if args.get("key_prefix") in (None, "") else check_name(args["key_prefix"], "key_prefix")
    after = None if args.get("cursor") in (None, "") else check_name(args["cursor"], "cursor")
    limit = int(args.get("limit") or QUERY_DEFAULT)
    rows = await ctx.db.read(
        state.query_documents,
        whose,
        namespace,
        now=time.time(),
        limit=limit + 1,
        key_prefix=prefix,
        after=after,
    )
    page: list[state.StateDocument] = []
    size = 0
    for row in rows[:limit]:
        size += len(row.value)
        if page and size > PAGE_BYTES:
            break
        page.append(row)
    more = len(page) < len(rows)
    return {
        "namespace": namespace,
        "scope": scope,
        "documents": [shown(row, ctx) for row in page],
        "next_cursor": page[-1].key if more else None,
    }


GET = HostTool(
    mcp_name="state_get",
    internal_name="state.get",
    prefix=PREFIX,
    description=(
        "Read a JSON document from Talon's durable state store (it survives restarts). Returns null "
        "when the document does not exist or has expired, else its value, version, updated_at, "
        "expires_at and written_by. scope persona (default) reads this persona's own documents; "
        "scope team those shared by every persona (needs state.read:team)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "namespace": name_schema("Document namespace"),
            "key": name_schema("Document key"),
            "scope": SCOPE_SCHEMA,
        },
        "required": ["namespace", "key"],
        "additionalProperties": False,
    },
    handler=get,
)

QUERY = HostTool(
    mcp_name="state_query",
    internal_name="state.query",
    prefix=PREFIX,
    description=(
        "List the documents of a namespace in Talon's state store, sorted by key, expired ones left "
        "out. Filter with key_prefix; pages hold up to limit documents (and at most 256 KB of values): "
        "when next_cursor is not null, call again with cursor set to it for the next page."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "namespace": name_schema("Document namespace"),
            "key_prefix": {"type": "string", "description": "Only documents whose key starts with this."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": QUERY_MAX,
                "description": f"Most documents per page (default {QUERY_DEFAULT}, max {QUERY_MAX}).",
            },
            "cursor": {"type": "string", "description": "next_cursor of the previous page."},
            "scope": SCOPE_SCHEMA,
        },
        "required": ["namespace"],
        "additionalProperties": False,
    },
    handler=query,
)
