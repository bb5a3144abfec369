"""``git_read`` (``git.read``): a constrained read-only git query on a repository in the workspace.

No shell: git runs from an argv list built here. Only the reference's subcommands, each with
a fixed option allowlist; options that write files, run programs or inject configuration are
refused (``-c``, ``--output``, ``-o``, ``--ext-diff``, ``--textconv``, ``--exec``, ``-O``, and
signature placeholders such as ``%G``). Git runs with ``--no-pager``, ``core.pager=cat``, an
empty ``diff.external``, ``--no-ext-diff --no-textconv`` where they apply, ``GIT_PAGER=cat``,
``GIT_EDITOR=:`` and no inherited ``GIT_*`` variable. Paths come after ``--`` and must resolve
inside the roots the persona may read; the repository is the folder ``repo`` names (default
``/workspace``). Git itself runs in the bubblewrap sandbox with those roots read-only and no
network, so a repository's own configuration (a clean filter, fsmonitor, hooks) cannot run
anything on the host.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

from gateway.sandbox import SYSTEM_PATH, Mount, SandboxSpec, bwrap_arguments, find_bwrap
from gateway.sandbox_limits import CallCgroups, limited_command
from gateway.sandbox_namespace import NamespaceInit
from tools.base import HostTool, ToolContext, ToolError
from tools.workspace import process
from tools.workspace.roots import WORKSPACE, WorkspaceRoots
from tools.workspace.sandbox import LIMITS, SandboxedCommand, shell_available, shell_problem

__all__ = ["SUBCOMMANDS", "TOOL", "git_argv"]

DEFAULT_MAX_BYTES = 51_200
MAX_BYTES = 204_800
TIMEOUT = 30.0

_COMMON_LOG = {
    "--oneline",
    "--stat",
    "--shortstat",
    "--numstat",
    "--name-only",
    "--name-status",
    "--graph",
    "--decorate",
    "--no-decorate",
    "--all",
    "--reverse",
    "--first-parent",
    "--no-merges",
    "--merges",
    "-p",
    "--patch",
    "--abbrev-commit",
    "--date",
    "--format",
    "--pretty",
    "--max-count",
    "-n",
    "--since",
    "--until",
    "--after",
    "--before",
    "--author",
    "--grep",
    "-i",
    "--follow",
    "--skip",
}
_DIFF = {
    "--stat",
    "--shortstat",
    "--numstat",
    "--name-only",
    "--name-status",
    "--cached",
    "--staged",
    "-U",
    "--unified",
    "-w",
    "--ignore-all-space",
    "-b",
    "--word-diff",
    "--diff-filter",
    "-M",
    "-C",
    "--summary",
    "--patch",
    "-p",
    "--no-color",
    "--color",
}
SUBCOMMANDS: dict[str, set[str]] = {
    "status": {"--short", "-s", "--branch", "-b", "--porcelain", "--untracked-files", "-u", "--ignored"},
    "log": _COMMON_LOG,
    "diff": _DIFF,
    "show": _DIFF | {"--oneline", "--format", "--pretty", "--no-patch", "-s", "--abbrev-commit", "--date"},
    "grep": {"-n", "--line-number", "-i", "--ignore-case", "-w", "-l", "--files-with-matches", "-c",
             "--count", "-E", "-F", "--max-count", "-m", "-A", "-B", "-C", "--cached"},
    "tag": {"-l", "--list", "-n", "--sort", "--contains", "--points-at", "--format"},
    "branch": {"-a", "--all", "-r", "--remotes", "-v", "-vv", "--list", "-l", "--contains", "--merged",
               "--no-merged", "--sort", "--format", "--show-current"},
    "blame": {"-L", "-w", "-M", "-C", "--porcelain", "-s", "-e", "--date", "-l"},
    "ls-files": {"-c", "--cached", "-m", "--modified", "-o", "--others", "--exclude-standard", "-d",
                 "--deleted", "-s", "--stage", "-z"},
    "rev-parse": {"--abbrev-ref", "--short", "--verify", "--show-toplevel", "--is-inside-work-tree",
                  "--git-dir", "HEAD"},
}  # fmt: skip
# "-o" is --others for ls-files only; everywhere else it writes a file.
_REFUSED = {"-c", "--output", "-o", "--ext-diff", "--textconv", "--exec", "-O", "--open-files-in-pager",
            "--upload-pack", "--config", "--exec-path", "--git-dir", "--work-tree", "--paginate", "-P"}  # fmt: skip
_NO_EXT = {"diff", "show", "log", "blame", "grep"}
_SIGNATURE = re.compile(r"%G|%\(signature")
_REVISION = re.compile(r"^[A-Za-z0-9_./~^@{}:+-]{1,200}$")


def _option_name(token: str) -> str:
    if token.startswith("--"):
        return token.split("=", 1)[0]
    return token[:2] if len(token) > 2 and token[1].isalpha() and token[0] == "-" else token


def _check_args(subcommand: str, args: list[str]) -> list[str]:
    allowed = SUBCOMMANDS[subcommand]
    out: list[str] = []
    for token in args:
        if not isinstance(token, str) or not token or "\x00" in token or "\n" in token:
            raise ToolError("args must be non-empty strings, one option or revision each")
        if _SIGNATURE.search(token):
            raise ToolError(f"{token!r}: signature placeholders (%G...) run gpg and are not allowed")
        if token.startswith("-"):
            name = _option_name(token)
            if (name in _REFUSED and not (subcommand == "ls-files" and name == "-o")) or name not in allowed:
                raise ToolError(
                    f"option {token!r} is not allowed for git {subcommand}; allowed: {', '.join(sorted(allowed))}"
                )
        elif not _REVISION.match(token) or token.startswith(":"):
            raise ToolError(
                f"{token!r} is not a revision (e.g. HEAD~2, main..feature, a tag); put file paths in paths"
            )
        out.append(token)
    return out


def git_argv(git: str, subcommand: str, args: list[str], paths: list[str], pattern: str | None) -> list[str]:
    """The full argv of one query (options checked, paths already resolved and relative)."""
    if subcommand not in SUBCOMMANDS:
        raise ToolError(f"subcommand {subcommand!r} is not available; use one of {', '.join(SUBCOMMANDS)}")
    if (pattern is not None) != (subcommand == "grep"):
        raise ToolError("pattern is required for grep and not accepted for other subcommands")
    argv = [git, "--no-pager", "-c", "core.pager=cat", "-c", "diff.external=", "-c", "core.fsmonitor=false",
            "-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never", subcommand]  # fmt: skip
    if subcommand in _NO_EXT:
        argv += ["--no-ext-diff", "--no-textconv"] if subcommand != "grep" else ["--no-textconv"]
    if subcommand in ("log", "show", "diff", "grep"):
        argv.append("--no-color")
    argv += _check_args(subcommand, args)
    if pattern is not None:
        argv += ["-e", pattern]
    argv.append("--")
    argv += paths
    return argv


def _repo_and_paths(roots: WorkspaceRoots, repo: Any, paths: list[Any]) -> tuple[str, list[str]]:
    """The repository's path as the sandbox sees it, and the paths relative to it (all checked)."""
    with roots.resolved(repo or WORKSPACE, what="repo") as resolved:
        if not resolved.is_dir:
            raise ToolError(f"repo {resolved.virtual!r} is not a folder; send the folder holding .git")
        top = resolved.virtual
    relative = []
    for path in paths:
        with roots.resolved(path if str(path).startswith("/") else f"{top}/{path}", what="paths") as item:
            if not (item.virtual == top or item.virtual.startswith(top.rstrip("/") + "/")):
                raise ToolError(f"path {path!r} is outside the repository {top}")
            relative.append(item.virtual[len(top) :].lstrip("/") or ".")
    return top, relative


