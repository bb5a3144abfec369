"""``glob``: paths under a folder matching a pattern, at most :data:`MAX_RESULTS`."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.globbing import compile_glob, literal_names
from tools.workspace.roots import WORKSPACE, WorkspaceRoots
from tools.workspace.walk import MAX_VISITED, SKIPPED_DIRS, walk

__all__ = ["TOOL", "find"]

MAX_RESULTS = 500
MAX_PATTERN_CHARS = 1000


def _split_absolute(pattern: str) -> tuple[str | None, str]:
    """``/workspace/src/**/*.py`` -> (``/workspace/src``, ``**/*.py``): the literal folders lead."""
    if not pattern.startswith("/"):
        return None, pattern
    parts = pattern.split("/")
    lead: list[str] = []
    for part in parts[1:-1]:
        if set(part) & set("*?[{"):
            break
        lead.append(part)
    rest = "/".join(parts[len(lead) + 1 :])
    return "/" + "/".join(lead), rest


def find(roots: WorkspaceRoots, pattern: str, path: str | None) -> dict[str, Any]:
    if not pattern.strip() or len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"pattern must be a glob of 1 to {MAX_PATTERN_CHARS} characters, e.g. **/*.csv")
    base, relative = _split_absolute(pattern)
    if base is not None and path is not None:
        raise ToolError(
            "give an absolute pattern or a path, not both: e.g. pattern '**/*.py' and path '/shared'"
        )
    if base is not None and not relative:
        raise ToolError(f"pattern {pattern!r} names a folder, not files in it; add e.g. '/*' or '/**/*'")
    matcher = compile_glob(relative)
    skip = SKIPPED_DIRS - literal_names(relative)
    with roots.resolved(base or path or WORKSPACE, what="path") as start:
        if not start.is_dir:
            raise ToolError(f"path {start.virtual!r} is not a folder; give the folder to search from")
        fd = start.open(os.O_RDONLY | os.O_DIRECTORY)
        prefix = start.virtual
    matches: list[str] = []
    visited = 0
    try:
        for entry in walk(fd, skip=skip):
            visited += 1
            if any(part in skip for part in entry.relative.split("/")):
                continue
            if matcher.match(entry.relative):
                matches.append(f"{prefix}/{entry.relative}" + ("/" if entry.is_dir else ""))
                if len(matches) > MAX_RESULTS:
                    break
    finally:
        os.close(fd)
    truncated = len(matches) > MAX_RESULTS
    result: dict[str, Any] = {
        "matches": sorted(matches[:MAX_RESULTS]),
        "count": min(len(matches), MAX_RESULTS),
    }
    if truncated:
        result["truncated"] = True
        result["note"] = f"more than {MAX_RESULTS} matches; narrow the pattern or the path"
    elif visited >= MAX_VISITED:
        result["truncated"] = True
        result["note"] = f"stopped after {MAX_VISITED} entries; give a narrower path"
    return result


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    roots = WorkspaceRoots.for_call(ctx, "read")
    return await asyncio.to_thread(find, roots, args["pattern"], args.get("path"))


TOOL = HostTool(
    mcp_name="glob",
    internal_name="fs.glob",
    prefix="fs.read",
    description=(
        f"Find files matching a glob pattern. Returns up to {MAX_RESULTS} matching paths. Skips "
        "node_modules, .git, .hg and .svn by default; name a directory literally to search it. Supports "
        "*, ?, **, and nested comma-list braces. Range braces and malformed braces are literal. Expansion "
        "is bounded to 255 alternatives and 65,535 aggregate characters."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": 'Glob pattern (e.g. "src/**/*.ts", "*.json").'},
            "path": {
                "type": "string",
                "description": "Base directory to search from. Defaults to /workspace.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    handler=handle,
)
