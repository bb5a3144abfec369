"""What the findings tools share: the tree a call belongs to and the argument checks."""

from __future__ import annotations

from typing import Any

from gateway.store.findings import ENTRY_TYPES
from tools.base import ToolContext, ToolError

TYPE_SCHEMA: dict[str, Any] = {"type": "string", "enum": list(ENTRY_TYPES)}


def tree_of(ctx: ToolContext) -> int:
    tree = ctx.tree_run_id
    if tree is None:
        raise ToolError("shared findings belong to a run; this session has none")
    return tree


def entry_type(value: Any, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if value not in ENTRY_TYPES:
        raise ToolError(f"type must be one of {', '.join(ENTRY_TYPES)}")
    return str(value)