def _command(roots: WorkspaceRoots, top: str, argv: list[str]) -> SandboxedCommand:
    """git inside the sandbox, the roots read-only: a repository's own config (filters, fsmonitor,
    hooks) can then run nothing on the host."""
    mounts = tuple(Mount(str(r.host), r.name, writable=False) for r in roots.roots)
    bwrap = find_bwrap()
    if bwrap is None:
        raise ToolError(f"git_read is not available here: {shell_problem()}")
    init = NamespaceInit()
    sandbox = [bwrap, *bwrap_arguments(SandboxSpec(mounts=mounts, cwd=top)), *init.arguments(), "--", *argv]
    cgroups = CallCgroups.create(LIMITS)
    env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "HOME": "/tmp", "GIT_PAGER": "cat", "GIT_EDITOR": ":",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
           "GIT_OPTIONAL_LOCKS": "0"}  # fmt: skip
    return SandboxedCommand(limited_command(LIMITS, sandbox, cgroups), env, cgroups, init)


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    max_bytes = args.get("max_bytes") or DEFAULT_MAX_BYTES
    if not isinstance(max_bytes, int | float) or max_bytes <= 0:
        raise ToolError(
            f"max_bytes must be a positive number (default {DEFAULT_MAX_BYTES}, at most {MAX_BYTES})"
        )
    max_bytes = min(int(max_bytes), MAX_BYTES)
    roots = WorkspaceRoots.for_persona(ctx.settings, ctx.persona, ctx.thread_id, "read")
    if not roots.roots:
        roots = WorkspaceRoots.for_persona(ctx.settings, replace(ctx.persona, capabilities=("fs.read:thread",)),
                                           ctx.thread_id, "read")  # fmt: skip
    top, relative = await asyncio.to_thread(_repo_and_paths, roots, args.get("repo"), args.get("paths") or [])
    argv = git_argv(
        "/usr/bin/git", args["subcommand"], list(args.get("args") or []), relative, args.get("pattern")
    )
    command = _command(roots, top, argv)
    proc = await process.start(command)
    try:
        async with asyncio.timeout(TIMEOUT):
            out = await proc.stdout.read(max_bytes + 1)  # type: ignore[union-attr]
            truncated = len(out) > max_bytes
            err = b"" if truncated else await proc.stderr.read(4096)  # type: ignore[union-attr]
            code = None if truncated else await proc.wait()
    except TimeoutError:
        raise ToolError(
            f"git {args['subcommand']} took longer than {TIMEOUT:g} s; narrow the query"
        ) from None
    finally:
        await process.stop(proc, command)
    if code not in (0, None) and not (args["subcommand"] == "grep" and code == 1 and not err):
        raise ToolError(f"git {args['subcommand']} failed: {err.decode(errors='replace').strip()[:500]}")
    result: dict[str, Any] = {"output": out[:max_bytes].decode("utf-8", errors="replace")}
    if truncated:
        result["truncated"] = True
        result["note"] = (
            f"output cut at {max_bytes} bytes; narrow the query (paths, --max-count) or raise max_bytes"
        )
    return result


