"""Client side of the control socket, shared by the CLI commands."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from gateway.control import MAX_LINE, SOCKET_NAME
from gateway.errors import TransientError
from gateway.jsonsafe import JSONInputError, loads, read_line


class DaemonNotRunningError(TransientError):
    """Nothing listens on the data dir's control socket."""

    def __init__(self, data_dir: Path):
        super().__init__(f"the Talon daemon is not running for {data_dir} (start it with `talon run`)")


class ControlClient:
    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.path = data_dir / SOCKET_NAME
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> ControlClient:
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(str(self.path), limit=MAX_LINE)
        except (FileNotFoundError, ConnectionRefusedError):
            raise DaemonNotRunningError(self.data_dir) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Send one request; yield replies until ``done`` or ``error`` (inclusive).

        A reply line that cannot be read ends the stream with an ``error`` reply saying why,
        and closes the connection: what follows could not be told apart from the replies
        to a next request.
        """
        assert self._reader and self._writer
        self._writer.write(json.dumps(request).encode() + b"\n")
        await self._writer.drain()
        while True:
            try:
                line = await read_line(self._reader, MAX_LINE)
                if line is None:
                    raise ConnectionError("the daemon closed the connection")
                reply = loads(line, max_bytes=MAX_LINE)
                if not isinstance(reply, dict):
                    raise JSONInputError("a reply is a JSON object")
            except JSONInputError as exc:
                self._writer.close()
                yield {"type": "error", "error": f"unreadable reply from the daemon: {exc}"}
                return
            yield reply
            if reply.get("type") in ("done", "error"):
                return

    async def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """A request with a single final answer."""
        last: dict[str, Any] = {}
        async for reply in self.stream(request):
            last = reply
        return last
