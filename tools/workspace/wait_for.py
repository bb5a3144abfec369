"""``wait_for`` (``shell.exec:sandbox``): wait for a URL, a file, a background job or a command.

The polling runs here, not through model turns. A wait ends when its condition is met
(``met``), when ``timeout_ms`` passes (``timed_out``, an answer rather than an error), or when
a new message arrives in the thread (``yielded_to_user``: the model should end its turn so it
is heard). Between polls the wait sleeps ``poll_interval_ms`` (at least 1 s), growing with
``backoff`` (``linear``: n times the interval before the n+1-th poll, ``exponential``: 2^(n-1)
times), and looks for a new message every :data:`INBOX_CHECK` seconds meanwhile.

- ``url``: a HEAD (GET with ``body_contains``) made as net_http makes it, through the egress
  guard of :mod:`tools.ssrf` with net_http's allowlists; only for a persona that may reach the
  network at all (a ``net.http`` label or ``shell.network`` in persona.yaml).
- ``file``: a path under ``/workspace`` or ``/shared``, resolved by
  :mod:`tools.workspace.roots` at every poll (optionally until it contains a text).
- ``process``: the pid of a background job of this thread (:mod:`tools.workspace.jobs`);
  no other process can be named.
- ``command``: a shell command in the thread's sandbox, polled until it exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from gateway.labels import granted_scopes
from gateway.store.queue import waiting_message
from tools.base import HostTool, ToolContext, ToolError
from tools.egress import egress_policy, fetch
from tools.workspace import jobs, process
from tools.workspace.roots import WORKSPACE, Root, WorkspaceRoots, open_regular, thread_workspace
from tools.workspace.sandbox import sandboxed_command, shell_available
from tools.workspace.shell import MAX_COMMAND_CHARS

__all__ = ["TOOL", "wait_for"]

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
DEFAULT_POLL_MS = 5_000
MIN_POLL_MS = 1_000
BACKOFFS = ("none", "linear", "exponential")
INBOX_CHECK = 0.5
URL_TIMEOUT = 10.0  # one poll of a URL
COMMAND_TIMEOUT = 60.0  # one run of a polled command
SCAN_BYTES = 8 * 1024 * 1024  # how much of a file content_contains searches
SHOWN_CHARS = 2000  # of a polled command's last output
_CHUNK = 1 << 20

Poll = Callable[[float], Awaitable[tuple[bool, dict[str, Any]]]]


@dataclass(slots=True)
class _Probe:
    """One condition: ``poll(remaining)`` says whether it is met and what it saw; ``wake`` (when
    set) ends a pause early because the condition may have changed."""

    poll: Poll
    wake: asyncio.Event | None = None
    seen: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- arguments


def _number(args: dict[str, Any], key: str, default: int, low: int, high: int | None = None) -> float:
    """``args[key]`` in milliseconds, clamped to ``[low, high]``; seconds."""
    value = args.get(key)
    if value is None:
        return default / 1000
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        ceiling = f" (at most {high})" if high else ""
        raise ToolError(f"{key} must be a positive number of milliseconds{ceiling}; got {value!r}")
    return min(max(float(value), low), high or float("inf")) / 1000


def _text(args: dict[str, Any], key: str, needed_by: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"type {needed_by} needs {key}: a non-empty string")
    return value


def _optional_text(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolError(f"{key} must be a string; got {type(value).__name__}")
    return value


def _delay(interval: float, backoff: str, polls: int) -> float:
    """The pause after the ``polls``-th poll."""
    if backoff == "linear":
        return interval * polls
    if backoff == "exponential":
        return interval * 2 ** min(polls - 1, 20)
    return interval


# ---------------------------------------------------------------- probes


def _url_probe(ctx: ToolContext, args: dict[str, Any]) -> _Probe:
    raw = _text(args, "url", "url")
    try:
        url = URL(raw.strip())
    except (ValueError, TypeError) as exc:
        raise ToolError(f"url {raw!r} is not a valid URL: {exc}") from None
    if not (granted_scopes(ctx.persona.capabilities, "net.http") or ctx.persona.shell_network):
        raise ToolError(
            "this persona may not reach the network (no net.http label and no shell.network in persona.yaml), "
            "so wait_for cannot poll a URL; wait for a file or a command instead"
        )
    contains = _optional_text(args, "body_contains")
    method = args.get("method") or ("GET" if contains is not None else "HEAD")
    if not isinstance(method, str) or method.upper() not in ("HEAD", "GET"):
        raise ToolError(f"method must be HEAD or GET; got {method!r}")
    method = method.upper()
    if contains is not None and method == "HEAD":
        raise ToolError("body_contains needs the body: send method GET (or leave method out)")
    expected = args.get("expected_status")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)):
        raise ToolError(f"expected_status must be an HTTP status code such as 200; got {expected!r}")
    policy = egress_policy(ctx)
    cap = ctx.settings.net_http.max_response_bytes
    polled = False

    async def poll(remaining: float) -> tuple[bool, dict[str, Any]]:
        nonlocal polled
        first, polled = not polled, True
        try:
            async with asyncio.timeout(min(URL_TIMEOUT, max(remaining, 0.1))):
                reply = await fetch(method, url, policy, cap)
        except ToolError as exc:
            if first:  # refused by the guard, or not resolvable: polling will not change it
                raise
            return False, {"last_error": str(exc)}
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return False, {"last_error": f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__}
        status = reply["status"]
        ok = status == expected if expected is not None else 200 <= status < 300
        if ok and contains is not None:
            ok = reply.get("bodyEncoding") == "text" and contains in reply["body"]
        return ok, {"last_status": status}

    return _Probe(poll)


def _wait_roots(ctx: ToolContext) -> WorkspaceRoots:
    """The roots the shell sees: /workspace always, /shared as the fs labels open it."""
    found: dict[str, Root] = {}
    for access in ("read", "write"):
        for root in WorkspaceRoots.for_call(ctx, access).roots:  # type: ignore[arg-type]
            found.setdefault(root.name, root)
    if WORKSPACE not in found:
        own = thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id)
        own.mkdir(parents=True, exist_ok=True)
        found[WORKSPACE] = Root(WORKSPACE, own.resolve(), True)
    return WorkspaceRoots((found.pop(WORKSPACE), *found.values()), "read")


def _file_probe(ctx: ToolContext, args: dict[str, Any]) -> _Probe:
    path = _text(args, "path", "file")
    contains = _optional_text(args, "content_contains")
    roots = _wait_roots(ctx)
    roots.resolve(path, what="path", missing_parents_ok=True).close()  # refuse a bad path at once

    def look() -> tuple[bool, dict[str, Any]]:
        with roots.resolved(path, what="path", missing_parents_ok=True) as resolved:
            seen: dict[str, Any] = {"path": resolved.virtual, "exists": resolved.exists}
            if not resolved.exists:
                return False, seen
            if contains is None:
                return True, seen
            if resolved.is_dir:
                raise ToolError(f"path {resolved.virtual!r} is a folder; content_contains needs a file")
            fd, _st = open_regular(resolved, what="path")
        try:
            return _contains(fd, contains.encode()), seen
        finally:
            os.close(fd)

    async def poll(remaining: float) -> tuple[bool, dict[str, Any]]:
        return await asyncio.to_thread(look)

    return _Probe(poll)


def _contains(fd: int, needle: bytes) -> bool:
    """Whether the first :data:`SCAN_BYTES` of ``fd`` hold ``needle``, read in chunks."""
    position, tail = 0, b""
    while position < SCAN_BYTES and (chunk := os.pread(fd, _CHUNK, position)):
        position += len(chunk)
        if needle in tail + chunk:
            return True
        tail = (tail + chunk)[-(len(needle) - 1) :] if len(needle) > 1 else b""
    return False


def _process_probe(ctx: ToolContext, args: dict[str, Any]) -> _Probe:
    pid = args.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int | float) or pid != int(pid) or pid <= 0:
        raise ToolError(f"type process needs pid: the pid bash returned for a background job; got {pid!r}")
    job = jobs.find_job((ctx.persona.name, ctx.thread_id), int(pid))
    if job is None:
        raise ToolError(
            f"pid {int(pid)} is not a background job of this thread; wait_for type process takes only the pid "
            "that bash with run_in_background returned here (other processes cannot be waited for)"
        )

    async def poll(remaining: float) -> tuple[bool, dict[str, Any]]:
        seen = job.status()
        seen["job_status"] = seen.pop("status")
        return job.ended.is_set(), seen

    return _Probe(poll, wake=job.ended)


def _command_probe(ctx: ToolContext, args: dict[str, Any]) -> _Probe:
    command = _text(args, "command", "command")
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        raise ToolError(f"command must be at most {MAX_COMMAND_CHARS:,} characters without NUL bytes")

    async def poll(remaining: float) -> tuple[bool, dict[str, Any]]:
        sandboxed = sandboxed_command(ctx, command)
        done = await process.run_captured(sandboxed, max(0.5, min(COMMAND_TIMEOUT, remaining)))
        seen: dict[str, Any] = {"last_exit_code": done.exit_code}
        if done.stdout:
            seen["last_stdout"] = done.stdout[-SHOWN_CHARS:]
        if done.stderr:
            seen["last_stderr"] = done.stderr[-SHOWN_CHARS:]
        return done.exit_code == 0, seen

    return _Probe(poll)


_PROBES = {"url": _url_probe, "file": _file_probe, "process": _process_probe, "command": _command_probe}


# ---------------------------------------------------------------- the wait


async def _user_wrote(ctx: ToolContext) -> bool:
    return await ctx.db.read(waiting_message, ctx.thread_id)


async def _pause(ctx: ToolContext, seconds: float, wake: asyncio.Event | None) -> bool:
    """Sleep ``seconds`` (less if ``wake`` is set); True when a new message came meanwhile."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        step = min(INBOX_CHECK, left)
        if wake is None:
            await asyncio.sleep(step)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), step)
        if await _user_wrote(ctx):
            return True
        if wake is not None and wake.is_set():
            return False
    return False


