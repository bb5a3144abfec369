"""Client side of the bridge socket, used by ``talon mcp host-tools``.

One connection carries any number of concurrent requests, matched to their replies by
``id`` (see :mod:`tools.bridge_server` for the protocol).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.errors import RefusedError, TransientError
from gateway.jsonsafe import JSONInputError, loads, read_line
from tools.bridge import ENV_PERSONA, ENV_RUN_ID, ENV_SECRET, ENV_SOCKET, ENV_THREAD, BridgeAuthError
from tools.bridge_server import MAX_LINE

__all__ = [
    "BridgeClient",
    "BridgeCredentials",
    "BridgeRequestError",
    "BridgeUnavailableError",
    "credentials_from_env",
]

_ENV_NAMES = (ENV_SOCKET, ENV_RUN_ID, ENV_SECRET, ENV_THREAD, ENV_PERSONA)
# A reply carries a tool's result, which may be larger than any request.
_REPLY_LIMIT = MAX_LINE * 4


class BridgeUnavailableError(TransientError):
    """The daemon's bridge socket cannot be reached, the connection was lost, or a reply
    could not be read."""


class BridgeRequestError(RefusedError):
    """The bridge refused the request itself (malformed, too large) or failed on it; the
    message is the bridge's."""


@dataclass(frozen=True, slots=True)
class BridgeCredentials:
    """A run identity as a bridge client holds it: where to connect and what to claim."""

    socket: Path
    run_id: int
    thread_id: int
    persona: str
    secret: str = field(repr=False)

    def claims(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "secret": self.secret,
            "thread_id": self.thread_id,
            "persona": self.persona,
        }


def credentials_from_env(env: Mapping[str, str] | None = None) -> BridgeCredentials | None:
    """Read a run identity from ``TALON_BRIDGE_SOCKET``, ``TALON_RUN_ID``, ``TALON_RUN_SECRET``,
    ``TALON_THREAD_ID`` and ``TALON_PERSONA``.

    Returns:
        :class:`BridgeCredentials` | :obj:`None`: ``None`` when none of them is set.

    Raises:
        :exc:`ValueError`: Some are set but not all, or an id is not a number.
    """
    env = os.environ if env is None else env
    present = {name: env.get(name, "") for name in _ENV_NAMES}
    if not any(present.values()):
        return None
    missing = [name for name, value in present.items() if not value]
    if missing:
        raise ValueError(f"incomplete run identity in the environment: {', '.join(missing)} not set")
    try:
        run_id, thread_id = int(present[ENV_RUN_ID]), int(present[ENV_THREAD])
    except ValueError:
        raise ValueError(f"{ENV_RUN_ID} and {ENV_THREAD} must be whole numbers") from None
    return BridgeCredentials(
        Path(present[ENV_SOCKET]), run_id, thread_id, present[ENV_PERSONA], present[ENV_SECRET]
    )


class BridgeClient:
    """A connection to the bridge socket acting as one run.

    Args:
        credentials (:class:`BridgeCredentials`): The run identity and socket path.
        timeout (:obj:`float`, optional): Seconds to wait for any one reply.
    """

    def __init__(self, credentials: BridgeCredentials, *, timeout: float = 600.0):
        self.credentials = credentials
        self.timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._receiver: asyncio.Task[None] | None = None
        self._connect_lock = asyncio.Lock()

    async def __aenter__(self) -> BridgeClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the connection (again, after it was lost).

        Raises:
            :class:`BridgeUnavailableError`: The daemon is not listening there.
        """
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return
            try:
                self._reader, self._writer = await asyncio.open_unix_connection(
                    str(self.credentials.socket), limit=_REPLY_LIMIT
                )
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                raise BridgeUnavailableError(
                    f"the Talon daemon's bridge socket {self.credentials.socket} is not accepting connections "
                    f"({exc.__class__.__name__}); is the daemon running?"
                ) from None
            self._receiver = asyncio.create_task(self._receive(self._reader), name="bridge-client")

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        if self._receiver is not None:
            self._receiver.cancel()
            await asyncio.gather(self._receiver, return_exceptions=True)
        self._fail_pending(BridgeUnavailableError("the bridge connection was closed"))

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools this run's persona may use: name, description, inputSchema."""
        reply = await self.request({"op": "list"})
        return list(reply["tools"])

    async def call(self, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Call ``tool``; the reply has ``content``, ``is_error`` and ``unknown_tool``."""
        return await self.request({"op": "call", "tool": tool, "arguments": dict(arguments or {})})

    async def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Send one request with this run's claims and wait for its reply.

        Raises:
            :class:`BridgeUnavailableError`: The socket is unreachable or closed mid-request.
            :class:`~tools.bridge.BridgeAuthError`: The bridge refused the run identity.
            :class:`BridgeRequestError`: The bridge refused the request or failed on it.
        """
        if self._writer is None or self._writer.is_closing():
            await self.connect()
        assert self._writer is not None
        rid = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            self._writer.write(
                json.dumps({**payload, **self.credentials.claims(), "id": rid}).encode() + b"\n"
            )
            await self._writer.drain()
            async with asyncio.timeout(self.timeout):
                reply = await future
        except (ConnectionError, OSError) as exc:
            raise BridgeUnavailableError(f"lost the bridge connection: {exc}") from None
        finally:
            self._pending.pop(rid, None)
        if reply.get("ok"):
            return reply
        message = str(reply.get("error") or "request refused")
        if reply.get("code") == "unauthorized":
            raise BridgeAuthError(message)
        raise BridgeRequestError(message)

    async def _receive(self, reader: asyncio.StreamReader) -> None:
        error: Exception = BridgeUnavailableError("the daemon closed the bridge connection")
        try:
            while True:
                try:
                    line = await read_line(reader, _REPLY_LIMIT)
                    if line is None:
                        break
                    if not line.strip():
                        continue
                    reply = loads(line, max_bytes=_REPLY_LIMIT)
                except JSONInputError as exc:
                    # Whose reply it was cannot be known: every waiting request fails now
                    # rather than wait out its timeout. The framing is intact, so the
                    # connection goes on.
                    self._fail_pending(
                        BridgeUnavailableError(f"the bridge sent a reply that cannot be read: {exc}")
                    )
                    continue
                rid = reply.get("id") if isinstance(reply, dict) else None
                future = self._pending.get(rid) if isinstance(rid, int) else None
                if future is not None and not future.done():
                    future.set_result(reply)
        except ConnectionError as exc:
            error = BridgeUnavailableError(f"lost the bridge connection: {exc}")
        finally:
            self._fail_pending(error)
            if self._writer is not None:
                self._writer.close()

    def _fail_pending(self, error: Exception) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
