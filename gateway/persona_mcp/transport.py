"""MCP client transports for persona servers, with a signal for when the server goes away."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TextIO

import anyio
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from gateway.jsonsafe import JSONInputError, loads, read_line
from gateway.persona_mcp.sandbox import LaunchSpec
from gateway.persona_mcp.settings import HttpServerSettings

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["MAX_MESSAGE_BYTES", "StderrLog", "http_transport", "stdio_transport", "watched"]

log = logging.getLogger("talon.persona_mcp")

# Each server's stderr log is started afresh (the old one kept as .1) past this size.
_LOG_ROTATE_BYTES = 1_000_000
# The longest line a stdio server may print: one message, a tool result carrying an image
# or a long document included.
MAX_MESSAGE_BYTES = 16 << 20
# After its stdin closes a server has this long to exit; then its process group is
# signalled (SIGTERM, and SIGKILL after as long again).
_EXIT_GRACE = 2.0


class StderrLog:
    """A stdio server's stderr, appended to ``<data>/logs/mcp/<persona>.<server>.log``.

    Args:
        path (:class:`pathlib.Path`): The log file.
    """

    def __init__(self, path: Path):
        self.path = path
        self._offset: int | None = None

    def open(self) -> TextIO:
        """Open for a new launch; :meth:`tail` then reads only what that launch wrote."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size > _LOG_ROTATE_BYTES:
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        fh = open(self.path, "a", encoding="utf-8")  # closed by the caller
        os.chmod(self.path, 0o600)
        self._offset = fh.tell()
        return fh

    def forget(self) -> None:
        """A new start begins: nothing it has launched has written anything yet."""
        self._offset = None

    def tail(self, limit: int = 300) -> str:
        """The last line(s) the current launch wrote, at most ``limit`` characters."""
        if self._offset is None:
            return ""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()[-4096:]
        except OSError:
            return ""
        lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
        text = " | ".join(lines[-3:])
        return text[-limit:]


@asynccontextmanager
async def stdio_transport(
    launch: LaunchSpec, errlog: TextIO, *, label: str
) -> AsyncIterator[TransportStreams]:
    """Run ``launch`` and speak MCP with it over its stdin and stdout.

    The server's stderr goes to ``errlog``; ``label`` names it in the log. Each line it prints
    is decoded within bounds (:data:`MAX_MESSAGE_BYTES`, :mod:`gateway.jsonsafe`'s nesting
    cap); see :class:`_ServerOutput` for a line that cannot be a message. On exit its stdin
    is closed and, if it does not exit by itself, its process group is ended.
    """
    process = await asyncio.create_subprocess_exec(
        launch.command,
        *launch.args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment() | launch.env,
        cwd=launch.cwd,
        start_new_session=True,  # its own process group, ended as a whole
        limit=MAX_MESSAGE_BYTES,
    )
    assert process.stdin is not None and process.stdout is not None
    waiting: dict[str, types.RequestId] = {}
    try:
        yield _ServerOutput(process.stdout, waiting, label), _ServerInput(process.stdin, waiting)
    finally:
        # Shielded: a cancelled caller must not leave the server running.
        with anyio.CancelScope(shield=True):
            await _stop(process)


