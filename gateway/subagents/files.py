"""The workspace built-ins: ``file-searcher`` and ``spark-coder``.

Both read only the roots of the call (:attr:`Invocation.roots`, handed in by the tool that
invoked them): the calling thread's ``/workspace``, and ``/shared`` when the persona's
``fs.read`` labels open it, never another thread's files. Every path goes through that path
space's one resolver, so ``..`` above a root, absolute host paths and links pointing out are
refused as the file tools refuse them; files with other hard links are skipped, and sizes are
capped. Paths in results are the model's (``/workspace/notes.md``).
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gateway.errors import RefusedError
from gateway.subagents.base import (
    Invocation,
    PathSpace,
    SubagentError,
    SubagentResult,
    limit_input,
    text_input,
)
from gateway.subagents.memory import keyword_terms

__all__ = ["WorkspaceError", "search_files", "write_code"]

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
    """A path that cannot be used."""


def _space(call: Invocation) -> PathSpace:
    if call.roots is None:
        raise SubagentError(
            f"{call.definition.name} reads a thread's files and runs only from a tool call in a thread"
        )
    return call.roots


def _read(space: PathSpace, path: str, limit: int) -> bytes | None:
    """The bytes of the regular file ``path`` when the resolver admits it and it is within
    ``limit``; else ``None``."""
    try:
        resolved = space.resolve(path, what="file")
    except RefusedError:
        return None  # a link pointing out, a device: skipped like a binary file
    try:
        if not resolved.exists or resolved.is_dir:
            return None
        fd = resolved.open(os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    finally:
        resolved.close()
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1 or info.st_size > limit:
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


def _scan(space: PathSpace, bases: list[Path], terms: set[str]) -> tuple[list[Snippet], int]:
    """Keyword-matching snippets of every readable text file under ``bases`` (blocking)."""
    snippets: list[Snippet] = []
    files = 0
    total = 0
    for base in bases:
        for folder, dirs, names in os.walk(base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            for name in sorted(names):
                if files >= MAX_FILES or total >= MAX_TOTAL_BYTES:
                    return snippets, files
                virtual = space.virtual_of(Path(folder) / name)
                if virtual is None:
                    continue
                data = _read(space, virtual, min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total))
                if data is None:
                    continue
                files += 1
                total += len(data)
                text = _text(data)
                if text is not None:
                    snippets += _snippets(virtual, text, terms)
    return snippets, files


def _bases(space: PathSpace, path: Any) -> list[Path]:
    """The folders to search: ``input.path`` (checked) or every root of the call."""
    if path in (None, "", "."):
        return [root.host for root in space.roots]
    resolved = space.resolve(path, what="input.path")
    try:
        if not resolved.is_dir:
            raise WorkspaceError(
                f"input.path {path!r} is not a folder; this call may search {space.describe()}"
            )
        return [resolved.host_path]
    finally:
        resolved.close()


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
    """Search the call's roots for ``input.query`` and rank the matching snippets.

    A keyword pass collects candidate snippets; the model ranks them. With no candidate,
    the model is not called.

    Input: ``query`` (required), ``path`` (optional folder, e.g. ``/workspace/src``), ``limit``
    (default 10).
    Data: ``{"results": [{path, line, snippet, relevance, reason?}], "searched_files": n}``.
    """
    query = text_input(call, "query", MAX_QUERY_CHARS)
    limit = limit_input(call, 10, 50)
    space = _space(call)
    bases = await asyncio.to_thread(_bases, space, call.input.get("path"))
    terms = keyword_terms(query)
    snippets, searched = await asyncio.to_thread(_scan, space, bases, terms)
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


def _context_files(space: PathSpace, paths: Any) -> str:
    if paths is None:
        return ""
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise SubagentError("input.files must be a list of paths such as /workspace/app.py")
    parts: list[str] = []
    total = 0
    for path in paths:
        resolved = space.resolve(path, what="input.files entry", missing_parents_ok=True)
        resolved.close()
        if not resolved.exists:
            parts.append(f"### {resolved.virtual}\n(does not exist yet)")
            continue
        data = _read(space, resolved.virtual, MAX_CONTEXT_FILE_BYTES)
        text = _text(data) if data is not None else None
        if text is None:
            raise SubagentError(
                f"input.files entry {path!r} is not a readable text file under {MAX_CONTEXT_FILE_BYTES} bytes"
            )
        total += len(data or b"")
        if total > MAX_CONTEXT_BYTES:
            raise SubagentError(
                f"input.files add up to more than {MAX_CONTEXT_BYTES} bytes; pass fewer files"
            )
        parts.append(f"### {resolved.virtual}\n```\n{text}\n```")
    return "\n\n".join(parts)


def _path_problem(space: PathSpace, path: str, what: str) -> str | None:
    """Why an operation's path is not one the persona's file tools could write, or None."""
    try:
        space.resolve(path, what=what, follow_last=False, missing_parents_ok=True).close()
    except RefusedError as exc:
        return str(exc)
    return None


async def write_code(call: Invocation) -> SubagentResult:
    """Generate file operations for ``input.task``; they are returned, never applied.

    Input: ``task`` (required), ``files`` (optional paths whose content the model should see),
    ``context`` (optional text).
    Data: ``{"operations": [{op, path, content?}], "summary"?: str}``; every path is one the
    call's roots admit (relative paths are under ``/workspace``).
    """
    task = text_input(call, "task", MAX_TASK_CHARS)
    context = call.input.get("context")
    if context is not None and not isinstance(context, str):
        raise SubagentError("input.context must be text")
    space = _space(call)
    files = await asyncio.to_thread(_context_files, space, call.input.get("files"))

    def check(data: dict[str, Any]) -> str | None:
        for i, operation in enumerate(data["operations"]):
            problem = _path_problem(space, operation["path"], f"operations[{i}].path")
            if problem is not None:
                return problem
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
