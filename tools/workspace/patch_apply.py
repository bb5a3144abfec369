"""``patch_apply``: several file changes validated together, then written one by one.

Every change is checked (path, expected hash, each edit matching exactly once) before any
file is written; one failure rejects the whole patch with the problem of each file. The
writes are atomic per file; if one fails, the files already written are put back as they
were (best effort) and the result says which file failed and what was restored.
"""

from __future__ import annotations

import asyncio
import difflib
import os
from dataclasses import dataclass
from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.atomic import MAX_WRITE_BYTES, content_hash, write_atomic
from tools.workspace.editing import check_hash, decode, read_for_edit, replace_exact
from tools.workspace.roots import WorkspaceRoots

__all__ = ["TOOL", "apply_patch"]

MAX_CHANGES = 100
MAX_EDITS = 200
MAX_DIFF_CHARS = 200_000
REREAD = "files changed: read_file them again before a later edit_file"


@dataclass(slots=True)
class _Planned:
    path: str  # the virtual path, links resolved
    before: bytes | None  # None: the file does not exist yet
    after: bytes


def _plan_one(roots: WorkspaceRoots, index: int, change: dict[str, Any]) -> _Planned:
    where = f"changes[{index}]"
    edits, content = change.get("edits"), change.get("content")
    if edits and content not in (None, ""):
        raise ToolError(f"{where}: give edits or content, not both")
    if not edits and content is None:
        raise ToolError(f"{where}: no change supplied; give edits (a list of {{old, new}}) or content")
    with roots.resolved(change["path"], what=f"{where}.path", missing_parents_ok=True) as resolved:
        exists = resolved.exists
        if exists and resolved.is_dir:
            raise ToolError(f"{where}.path {resolved.virtual!r} is a folder; name a file")
        before = read_for_edit(resolved, what=f"{where}.path") if exists else None
        virtual = resolved.virtual
    check_hash(change.get("expected_hash"), before, virtual, what=f"{where}.expected_hash")
    if edits:
        if before is None:
            raise ToolError(f"{where}: {virtual!r} does not exist; create it with content instead of edits")
        text = decode(before, virtual)
        for j, item in enumerate(edits):
            text, _ = replace_exact(
                text,
                item["old"],
                item["new"],
                replace_all=False,
                virtual=virtual,
                label=f"{where}.edits[{j}].old",
            )
        after = text.encode("utf-8")
    else:
        after = str(content).encode("utf-8")
    if len(after) > MAX_WRITE_BYTES:
        raise ToolError(f"{where}: the new content is more than {MAX_WRITE_BYTES} bytes")
    return _Planned(virtual, before, after)


def _diff(plans: list[_Planned]) -> tuple[str, bool]:
    parts: list[str] = []
    size = 0
    for plan in plans:
        before = (plan.before or b"").decode("utf-8", "replace").splitlines(keepends=True)
        after = plan.after.decode("utf-8", "replace").splitlines(keepends=True)
        old_name = plan.path if plan.before is not None else "/dev/null"
        for line in difflib.unified_diff(before, after, old_name, plan.path):
            text = line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            size += len(text)
            if size > MAX_DIFF_CHARS:
                return "".join(parts) + f"[diff cut at {MAX_DIFF_CHARS} characters]\n", True
            parts.append(text)
    return "".join(parts), False


def _write(roots: WorkspaceRoots, plan: _Planned, data: bytes | None) -> str | None:
    """Write ``data`` to the plan's file (``None``: remove it); returns the new hash."""
    with roots.resolved(plan.path, what="path", create_parents=data is not None) as resolved:
        if data is None:
            os.unlink(resolved.name, dir_fd=resolved.parent_fd)
            return None
        current = read_for_edit(resolved) if resolved.exists else None
        if current != plan.before:
            raise ToolError(f"{plan.path!r} changed while the patch was being applied")
        return write_atomic(resolved, data)


