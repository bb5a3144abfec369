"""``edit_file``: replace exact text in a file, atomically, optionally at an expected hash."""

from __future__ import annotations

import asyncio
from typing import Any

from tools.base import HostTool, ToolContext
from tools.workspace.atomic import write_atomic
from tools.workspace.editing import check_hash, decode, read_for_edit, replace_exact
from tools.workspace.roots import WorkspaceRoots

__all__ = ["TOOL", "edit"]


def edit(roots: WorkspaceRoots, args: dict[str, Any]) -> dict[str, Any]:
    with roots.resolved(args["file_path"], what="file_path") as resolved:
        data = read_for_edit(resolved)
        check_hash(args.get("expected_hash"), data, resolved.virtual)
        text, count = replace_exact(
            decode(data, resolved.virtual),
            args["old_string"],
            args["new_string"],
            replace_all=bool(args.get("replace_all", False)),
            virtual=resolved.virtual,
            label="old_string",
        )
        digest = write_atomic(resolved, text.encode("utf-8"))
        return {"file_path": resolved.virtual, "replacements": count, "after_hash": digest}


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(edit, WorkspaceRoots.for_call(ctx, "write"), args)


TOOL = HostTool(
    mcp_name="edit_file",
    internal_name="fs.edit_file",
    prefix="fs.write",
    description=(
        "Perform an exact string replacement in a file. Fails if old_string is not found or matches "
        "multiple locations (unless replace_all is set). Always read the file first to verify exact "
        "content. Returns after_hash (sha256:<hex>)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "Path to the file to edit (/workspace/... or /shared/...).",
            },
            "old_string": {"type": "string", "description": "The exact string to find and replace."},
            "new_string": {"type": "string", "description": "The replacement string."},
            "replace_all": {
                "type": "boolean",
                "description": "If true, replace all occurrences. Default: fail on multiple matches.",
            },
            "expected_hash": {
                "type": "string",
                "description": (
                    "Optional sha256:<hex> copied verbatim from a prior tool result, such as after_hash. "
                    "Rejects a changed file before writing. Omit or pass an empty string to skip the check; "
                    "do not compute or guess a hash."
                ),
            },
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    },
    handler=handle,
)
