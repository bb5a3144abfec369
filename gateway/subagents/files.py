"""The workspace built-ins: ``file-searcher`` and ``spark-coder``.

Both work inside the persona's workspace, ``<data_dir>/workspaces/<persona>`` (created on
demand), and never read outside it: paths with ``..`` or absolute paths are refused,
symlinks are resolved and followed only when they stay inside, and sizes are capped.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gateway.subagents.base import Invocation, SubagentError, SubagentResult, limit_input, text_input
from gateway.subagents.memory import keyword_terms

__all__ = ["WorkspaceError", "inside_workspace", "search_files", "write_code"]

MAX_FILES = 2000
MAX_FILE_BYTES = 1_000_000
MAX_TOTAL_BYTES = 20_000_000
MAX_CANDIDATES = 40
SNIPPET_CONTEXT = 2
MAX_SNIPPET_CHARS = 600
MAX_CONTEXT_FILE_BYTES = 200_000
MAX_CONTEXT_BYTES = 500_000
MAX_TASK_CHARS = 20_000
MAX_QUERY_CHARS = 2000
_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})


class WorkspaceError(SubagentError):
    """A path that would leave the workspace, or cannot be used."""


def _workspace(call: Invocation) -> Path:
    root = call.workspace
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def inside_workspace(root: Path, relative: Any, *, what: str = "path") -> Path:
    """Resolve ``relative`` under ``root``, refusing anything that leaves it.

    Args:
        root (:class:`pathlib.Path`): The resolved workspace directory.
        relative (:obj:`str`): A path relative to the workspace, ``/``-separated.
        what (:obj:`str`, optional): How messages name the value.

    Raises:
        :class:`WorkspaceError`: Not a string, absolute, contains ``..``, or resolves
        (through a symlink) outside ``root``.
    """
    if not isinstance(relative, str) or not relative.strip() or "\x00" in relative:
        raise WorkspaceError(f"{what} must be a non-empty path relative to the workspace")
    text = relative.replace("\\", "/")
    if text.startswith("/") or PurePosixPath(text).is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise WorkspaceError(f"{what} {relative!r} is absolute; give a path relative to the workspace")
    if ".." in PurePosixPath(text).parts:
        raise WorkspaceError(f"{what} {relative!r} contains '..'; paths must stay inside the workspace")
    target = (root / text).resolve()
    if not target.is_relative_to(root):
        raise WorkspaceError(f"{what} {relative!r} leads outside the workspace (through a symbolic link)")
    return target


def _read_inside(root: Path, path: Path, limit: int) -> bytes | None:
    """The file's bytes when it really is inside ``root`` and within ``limit``; else ``None``."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not real.is_relative_to(root):
        return None
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return handle.read(limit + 1)[:limit]


def _text(data: bytes) -> str | None:
    if b"\x00" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------- file-searcher


@dataclass(frozen=True, slots=True)
class Snippet:
    path: str
    line: int
    text: str
    score: int

    def shown(self, id: int) -> dict[str, Any]:
        return {"id": id, "path": self.path, "line": self.line, "text": self.text}


def _scan(root: Path, base: Path, terms: set[str]) -> tuple[list[Snippet], int]:
    """Keyword-matching snippets of every readable text file under ``base`` (blocking)."""
    snippets: list[Snippet] = []
    files = 0
    total = 0
    for folder, dirs, names in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(names):
            if files >= MAX_FILES or total >= MAX_TOTAL_BYTES:
                return snippets, files
            path = Path(folder) / name
            data = _read_inside(root, path, min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total))
            if data is None:
                continue
            files += 1
            total += len(data)
            text = _text(data)
            if text is not None:
                relative = path.relative_to(root).as_posix()
                snippets += _snippets(relative, text, terms)
    return snippets, files


def _snippets(relative: str, text: str, terms: set[str]) -> list[Snippet]:
    lines = text.splitlines()
    name_bonus = len(terms & keyword_terms(relative))
    hits = [i for i, line in enumerate(lines) if terms & keyword_terms(line)]
    out: list[Snippet] = []
    last_end = -1
    for i in hits:
        start = max(i - SNIPPET_CONTEXT, 0)
        if start <= last_end:
            start = last_end + 1  # overlapping windows: continue the previous snippet's text
            if start > i:
                continue
        end = min(i + SNIPPET_CONTEXT, len(lines) - 1)
        body = "\n".join(lines[start : end + 1])
        if len(body) > MAX_SNIPPET_CHARS:
            body = body[:MAX_SNIPPET_CHARS] + "…"
        window_terms = set().union(*(keyword_terms(line) for line in lines[start : end + 1]))
        out.append(Snippet(relative, start + 1, body, len(terms & window_terms) + name_bonus))
        last_end = end
    return out


