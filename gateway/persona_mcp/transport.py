"""MCP client transports for persona servers, with a signal for when the server goes away."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from gateway.persona_mcp.sandbox import LaunchSpec
from gateway.persona_mcp.settings import HttpServerSettings

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["StderrLog", "http_transport", "stdio_transport", "watched"]

# Each server's stderr log is started afresh (the old one kept as .1) past this size.
_LOG_ROTATE_BYTES = 1_000_000


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


def stdio_transport(launch: LaunchSpec, errlog: TextIO) -> AbstractAsyncContextManager[TransportStreams]:
    """The SDK's stdio transport for ``launch``; the server's stderr goes to ``errlog``."""
    params = StdioServerParameters(
        command=launch.command, args=list(launch.args), env=launch.env, cwd=launch.cwd
    )
    return stdio_client(params, errlog=errlog)


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
