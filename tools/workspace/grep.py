"""``grep``: ripgrep over a checked folder or file, with a bounded head-and-tail view.

ripgrep is the binary of the ``ripgrep`` wheel (beside the Python interpreter) or, failing
that, ``rg`` on ``PATH`` (Debian's package). It runs with argv only, an empty environment
(no ``RIPGREP_CONFIG_PATH``), its working directory in the root, and a timeout; it does not
follow symbolic links, honours ``.gitignore`` even outside a git repository, skips ``.git``
and binary files, and searches hidden files. Lines from files with more than one hard link
are dropped (such a file may be a name for a file outside the workspace).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.roots import WORKSPACE, WorkspaceRoots

__all__ = ["TOOL", "ripgrep_path", "search"]

TIMEOUT = 30.0
HEAD_CHARS = 40_000
TAIL_CHARS = 10_000
MAX_READ_BYTES = 8 * 1024 * 1024  # ripgrep is stopped past this much output
MAX_COLUMNS = 500
MAX_PATTERN_CHARS = 2000


def ripgrep_path() -> str | None:
    """The ``rg`` binary: the wheel's, beside the interpreter, else the one on ``PATH``."""
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


def _argv(rg: str, pattern: str, include: str | None, target: str) -> list[str]:
    argv = [
        rg,
        "--no-config",
        "--line-number",
        "--with-filename",
        "--no-heading",
        "--color=never",
        "--hidden",
        "--no-require-git",
        "--glob=!.git",
        f"--max-columns={MAX_COLUMNS}",
        "--max-columns-preview",
        "--no-messages",
        "--null",
    ]
    if include:
        argv.append(f"--glob={include}")
    return [*argv, "--regexp", pattern, "--", target]


class _Bounded:
    """Keeps the first HEAD_CHARS and the last TAIL_CHARS of the lines it is given."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.head_size = 0
        self.tail: list[str] = []
        self.tail_size = 0
        self.dropped = 0
        self.lines = 0

    def add(self, line: str) -> None:
        self.lines += 1
        if self.head_size + len(line) <= HEAD_CHARS:
            self.head.append(line)
            self.head_size += len(line) + 1
            return
        self.tail.append(line)
        self.tail_size += len(line) + 1
        while self.tail_size > TAIL_CHARS and self.tail:
            self.tail_size -= len(self.tail.pop(0)) + 1
            self.dropped += 1


async def _run(argv: list[str], cwd: Path) -> tuple[int, list[str], bytes, bool]:
    """ripgrep's exit code, output lines (bounded in memory), stderr, and whether it was cut."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env={},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    read = 0
    cut = False
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                raw = await proc.stdout.readline()
                if not raw:
                    break
                read += len(raw)
                lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                if read > MAX_READ_BYTES:
                    cut = True
                    break
            err = await proc.stderr.read(4096)
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        raise ToolError(
            f"grep took longer than {TIMEOUT:g}s; narrow the path or include, or simplify the pattern"
        ) from None
    finally:
        if proc.returncode is None and cut:
            _kill(proc)
    code = await proc.wait()
    return code, lines, err, cut


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def search(roots: WorkspaceRoots, pattern: str, path: str | None, include: str | None) -> str:
    rg = ripgrep_path()
    if rg is None:
        raise ToolError("grep is unavailable: ripgrep (rg) is not installed; use glob and read_file instead")
    if not pattern or len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"pattern must be a ripgrep regex of 1 to {MAX_PATTERN_CHARS} characters")
    with roots.resolved(path or WORKSPACE, what="path") as resolved:
        if not resolved.exists:
            raise ToolError(
                f"path {resolved.virtual!r} does not exist; glob or list_directory shows what is there"
            )
        root = resolved.root
        relative = resolved.host_path.relative_to(root.host).as_posix()
    code, lines, err, cut = await _run(_argv(rg, pattern, include, relative), root.host)
    if code == 2 and not lines:
        message = err.decode("utf-8", "replace").strip().splitlines()
        detail = " ".join(message[-3:])[:500] if message else "ripgrep failed"
        raise ToolError(f"grep could not search: {detail}; escape regex metacharacters for a literal match")
    view = _Bounded()
    linked: set[str] = set()
    checked: dict[str, bool] = {}
    for line in lines:
        name, sep, rest = line.partition("\x00")
        if not sep:
            continue
        if name not in checked:
            checked[name] = _hard_linked(root.host, name)
            if checked[name]:
                linked.add(name)
        if checked[name]:
            continue
        view.add(f"{_virtual(root.name, name)}:{rest}")  # rest is "<line>:<content>"
    if view.lines == 0:
        where = _virtual(root.name, relative)
        return f"no matches for {pattern!r} in {where}" + (f" (files {include})" if include else "")
    parts = list(view.head)
    if view.dropped or cut:
        omitted = f"{view.dropped} lines omitted" if view.dropped else "output stopped"
        parts.append(
            f"[... {omitted}: the output is cut to its first and last lines; narrow pattern, include or path "
            "instead of repeating the same search ...]"
        )
    parts += view.tail
    if cut:
        parts.append(f"[ripgrep was stopped after {MAX_READ_BYTES} bytes of output]")
    if linked:
        parts.append(f"[{len(linked)} hard-linked files skipped: {', '.join(sorted(linked)[:5])}]")
    return "\n".join(parts)


def _virtual(root: str, relative: str) -> str:
    relative = relative.removeprefix("./")
    return root if relative in ("", ".") else f"{root}/{relative}"


def _hard_linked(base: Path, relative: str) -> bool:
    try:
        st = os.lstat(base / relative)
    except OSError:
        return True
    return st.st_nlink > 1


async def handle(ctx: ToolContext, args: dict[str, Any]) -> str:
    roots = WorkspaceRoots.for_call(ctx, "read")
    return await search(roots, args["pattern"], args.get("path"), args.get("include"))


TOOL = HostTool(
    mcp_name="grep",
    internal_name="fs.grep",
    prefix="fs.read",
    description=(
        "Search file contents for lines matching a pattern using ripgrep. Returns matches as "
        "file:line:content. Honors .gitignore; skips .git and binary files, but searches hidden paths such "
        "as .github and .env. Output uses a bounded head-and-tail view, so narrow pattern, include, or path "
        "after truncation instead of repeating the same broad search."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Ripgrep regex. Escape metacharacters for a literal match, e.g. \\| for a pipe.",
            },
            "path": {"type": "string", "description": "Directory or file to search. Defaults to /workspace."},
            "include": {"type": "string", "description": 'File glob to restrict search (e.g. "*.ts").'},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=TIMEOUT + 5,
)