async def search_files(call: Invocation) -> SubagentResult:
    """Search the persona's workspace for ``input.query`` and rank the matching snippets.

    A keyword pass collects candidate snippets; the model ranks them. With no candidate,
    the model is not called.

    Input: ``query`` (required), ``path`` (optional sub-directory), ``limit`` (default 10).
    Data: ``{"results": [{path, line, snippet, relevance, reason?}], "searched_files": n}``.
    """
    query = text_input(call, "query", MAX_QUERY_CHARS)
    limit = limit_input(call, 10, 50)
    root = _workspace(call)
    base = root
    if call.input.get("path") not in (None, "", "."):
        base = inside_workspace(root, call.input["path"], what="input.path")
        if not base.is_dir():
            raise WorkspaceError(f"input.path {call.input['path']!r} is not a directory in the workspace")
    terms = keyword_terms(query)
    snippets, searched = await asyncio.to_thread(_scan, root, base, terms)
    if not snippets:
        return call.result(
            f"no file in the workspace matches ({searched} files searched)",
            {"results": [], "searched_files": searched},
        )
    candidates = sorted(snippets, key=lambda s: -s.score)[:MAX_CANDIDATES]
    content = f"Query: {query}\n\nReturn at most {limit} snippets.\n\nSnippets:\n" + "\n\n".join(
        f"[{i}] {s.path}:{s.line}\n{s.text}" for i, s in enumerate(candidates)
    )
    outcome = await call.complete(content)
    results: list[dict[str, Any]] = []
    seen: set[int] = set()
    for entry in outcome.data["results"]:
        index = entry["id"]
        if not 0 <= index < len(candidates) or index in seen:
            continue  # ids the model made up or repeated
        seen.add(index)
        snippet = candidates[index]
        result: dict[str, Any] = {
            "path": snippet.path,
            "line": snippet.line,
            "snippet": snippet.text,
            "relevance": entry.get("relevance"),
        }
        if entry.get("reason"):
            result["reason"] = entry["reason"]
        results.append(result)
        if len(results) == limit:
            break
    paths = ", ".join(dict.fromkeys(r["path"] for r in results[:5]))
    summary = f"{len(results)} matching snippets in {paths}" if results else "no relevant snippet found"
    return call.result(summary, {"results": results, "searched_files": searched})


# ---------------------------------------------------------------- spark-coder


def _context_files(root: Path, paths: Any) -> str:
    if paths is None:
        return ""
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise SubagentError("input.files must be a list of paths relative to the workspace")
    parts: list[str] = []
    total = 0
    for relative in paths:
        target = inside_workspace(root, relative, what="input.files entry")
        if not target.exists():
            parts.append(f"### {relative}\n(does not exist yet)")
            continue
        data = _read_inside(root, target, MAX_CONTEXT_FILE_BYTES)
        text = _text(data) if data is not None else None
        if text is None:
            raise SubagentError(
                f"input.files entry {relative!r} is not a readable text file under "
                f"{MAX_CONTEXT_FILE_BYTES} bytes"
            )
        total += len(data or b"")
        if total > MAX_CONTEXT_BYTES:
            raise SubagentError(
                f"input.files add up to more than {MAX_CONTEXT_BYTES} bytes; pass fewer files"
            )
        parts.append(f"### {relative}\n```\n{text}\n```")
    return "\n\n".join(parts)


async def write_code(call: Invocation) -> SubagentResult:
    """Generate file operations for ``input.task``; they are returned, never applied.

    Input: ``task`` (required), ``files`` (optional workspace paths whose content the model
    should see), ``context`` (optional text).
    Data: ``{"operations": [{op, path, content?}], "summary"?: str}``; every path is
    relative and inside the workspace.
    """
    task = text_input(call, "task", MAX_TASK_CHARS)
    context = call.input.get("context")
    if context is not None and not isinstance(context, str):
        raise SubagentError("input.context must be text")
    root = _workspace(call)
    files = await asyncio.to_thread(_context_files, root, call.input.get("files"))

    def check(data: dict[str, Any]) -> str | None:
        for i, operation in enumerate(data["operations"]):
            try:
                inside_workspace(root, operation["path"], what=f"operations[{i}].path")
            except WorkspaceError as exc:
                return str(exc)
        return None

    content = f"Task:\n{task}"
    if context and context.strip():
        content += f"\n\nContext:\n{context.strip()}"
    if files:
        content += f"\n\nCurrent files:\n\n{files}"
    outcome = await call.complete(content, check=check)
    operations = [
        {
            k: op[k]
            for k in ("op", "path", "content")
            if k in op and not (k == "content" and op["op"] == "delete")
        }
        for op in outcome.data["operations"]
    ]
    for op in operations:
        op["path"] = PurePosixPath(op["path"].replace("\\", "/")).as_posix()
    summary = outcome.data.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        listed = ", ".join(f"{o['op']} {o['path']}" for o in operations[:5])
        summary = f"{len(operations)} file operations: {listed}" if operations else "no file operations"
    data: dict[str, Any] = {"operations": operations, "summary": summary.strip()}
    return call.result(summary.strip(), data)