TOOL = HostTool(
    mcp_name="git_read",
    internal_name="git.read",
    prefix="git.read",
    description=(
        "Run a read-only git query (no shell, argv only) on a repository in /workspace or /shared. "
        "Subcommands: status, log, diff, show, grep, tag (listing), branch (listing), blame, ls-files, "
        "rev-parse, each with a fixed option allowlist; -c, --output, -o, --ext-diff, --textconv, --exec, "
        "-O and %G placeholders are rejected. Paths must stay inside the repository and are passed after --."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "subcommand": {"type": "string", "enum": list(SUBCOMMANDS)},
            "args": {
                "type": "array",
                "items": {"type": "string"},
                "description": 'Allowlisted options and revisions, one token each (e.g. ["--oneline", '
                '"--max-count=20", "main..HEAD"]).',
            },
            "paths": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Pathspecs relative to repo.",
            },
            "pattern": {
                "type": "string",
                "description": "Search pattern; required for grep, invalid otherwise.",
            },
            "repo": {"type": "string", "description": "The repository folder (default /workspace)."},
            "max_bytes": {
                "type": "number",
                "description": "Output cap in bytes (default 51200, ceiling 204800).",
            },
        },
        "required": ["subcommand"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=TIMEOUT + 5,
    available=shell_available,
)
