"""``list_directory``: a folder's entries, folders marked with a trailing ``/``."""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots

__all__ = ["TOOL", "list_entries"]

MAX_ENTRIES = 1000


def _describe(name: str, st: os.stat_result, target: str | None) -> str:
    if stat.S_ISDIR(st.st_mode):
        return name + "/"
    if stat.S_ISLNK(st.st_mode):
        return f"{name}@ -> {target}"
    if stat.S_ISREG(st.st_mode):
        return f"{name} ({st.st_size} bytes)"
    return f"{name} (special file)"


def list_entries(roots: WorkspaceRoots, path: str) -> str:
    with roots.resolved(path, what="path") as resolved:
        if not resolved.exists:
            raise ToolError(
                f"path {resolved.virtual!r} does not exist; list its parent folder to see what is there"
            )
        if not resolved.is_dir:
            raise ToolError(f"path {resolved.virtual!r} is a file; read_file reads it")
        fd = resolved.open(os.O_RDONLY | os.O_DIRECTORY)
        virtual = resolved.virtual
    try:
        with os.scandir(fd) as it:
            items = sorted(it, key=lambda e: e.name)
        lines = []
        for item in items[:MAX_ENTRIES]:
            try:
                st = item.stat(follow_symlinks=False)
                target = os.readlink(item.name, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else None
            except OSError:
                continue
            lines.append(_describe(item.name, st, target))
    finally:
        os.close(fd)
    header = f"{virtual}/ ({len(items)} entries)" if items else f"{virtual}/ is empty"
    if len(items) > MAX_ENTRIES:
        lines.append(
            f"[{len(items) - MAX_ENTRIES} more entries not shown; use glob with a pattern to narrow]"
        )
    return "\n".join([header, *lines])


async def handle(ctx: ToolContext, args: dict[str, Any]) -> str:
    return await asyncio.to_thread(list_entries, WorkspaceRoots.for_call(ctx, "read"), args["path"])


TOOL = HostTool(
    mcp_name="list_directory",
    internal_name="fs.list_directory",
    prefix="fs.read",
    description=(
        "List the contents of a directory. Returns filenames annotated with type (directories end with /, "
        "symbolic links show their target, files their size)."
    ),
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string", "description": "The directory to list, e.g. /workspace."}},
        "required": ["path"],
        "additionalProperties": False,
    },
    handler=handle,
)