async def wait_for(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Poll the condition ``args`` name; see the module docstring."""
    kind = args.get("type")
    if kind not in _PROBES:
        raise ToolError(f"type must be one of url, file, process or command; got {kind!r}")
    timeout = _number(args, "timeout_ms", DEFAULT_TIMEOUT_MS, 1, MAX_TIMEOUT_MS)
    interval = _number(args, "poll_interval_ms", DEFAULT_POLL_MS, MIN_POLL_MS)
    backoff = args.get("backoff") or "none"
    if backoff not in BACKOFFS:
        raise ToolError(f"backoff must be none, linear or exponential; got {backoff!r}")
    probe = _PROBES[kind](ctx, args)
    started = time.monotonic()
    deadline = started + timeout
    polls = 0

    def answer(status: str, **extra: Any) -> dict[str, Any]:
        elapsed = int((time.monotonic() - started) * 1000)
        return {**probe.seen, "type": kind, "status": status, "elapsed_ms": elapsed, "polls": polls, **extra}

    while True:
        if await _user_wrote(ctx):
            return answer(
                "yielded_to_user",
                note="the user sent a new message: end your turn so it is heard, and wait again later "
                "only if still needed",
            )
        met, probe.seen = await probe.poll(deadline - time.monotonic())
        polls += 1
        if met:
            return answer("met")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return answer(
                "timed_out",
                note=f"not met within {timeout * 1000:g} ms (timeout_ms, at most {MAX_TIMEOUT_MS}); "
                "this is an answer, not an error",
            )
        await _pause(ctx, min(_delay(interval, backoff, polls), remaining), probe.wake)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": list(_PROBES), "description": "What to wait for."},
        "url": {"type": "string", "description": "Required for url: HTTP/HTTPS endpoint to poll."},
        "method": {
            "type": "string",
            "enum": ["HEAD", "GET"],
            "description": "(url type) HTTP method: HEAD or GET. Default: HEAD.",
        },
        "expected_status": {
            "type": "integer",
            "description": "(url type) Expected HTTP status code. Default: any 2xx.",
        },
        "body_contains": {
            "type": "string",
            "description": "(url type) Substring required in the response body. Uses GET when method is omitted.",
        },
        "path": {
            "type": "string",
            "description": "Required for file: /workspace/..., /shared/... or relative to /workspace, watched "
            "for existence.",
        },
        "content_contains": {
            "type": "string",
            "description": "(file type) Substring the file content must contain.",
        },
        "pid": {
            "type": "integer",
            "description": "(process type) The pid bash returned for a background job of this conversation. "
            "Met when that job ends.",
        },
        "command": {
            "type": "string",
            "description": "Required for command: shell command to run repeatedly in the sandbox. Met when it "
            "exits 0.",
        },
        "timeout_ms": {
            "type": "number",
            "description": f"Max wait time in ms (default {DEFAULT_TIMEOUT_MS}, max {MAX_TIMEOUT_MS}).",
        },
        "poll_interval_ms": {
            "type": "number",
            "description": f"Delay between polls in ms (default {DEFAULT_POLL_MS}, min {MIN_POLL_MS}).",
        },
        "backoff": {
            "type": "string",
            "enum": list(BACKOFFS),
            "description": "none (default, fixed interval), linear, or exponential.",
        },
    },
    "required": ["type"],
    "additionalProperties": False,
}

TOOL = HostTool(
    mcp_name="wait_for",
    internal_name="shell.wait_for",
    prefix="shell.exec",
    description=(
        "Block on an external condition without using model turns: a URL (through the egress guard), a "
        "file in /workspace or /shared, a background job of this conversation (its pid from bash "
        "run_in_background) or a command in the sandbox that exits 0. Returns status met, timed_out (not "
        "an error) or yielded_to_user: the user wrote a new message, so end your turn and let it be "
        "heard, then wait again only if still needed. Private, loopback, link-local and metadata "
        "addresses are refused unless the operator allowed them."
    ),
    input_schema=SCHEMA,
    handler=wait_for,
    timeout=MAX_TIMEOUT_MS / 1000 + COMMAND_TIMEOUT + 30,
    available=shell_available,
)