class _ServerOutput:
    """The read stream: the server's stdout, one JSON-RPC message per line.

    A line that cannot be read (malformed, too long, nested too deeply, not UTF-8) cannot say
    which request it answers, so every request still waiting for a reply is answered with a
    JSON-RPC error giving the reason: those calls fail at once instead of waiting out their
    timeout, and the server goes on serving the next ones. A readable line that is not a valid
    message fails only the request it names.
    """

    def __init__(self, stdout: asyncio.StreamReader, waiting: dict[str, types.RequestId], label: str):
        self._stdout = stdout
        self._waiting = waiting  # shared with _ServerInput: requests sent and not yet answered
        self._label = label
        self._answers: deque[SessionMessage] = deque()
        self._bad_lines = 0
        self._closed = False

    async def receive(self) -> SessionMessage:
        """The next message.

        Raises:
            :class:`anyio.EndOfStream`: The server closed its stdout.
            :class:`anyio.ClosedResourceError`: This stream was closed.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        while not self._answers:
            message = await self._next_message()
            if message is not None:
                return SessionMessage(message)
        return self._answers.popleft()

    async def _next_message(self) -> types.JSONRPCMessage | None:
        """The next line as a message; None when it was not one (and was answered for)."""
        try:
            line = await read_line(self._stdout, MAX_MESSAGE_BYTES)
            if line is None:
                raise anyio.EndOfStream
            if not line.strip():
                return None
            value = loads(line, max_bytes=MAX_MESSAGE_BYTES)
        except JSONInputError as exc:
            self._unreadable(str(exc), list(self._waiting))
            return None
        try:
            message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
        except ValidationError as exc:
            named = value.get("id") if isinstance(value, dict) else None
            keys = [str(named)] if isinstance(named, int | str) and str(named) in self._waiting else []
            self._unreadable(f"not a JSON-RPC message ({exc.error_count()} problems)", keys)
            return None
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._waiting.pop(str(message.id), None)
        return message

    def _unreadable(self, problem: str, keys: list[str]) -> None:
        """Answer the requests under ``keys`` with an error saying ``problem``; log it."""
        error = types.ErrorData(
            code=types.PARSE_ERROR, message=f"the MCP server's reply could not be read ({problem})"
        )
        for key in keys:
            request_id = self._waiting.pop(key)
            self._answers.append(
                SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
            )
        # A server printing garbage in a loop must not flood the log.
        self._bad_lines += 1
        level = logging.WARNING if self._bad_lines == 1 else logging.DEBUG
        log.log(level, "MCP server %s printed a line that is not a message: %s", self._label, problem)

    async def aclose(self) -> None:
        self._closed = True

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _ServerInput:
    """The write stream: each message as one line on the server's stdin."""

    def __init__(self, stdin: asyncio.StreamWriter, waiting: dict[str, types.RequestId]):
        self._stdin = stdin
        self._waiting = waiting
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        """Write one message.

        Raises:
            :class:`anyio.ClosedResourceError`: This stream was closed.
            :class:`anyio.BrokenResourceError`: The server's stdin is gone.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        if self._stdin.is_closing():
            raise anyio.BrokenResourceError
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            self._waiting[str(message.id)] = message.id
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            params: dict[str, Any] = message.params or {}
            self._waiting.pop(str(params.get("requestId")), None)
        data = message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            self._stdin.write(data.encode() + b"\n")
            await self._stdin.drain()
        except ConnectionError as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close the server's stdin (MCP's way of asking it to exit), wait, then end its group."""
    assert process.stdin is not None and process.stdout is not None
    drain = asyncio.create_task(_discard(process.stdout))  # a server blocked writing cannot exit
    try:
        process.stdin.close()
        if not await _exited(process, _EXIT_GRACE):
            await terminate_posix_process_tree(process, _EXIT_GRACE)  # type: ignore[arg-type]
            await _exited(process, _EXIT_GRACE)
    finally:
        drain.cancel()
        await asyncio.gather(drain, return_exceptions=True)


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the process exits within ``timeout`` seconds (``wait()`` would also wait for
    its pipes, which a child that inherited them keeps open)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while process.returncode is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def _discard(stdout: asyncio.StreamReader) -> None:
    with suppress(ConnectionError):
        while await stdout.read(1 << 16):
            pass


@asynccontextmanager
async def http_transport(settings: HttpServerSettings) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP transport, sending the entry's headers."""
    async with create_mcp_http_client(headers=settings.headers or None) as http:
        async with streamable_http_client(settings.url, http_client=http) as streams:
            yield streams


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[TransportStreams], closed: asyncio.Event
) -> AsyncIterator[TransportStreams]:
    """Pass ``transport`` through, setting ``closed`` when the server's side ends.

    A stdio server that exits closes its stream at once; noticing it here lets the next
    call start a new server instead of failing on the dead one.
    """
    async with transport as (read, write):
        relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async with relay_in:
                    async for item in read:
                        await relay_in.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                closed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            try:
                yield relay_out, write
            finally:
                tg.cancel_scope.cancel()
