"""The stdio transport of ``talon mcp host-tools``: MCP messages on stdin/stdout, on the event loop.

:func:`stdio_server` yields the ``(read_stream, write_stream)`` pair that
``mcp.server.lowlevel.Server.run`` takes, with the contract of the SDK's
``mcp.server.stdio.stdio_server``:

- one JSON-RPC message per line, UTF-8 (undecodable bytes become U+FFFD);
- a line that is not a valid message is delivered into the read stream as the exception
  it raised, and reading goes on; the end of stdin ends the read stream;
- replies are written as ``model_dump_json(by_alias=True, exclude_unset=True)`` plus a newline;
- while serving, file descriptor 0 reads the null device and 1 writes to stderr, so stray
  reads and prints cannot touch the wire; both are restored on exit.

The SDK's transport moves every line through worker threads (a read, a write and a flush)
and memory-object streams. This one reads and writes the pipes with asyncio's pipe
transports, so a message costs no thread hop. It applies when stdin and stdout are pipes
or sockets (each its own), as MCP clients connect them; otherwise (a terminal, a file,
replaced ``sys`` streams) the SDK's transport is used.

Why it is not the SDK's transport everywhere: ``python -m bench.bench_host_tools`` (mcp
2.3.0; 2 cores loaded by other work; the two run interleaved, 3 runs and 12 rounds against
one daemon each) times a host tool call over MCP at p50 1.1-1.5 ms over this transport and
2.0-2.2 ms over the SDK's (medians; single runs 1.0-2.6 ms here, 1.5-5.2 ms there, where
2 of 30 missed the 3 ms target). With a bridge that answers at once the server alone takes
0.4 ms here and 0.9-1.0 ms there. p99 follows the machine's load with either (3-24 ms).
The SDK's transport also lets text still in ``sys.stdout``'s buffer reach the wire at exit,
and ends with a ``BrokenPipeError`` traceback (exit status 1) when the client closes its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Self

import anyio
from mcp import types
from mcp.server import stdio as sdk_stdio
from mcp.shared.message import SessionMessage

__all__ = ["StdinMessages", "StdoutMessages", "stdio_server"]

# Lines longer than this are read in parts: a line's length has no limit.
_READ_CHUNK = 1 << 20
# Time for the last replies to reach a client that stopped reading, at exit.
_FLUSH_TIMEOUT = 5.0


class StdinMessages:
    """The read stream: MCP messages (or the exceptions malformed lines raised) from a pipe."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport):
        self._reader = reader
        self._transport = transport
        self._closed = False

    async def receive(self) -> SessionMessage | Exception:
        """The next message.

        Raises:
            :class:`anyio.EndOfStream`: stdin has ended.
            :class:`anyio.ClosedResourceError`: This stream was closed.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        line = await self._readline()
        if not line:
            raise anyio.EndOfStream
        try:
            message = types.jsonrpc_message_adapter.validate_json(
                line.decode("utf-8", errors="replace"), by_name=False
            )
        except Exception as exc:  # the session decides what a bad line means
            return exc
        return SessionMessage(message)

    async def _readline(self) -> bytes:
        parts: list[bytes] = []
        while True:
            try:
                parts.append(await self._reader.readuntil(b"\n"))
                break
            except asyncio.LimitOverrunError as exc:
                parts.append(await self._reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:  # a last line without a newline
                parts.append(exc.partial)
                break
        return b"".join(parts)

    async def aclose(self) -> None:
        self._closed = True
        self._transport.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class StdoutMessages:
    """The write stream: each message as one line on a pipe, written without a thread hop."""

    def __init__(self, transport: asyncio.WriteTransport, flow: _FlowControl):
        self._transport = transport
        self._flow = flow
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        """Write one message.

        Raises:
            :class:`anyio.ClosedResourceError`: This stream was closed.
            :class:`anyio.BrokenResourceError`: The client closed its end of the pipe.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        if self._transport.is_closing():
            raise anyio.BrokenResourceError
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._transport.write(data.encode("utf-8") + b"\n")
        await self._flow.drain()

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _FlowControl(asyncio.Protocol):
    """The stdout pipe's protocol: senders wait while the pipe is full; :attr:`closed`
    completes when the pipe is closed, its buffered lines written."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._writable: asyncio.Future[None] | None = None
        self.closed: asyncio.Future[None] = loop.create_future()

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.resume_writing()
        if not self.closed.done():
            self.closed.set_result(None)

    async def drain(self) -> None:
        if self._writable is not None:
            await asyncio.shield(self._writable)  # shared by every waiting sender
        if self.closed.done():
            raise anyio.BrokenResourceError


@contextlib.asynccontextmanager
async def stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """Serve MCP over this process's stdin and stdout; yields ``(read_stream, write_stream)``."""
    _flush_stdout()  # what was printed before serving belongs on the wire
    if not _are_wires(sys.stdin, sys.stdout):
        async with sdk_stdio.stdio_server() as streams:
            try:
                yield streams
            finally:
                _flush_stdout()  # stray output printed while serving goes to stderr, not the wire
        return
    loop = asyncio.get_running_loop()
    with _claimed(0, _null_device) as wire_in, _claimed(1, _stderr) as wire_out:
        reader = asyncio.StreamReader(limit=_READ_CHUNK, loop=loop)
        flow = _FlowControl(loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(os.dup(wire_in), "rb", 0)
        )
        try:
            write_transport, _ = await loop.connect_write_pipe(
                lambda: flow, os.fdopen(os.dup(wire_out), "wb", 0)
            )
            try:
                yield StdinMessages(reader, read_transport), StdoutMessages(write_transport, flow)
            finally:
                write_transport.close()  # after the lines still buffered are written
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(flow.closed), _FLUSH_TIMEOUT)
        finally:
            read_transport.close()
            _flush_stdout()  # stray output printed while serving goes to stderr, not the wire


def _are_wires(stdin: Any, stdout: Any) -> bool:
    """Whether ``stdin`` and ``stdout`` are file descriptors 0 and 1, each a pipe or a socket
    of its own (one socket for both would look closed to the writer whenever it has input)."""
    try:
        if stdin.buffer.fileno() != 0 or stdout.buffer.fileno() != 1:
            return False
        modes = os.fstat(0), os.fstat(1)
    except (AttributeError, OSError, ValueError):
        return False
    if (modes[0].st_dev, modes[0].st_ino) == (modes[1].st_dev, modes[1].st_ino):
        return False
    return all(stat.S_ISFIFO(m.st_mode) or stat.S_ISSOCK(m.st_mode) for m in modes)


def _flush_stdout() -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()


def _null_device() -> int:
    return os.open(os.devnull, os.O_RDONLY)


def _stderr() -> int:
    return os.dup(2)


@contextlib.contextmanager
def _claimed(fd: int, divert: Callable[[], int]) -> Iterator[int]:
    """Yield a private duplicate of ``fd`` while ``fd`` itself points at ``divert()``.

    On exit ``fd`` is the wire again, in blocking mode (the pipe transports made the pipe,
    which the duplicates share, non-blocking).
    """
    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        diversion = divert()
        try:
            os.dup2(diversion, fd)
        finally:
            os.close(diversion)
        try:
            yield wire
        finally:
            os.set_blocking(wire, True)
            os.dup2(wire, fd)
    finally:
        os.close(wire)
