"""``memory_access``: per-thread memory items (facts, summaries, notes).

Every query is scoped to the calling thread (``ctx.thread_id``): another thread's items
are never read, listed, changed or deleted.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from gateway.store import memory
from tools.base import HostTool, ToolContext, ToolError

OPERATIONS = ("read", "write", "delete", "list")
NAMESPACES = ("fact", "summary", "note")
MAX_VALUE_BYTES = 64 * 1024
MAX_KEY_CHARS = 200
MAX_ITEMS_PER_THREAD = 1000
LIST_LIMIT = 200
_PREVIEW_CHARS = 200
_ALIASES = {"facts": "fact", "summaries": "summary", "notes": "note"}


def namespace_type(namespace: str | None) -> str:
    """The memory item type for a namespace; unknown namespaces fall back to ``note``."""
    if namespace is None:
        return "note"
    name = namespace.strip().lower()
    name = _ALIASES.get(name, name)
    return name if name in NAMESPACES else "note"


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Dispatch one ``memory_access`` call."""
    operation = args.get("operation")
    if operation is None:
        raise ToolError(f"operation is required: one of {', '.join(OPERATIONS)}")
    if operation not in OPERATIONS:
        raise ToolError(f"unknown operation {operation!r}; use one of {', '.join(OPERATIONS)}")
    namespace = args.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise ToolError(f"namespace must be a string: one of {', '.join(NAMESPACES)}")
    if operation == "list":
        return await _list(ctx, namespace)
    if operation == "write":
        return await _write(ctx, args, namespace)
    key = _key(args.get("key"), operation)
    if operation == "read":
        return await _read(ctx, key)
    return await _delete(ctx, key)


def _key(value: Any, operation: str) -> str:
    if value is None or value == "":
        raise ToolError(f"{operation} needs key; call operation 'list' to see the keys in this thread")
    if not isinstance(value, str):
        raise ToolError("key must be a string")
    if len(value) > MAX_KEY_CHARS:
        raise ToolError(f"key is {len(value)} characters; keep it under {MAX_KEY_CHARS}")
    return value


def _when(ts: float, ctx: ToolContext) -> str:
    return datetime.fromtimestamp(ts, ZoneInfo(ctx.settings.timezone)).isoformat(timespec="seconds")


async def _read(ctx: ToolContext, key: str) -> dict[str, Any]:
    item = await ctx.db.read(memory.get_item, ctx.thread_id, key)
    if item is None:
        raise ToolError(
            f"no memory item with key {key!r} in this thread; call operation 'list' to see the keys"
        )
    return {
        "key": item.key,
        "value": item.value,
        "namespace": item.kind,
        "updated_at": _when(item.updated_at, ctx),
    }


async def _write(ctx: ToolContext, args: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    if "value" not in args or args["value"] is None:
        raise ToolError("write needs value (a string, or any JSON value, which is stored as JSON text)")
    raw = args["value"]
    value = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    size = len(value.encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise ToolError(f"value is {size} bytes; the limit is {MAX_VALUE_BYTES} (store a shorter summary)")
    key = str(uuid.uuid4()) if args.get("key") in (None, "") else _key(args.get("key"), "write")
    thread_id, persona, now = ctx.thread_id, ctx.persona.name, time.time()

    def upsert(conn: sqlite3.Connection) -> tuple[str, bool]:
        existing = memory.item_kind(conn, thread_id, key)
        if existing is not None:
            # Rewriting without a namespace keeps the item's type.
            kind = namespace_type(namespace) if namespace is not None else existing
            memory.put_item(conn, thread_id, persona, key, kind, value, now)
            return kind, False
        if memory.count_items(conn, thread_id) >= MAX_ITEMS_PER_THREAD:
            raise ToolError(
                f"this thread already has {MAX_ITEMS_PER_THREAD} memory items; delete or overwrite some first"
            )
        kind = namespace_type(namespace)
        memory.put_item(conn, thread_id, persona, key, kind, value, now)
        return kind, True

    # One trip to the database thread for the whole transaction.
    kind, created = await ctx.db.run_transaction(upsert)
    return {"key": key, "namespace": kind, "created": created}


async def _delete(ctx: ToolContext, key: str) -> dict[str, Any]:
    return {"deleted": await ctx.db.run_transaction(memory.delete_item, ctx.thread_id, key)}


async def _list(ctx: ToolContext, namespace: str | None) -> dict[str, Any]:
    kind = None if namespace is None else namespace_type(namespace)
    rows = await ctx.db.read(memory.list_items, ctx.thread_id, limit=LIST_LIMIT + 1, kind=kind)
    items = [
        {
            "key": row.key,
            "namespace": row.kind,
            "value": row.value if len(row.value) <= _PREVIEW_CHARS else row.value[:_PREVIEW_CHARS] + "…",
            "updated_at": _when(row.updated_at, ctx),
        }
        for row in rows[:LIST_LIMIT]
    ]
    result: dict[str, Any] = {"items": items}
    if len(rows) > LIST_LIMIT:
        result["truncated"] = f"showing the {LIST_LIMIT} most recently updated items"
    return result


TOOL = HostTool(
    mcp_name="memory_access",
    internal_name="memory.access",
    prefix="memory.access",
    description=(
        "Read, write, delete or list memory items of this conversation thread. Items persist across "
        "turns and restarts; namespace is fact, summary or note."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": list(OPERATIONS)},
            "key": {
                "type": "string",
                "description": "Required for read and delete; optional for write (a UUID is generated).",
            },
            "value": {"description": "Required for write. Non-string values are stored as JSON text."},
            "namespace": {
                "type": "string",
                "description": "fact, summary or note (default note; unknown names become note). Filters list.",
            },
        },
        "required": ["operation"],
        "additionalProperties": False,
    },
    handler=handle,
)
