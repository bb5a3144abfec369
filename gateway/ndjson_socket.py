"""An owner-only Unix socket server speaking newline-delimited JSON.

The socket is created ``0600`` under umask ``0177``, so there is no moment at which another
user could connect; the directory it lives in (the ``0700`` data dir) is the caller's. Each
line a client sends is one request, read and decoded within the bounds of
:mod:`gateway.jsonsafe`. A line that is not a request (too long, not UTF-8, not JSON, nested
too deeply, not an object) is answered with the subclass's refusal and the connection goes on
with the next line: nothing a client sends can stop the server.

A subclass speaks its protocol through three hooks: :meth:`NDJSONServer.handle_request`
answers one request with any number of reply lines, :meth:`NDJSONServer.refusal` words the
reply to a line that is not a request, and :meth:`NDJSONServer.failure` words the reply to a
request whose handler raised. No other gateway module is imported apart from
:mod:`gateway.jsonsafe`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gateway.jsonsafe import JSONInputError, loads, read_line

__all__ = ["NDJSONServer", "Reply"]

Reply = Callable[[dict[str, Any]], Awaitable[None]]
"""Writes one reply line to the client of a request."""


class NDJSONServer(abc.ABC):
    """Listens on a Unix socket and serves newline-delimited JSON requests.

    Args:
        path (:class:`pathlib.Path`): Where to create the socket, in an owner-only directory.
        max_line (:obj:`int`): The longest request line accepted, in bytes.
        max_in_flight (:obj:`int`, optional): Requests one connection may have running at once.
            With ``1`` (the default) a connection's requests are answered in order, and its next
            line is read only once the request before it has been answered; with more, each
            request runs in a task of its own, replies may come out of order, and requests
            still running when the client leaves are cancelled.
        skip_blank_lines (:obj:`bool`, optional): Ignore lines that hold only whitespace
            instead of refusing them as malformed.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_line: int,
        max_in_flight: int = 1,
        skip_blank_lines: bool = False,
    ):
        self.path = path
        self.max_line = max_line
        self.max_in_flight = max_in_flight
        self.skip_blank_lines = skip_blank_lines
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ protocol hooks

    @abc.abstractmethod
    async def handle_request(self, request: dict[str, Any], reply: Reply) -> None:
        """Answer one request, writing each reply line with ``reply``."""

    @abc.abstractmethod
    def refusal(self, reason: str, *, too_long: bool) -> dict[str, Any]:
        """The reply to a line that is not a request.

        Args:
            reason: Why, quoting none of the line (e.g. ``"a request is a JSON object"``).
            too_long: The line was longer than :attr:`max_line` (and was dropped unread).
        """

    @abc.abstractmethod
    def failure(self, request: dict[str, Any], exc: Exception) -> dict[str, Any]:
        """The reply to ``request`` after its handler raised ``exc``.

        Called inside the ``except`` block, so ``logging.exception`` records the traceback.
        """

    def encode(self, reply: dict[str, Any]) -> bytes:
        """One reply as a line's bytes, without the newline."""
        return json.dumps(reply).encode()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Listen (replacing a stale socket file left by a crashed daemon)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old_umask = os.umask(0o177)  # created 0600 from the start: no window for another user
        try:
            self._server = await asyncio.start_unix_server(
                self._connection, path=str(self.path), limit=self.max_line
            )
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)

    def stop_listening(self) -> None:
        """No new connections; those open keep being served until :meth:`stop`."""
        if self._server is not None:
            self._server.close()

    async def stop(self) -> None:
        """Stop listening, cancel open connections (and their requests), remove the socket."""
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    # ------------------------------------------------------------ connections

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        write_lock = asyncio.Lock()

        async def reply(obj: dict[str, Any]) -> None:
            async with write_lock:
                writer.write(self.encode(obj) + b"\n")
                await writer.drain()

        try:
            if self.max_in_flight > 1:
                await self._serve_concurrently(reader, reply)
            else:
                await self._serve_in_order(reader, reply)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, asyncio.CancelledError):
            # The client left, or stop() cancelled the connection: ending normally keeps
            # asyncio's stream callback from reporting either as an error.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_in_order(self, reader: asyncio.StreamReader, reply: Reply) -> None:
        while (request := await self._next_request(reader, reply)) is not None:
            try:
                await self.handle_request(request, reply)
            except (ConnectionError, asyncio.IncompleteReadError):
                raise
            except Exception as exc:
                await reply(self.failure(request, exc))

    async def _serve_concurrently(self, reader: asyncio.StreamReader, reply: Reply) -> None:
        slots = asyncio.Semaphore(self.max_in_flight)
        running: set[asyncio.Task[None]] = set()

        async def serve(request: dict[str, Any]) -> None:
            try:
                await self.handle_request(request, reply)
            except (ConnectionError, asyncio.CancelledError):
                pass
            except Exception as exc:  # one request's failure never takes the connection down
                answer = self.failure(request, exc)
                with contextlib.suppress(Exception):
                    await reply(answer)
            finally:
                slots.release()

        try:
            while (request := await self._next_request(reader, reply)) is not None:
                await slots.acquire()
                call = asyncio.create_task(serve(request))
                running.add(call)
                call.add_done_callback(running.discard)
        finally:
            for call in list(running):
                call.cancel()  # the client is gone: nobody would read the result
            await asyncio.gather(*running, return_exceptions=True)

    async def _next_request(self, reader: asyncio.StreamReader, reply: Reply) -> dict[str, Any] | None:
        """The connection's next request, or :obj:`None` at its end; lines that are not
        requests are answered with a :meth:`refusal` on the way."""
        while True:
            try:
                line = await read_line(reader, self.max_line)
            except JSONInputError as exc:  # the framing is intact: the next line is served
                await reply(self.refusal(str(exc), too_long=True))
                continue
            if line is None:
                return None
            if self.skip_blank_lines and not line.strip():
                continue
            try:
                request = loads(line, max_bytes=self.max_line)
            except JSONInputError as exc:
                await reply(self.refusal(str(exc), too_long=False))
                continue
            if not isinstance(request, dict):
                await reply(self.refusal("a request is a JSON object", too_long=False))
                continue
            return request