def apply_patch(roots: WorkspaceRoots, changes: list[dict[str, Any]], dry_run: bool) -> dict[str, Any]:
    if not changes:
        raise ToolError("changes is empty; give at least one {path, edits | content}")
    if len(changes) > MAX_CHANGES:
        raise ToolError(f"changes has {len(changes)} items; at most {MAX_CHANGES} files per patch")
    if sum(len(c.get("edits") or ()) for c in changes) > MAX_EDITS:
        raise ToolError(f"a patch takes at most {MAX_EDITS} edits in all; split it")
    plans: list[_Planned] = []
    errors: list[dict[str, str]] = []
    for i, change in enumerate(changes):
        try:
            plans.append(_plan_one(roots, i, change))
        except ToolError as exc:
            errors.append({"path": str(change.get("path")), "error": str(exc)})
    seen = [p.path for p in plans]
    twice = sorted({p for p in seen if seen.count(p) > 1})
    errors += [{"path": p, "error": "changed by more than one item; merge them into one"} for p in twice]
    if errors:
        return {"status": "rejected", "written": 0, "errors": errors, "note": "nothing was written"}
    files = [
        {
            "path": p.path,
            "before_hash": content_hash(p.before) if p.before is not None else None,
            "after_hash": content_hash(p.after),
        }
        for p in plans
    ]
    if dry_run:
        diff, cut = _diff(plans)
        return {"status": "dry_run", "files": files, "diff": diff, "diff_truncated": cut}
    done: list[_Planned] = []
    for plan in plans:
        try:
            _write(roots, plan, plan.after)
        except (ToolError, OSError) as exc:
            restored, lost = [], []
            for earlier in reversed(done):
                try:
                    _write_back(roots, earlier)
                    restored.append(earlier.path)
                except (ToolError, OSError):
                    lost.append(earlier.path)
            return {
                "status": "partial_failure",
                "failed": {
                    "path": plan.path,
                    "error": str(exc) if isinstance(exc, ToolError) else exc.strerror,
                },
                "restored": restored,
                "not_restored": lost,
                "not_attempted": [p.path for p in plans[len(done) + 1 :]],
                "_reread_warning": REREAD,
            }
        done.append(plan)
    return {"status": "applied", "files": files, "_reread_warning": REREAD}


def _write_back(roots: WorkspaceRoots, plan: _Planned) -> None:
    undo = _Planned(plan.path, plan.after, plan.before or b"")
    _write(roots, undo, plan.before)


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    roots = WorkspaceRoots.for_call(ctx, "write")
    return await asyncio.to_thread(apply_patch, roots, args["changes"], bool(args.get("dry_run", False)))


_EDIT = {
    "type": "object",
    "properties": {
        "old": {"type": "string", "description": "Exact text; must match once after earlier edits."},
        "new": {"type": "string", "description": "Its replacement."},
    },
    "required": ["old", "new"],
    "additionalProperties": False,
}
TOOL = HostTool(
    mcp_name="patch_apply",
    internal_name="fs.patch_apply",
    prefix="fs.write",
    description=(
        "Validate and atomically apply structured multi-file changes with content-hash verification and "
        "dry-run preview. Validation runs on all files before any write; a single failure aborts the entire "
        "patch. Each change has path plus edits (sequential {old, new} replacements, each matching exactly "
        "once) or content (full replacement), and optional expected_hash."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "changes": {
                "type": "array",
                "maxItems": MAX_CHANGES,
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {
                            "type": "string",
                            "description": "File to change (/workspace/... or relative).",
                        },
                        "expected_hash": {
                            "type": "string",
                            "description": "sha256:<hex> copied from a prior tool result; empty skips the check.",
                        },
                        "edits": {"type": "array", "items": _EDIT, "description": "Sequential replacements."},
                        "content": {
                            "type": ["string", "null"],
                            "description": "Full replacement, mutually exclusive with edits.",
                        },
                    },
                    "required": ["path"],
                    "additionalProperties": False,
                },
                "description": "The files to change.",
            },
            "dry_run": {
                "type": "boolean",
                "description": "If true, return the unified diff without writing.",
            },
        },
        "required": ["changes"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=60.0,
)
