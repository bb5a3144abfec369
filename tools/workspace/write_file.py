"""``write_file``: create or replace a file under the roots the call may write."""

from __future__ import annotations

import asyncio
from typing import Any

from tools.base import HostTool, ToolContext
from tools.workspace.atomic import MAX_WRITE_BYTES, write_atomic
from tools.workspace.roots import WorkspaceRoots

__all__ = ["TOOL", "write_text"]


def write_text(roots: WorkspaceRoots, path: Any, content: str) -> dict[str, Any]:
    """Write ``content`` (UTF-8) to ``path``, creating parent folders."""
    data = content.encode("utf-8")
    with roots.resolved(path, what="file_path", create_parents=True) as resolved:
        created = not resolved.exists
        digest = write_atomic(resolved, data)
        return {"file_path": resolved.virtual, "bytes": len(data), "created": created, "after_hash": digest}


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    roots = WorkspaceRoots.for_call(ctx, "write")
    return await asyncio.to_thread(write_text, roots, args["file_path"], args["content"])


TOOL = HostTool(
    mcp_name="write_file",
    internal_name="fs.write_file",
    prefix="fs.write",
    description=(
        "Write content to a file, creating it or overwriting if it exists. Parent directories are "
        "created automatically. Prefer edit_file for modifying existing files. Returns after_hash "
        "(sha256:<hex>) for a later expected_hash."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "Path to the file: /workspace/..., /shared/..., or relative to /workspace.",
            },
            "content": {
                "type": "string",
                "maxLength": MAX_WRITE_BYTES,
                "description": "The full content to write.",
            },
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    },
    handler=handle,
)
